"""Checkpoint restart's pure parts: Megatron-LM's checkpoint lines, the restart decision, the record a TrainJob
carries, and goodput charged for restarts (nvcre-contract.md §7.10). Expected values are worked out from the
reference's formula and Megatron-LM's own messages, not from the code's output."""

from __future__ import annotations

import pytest

from nvcre_argo.measure.checkpoints import last_saved_iteration, loaded_iteration
from nvcre_argo.steps.restarts import (
    RESTARTS_ANNOTATION,
    CheckpointSeen,
    Restart,
    completed_restart,
    decode_restarts,
    encode_restarts,
    goodput_factor,
    may_restart,
    restart_record,
)

DIRECTORY = "/mnt/checkpoints/cert-0-g0"
SAVED_20 = (
    f"[2026-01-01 00:02:08.000000] saving checkpoint at iteration      20 to {DIRECTORY} in torch_dist format\n"
    f"  [2026-01-01 00:02:09.000000] successfully saved checkpoint from iteration      20 to {DIRECTORY} "
    "[ t 1/2, p 1/1 ]\n"
)
STARTED_30 = (
    f"[2026-01-01 00:03:08.000000] saving checkpoint at iteration      30 to {DIRECTORY} in torch_dist format\n"
)
LOADED_20 = (
    f" loading distributed checkpoint from {DIRECTORY} at iteration 20\n"
    f"  successfully loaded checkpoint from {DIRECTORY} [ t 1/1, p 1/1 ] at iteration 20\n"
)


def test_only_a_completed_save_is_a_checkpoint_to_resume_from() -> None:
    assert last_saved_iteration(SAVED_20) == 20
    assert last_saved_iteration(SAVED_20 + STARTED_30) == 20, "a save the workload died in the middle of"
    assert last_saved_iteration("  successfully saved checkpoint at iteration 40 to /x\n") == 40  # older wording
    assert last_saved_iteration("iteration 40/ 50 | elapsed time per iteration (ms): 500.0 |\n") is None


def test_the_loaded_iteration_is_read_and_a_fresh_start_has_none() -> None:
    assert loaded_iteration(LOADED_20) == 20
    fresh = (
        f"WARNING: could not find the metadata file {DIRECTORY}/latest_checkpointed_iteration.txt\n"
        "    will not load any checkpoints and will start from random\n"
    )
    assert loaded_iteration(fresh) is None


@pytest.mark.parametrize(
    ("used", "allowed", "checkpoint", "expected"),
    [
        pytest.param(0, 3, CheckpointSeen(10, 5.0), True, id="restarts-left-and-a-checkpoint"),
        pytest.param(3, 3, CheckpointSeen(10, 5.0), False, id="no-restart-left"),
        pytest.param(0, 3, None, False, id="nothing-to-resume-from"),
        pytest.param(0, 0, CheckpointSeen(10, 5.0), False, id="max-restarts-0"),
    ],
)
def test_a_failed_workload_is_restarted_only_with_a_checkpoint_and_a_restart_left(
    used: int, allowed: int, checkpoint: CheckpointSeen | None, expected: bool
) -> None:
    assert may_restart(restarts_used=used, max_restarts=allowed, checkpoint=checkpoint) is expected


def test_lost_work_is_the_running_time_since_the_checkpoint_was_seen() -> None:
    restart = restart_record("cert-0-g0", "x" * 1000, CheckpointSeen(20, 35.0), failed_at=50.0)

    assert (restart.checkpoint_iteration, restart.lost_work_seconds) == (20, 15.0)
    assert len(restart.failure) == 300, "the failure is kept bounded: the annotation carries every restart"


def test_goodput_is_charged_with_the_reference_formula() -> None:
    # t_w = 100 s; restarts lost 10 s of work, waited 20 s to run again and 5 s to resume:
    # (t_w - t_ch - t_rm - t_re) / (t_w - t_re) = (100 - 10 - 5 - 20) / (100 - 20)
    restart = completed_restart(
        restart_record("tj", "failed", CheckpointSeen(10, 0.0), failed_at=10.0),
        reschedule_seconds=20.0,
        resume_seconds=5.0,
        resumed_from=10,
    )

    assert goodput_factor([restart], 100.0) == pytest.approx(65 / 80)
    assert goodput_factor([], 100.0) == 1.0
    assert goodput_factor([restart], 15.0) == 0.0, "never below 0 when the restarts took all the time"


def test_the_restarts_travel_with_the_next_trainjob_and_an_unreadable_record_counts_as_none() -> None:
    restarts = [
        completed_restart(
            restart_record("tj", "failed", CheckpointSeen(10, 2.0), failed_at=9.0),
            reschedule_seconds=4.0,
            resume_seconds=None,
            resumed_from=None,
        )
    ]
    trainjob = {"metadata": {"annotations": encode_restarts(restarts)}}

    assert decode_restarts(trainjob) == restarts
    assert encode_restarts([]) == {}
    assert decode_restarts({"metadata": {"annotations": {RESTARTS_ANNOTATION: "not json"}}}) == []
    assert decode_restarts({"metadata": {}}) == []


def test_a_restart_says_whether_the_next_workload_loaded_the_checkpoint() -> None:
    failed = Restart("tj", "failed", 10, 7.0)

    resumed = completed_restart(failed, reschedule_seconds=1.0, resume_seconds=2.0, resumed_from=10)
    assert resumed.describe() == (
        "TrainJob/tj failed after saving iteration 10 (7s of work lost); the next workload resumed from iteration 10"
    )
    assert "loaded no checkpoint (started over)" in failed.describe()
