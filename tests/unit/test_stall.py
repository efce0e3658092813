"""Stall detection (`steps.stall`): when a training workload has stalled, given what the run step has seen.

The reference (nvcre-contract.md §7.8): no first parsed training step within `startupStallTimeoutSeconds` is a
startup stall; no step for `stallMultiplier` x the average step time, scaled by the log interval, is a training
stall, judged only once two steady steps were seen; both fail the Job `WorkloadStalled`, and neither counts
time queued or blocked in scheduling. Times below are the run step's counted running time, as the run loop
passes them; the expected figures are worked out from the log lines each test writes.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.loading import load_certifications
from nvcre_argo.measure.megatron import MegatronResult, parse_megatron_log
from nvcre_argo.resolve.category import resolve_certification
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.stall import Progress, StallLimits, read_training_log, stall_limits

TRAINJOB = "cert-0-g0"
LIMITS = StallLimits(startup_seconds=20)
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}


def line(iteration: int, elapsed_ms: float, *, total: int = 40, second: int = 0) -> str:
    """One Megatron-LM `training_log` line."""
    return (
        f" [2026-01-12 10:00:{second:02d}.000000] iteration {iteration:8d}/{total:8d} | consumed samples: "
        f"{iteration * 8:12d} | elapsed time per iteration (ms): {elapsed_ms:.1f} | throughput per GPU "
        "(TFLOP/s/GPU): 400.0 | learning rate: 3.000000E-04 | global batch size:     8 |"
    )


def log(*lines: str) -> MegatronResult:
    return parse_megatron_log("\n".join(["torchrun: starting", *lines, "[straggler] rank 3 slowest"]))


# Megatron with `--log-interval 10`: the warm-up line (iteration 1, slow), then one line per 10 iterations.
WARMUP = line(1, 2500.0, second=1)
TO_20 = [WARMUP, line(10, 500.0, second=6), line(20, 500.0, second=11)]  # two steady lines of 0.5 s steps


# --- startup stall ------------------------------------------------------------------------------------------------


def test_no_iteration_is_a_startup_stall_only_once_the_budget_has_passed() -> None:
    progress = Progress().observe(log(), 20.0)
    assert progress.stall(LIMITS, 20.0, TRAINJOB) is None
    assert progress.stall(LIMITS, 20.5, TRAINJOB) == (
        "WorkloadStalled: no training iteration within startupStallTimeoutSeconds 20 (TrainJob/cert-0-g0 running "
        "for 20s, time queued or blocked in scheduling not counted)"
    )


def test_the_first_iteration_ends_the_startup_budget_even_long_after_it() -> None:
    progress = Progress().observe(log(WARMUP), 19.0)
    assert progress.stall(LIMITS, 10_000.0, TRAINJOB) is None  # no steady step time yet: timeoutPerJob's case


# --- training stall -----------------------------------------------------------------------------------------------


def test_no_new_iteration_for_three_average_steps_per_log_line_is_a_training_stall() -> None:
    # Steady steps of 0.5 s, 10 iterations per line: a line every 5 s, so 3 x 5 s = 15 s without one stalls.
    progress = Progress().observe(log(*TO_20), 5.0)
    assert (progress.step_seconds, progress.log_interval) == (pytest.approx(0.5), 10)
    assert progress.stall(LIMITS, 20.0, TRAINJOB) is None
    assert progress.stall(LIMITS, 21.0, TRAINJOB) == (
        "WorkloadStalled: no new iteration for 16s, more than 3 x the average step time 0.5s x 10 iteration(s) "
        "per log line (15s); TrainJob/cert-0-g0 last logged iteration 20/40"
    )


def test_reading_the_same_last_line_again_is_not_progress() -> None:
    progress = Progress().observe(log(*TO_20), 5.0)
    again = progress.observe(log(*TO_20), 18.0)
    assert again == progress
    assert again.stall(LIMITS, 21.0, TRAINJOB) is not None


def test_a_new_line_restarts_the_training_stall_clock_and_updates_the_step_time() -> None:
    progress = Progress().observe(log(*TO_20), 5.0).observe(log(*TO_20, line(30, 1000.0, second=21)), 18.0)
    # Steps now average (9 x 0.5 + 10 x 0.5 + 10 x 1.0) / 29 s: the window is 3 x that x 10 iterations.
    window = 3 * (9 * 0.5 + 10 * 0.5 + 10 * 1.0) / 29 * 10
    assert progress.seen_at == 18.0
    assert progress.stall(LIMITS, 18.0 + window, TRAINJOB) is None
    assert progress.stall(LIMITS, 18.0 + window + 0.5, TRAINJOB) is not None


def test_one_steady_line_is_not_enough_to_judge_a_training_stall() -> None:
    progress = Progress().observe(log(WARMUP, line(10, 500.0)), 5.0)
    assert progress.step_seconds is None
    assert progress.stall(LIMITS, 10_000.0, TRAINJOB) is None


def test_a_restart_counts_as_progress_and_keeps_the_step_time_seen_before_it() -> None:
    before = Progress().observe(log(*TO_20), 5.0)
    restarted = before.observe(log(*TO_20, line(1, 2500.0, second=40)), 30.0)  # a new run segment's warm-up
    assert (restarted.seen_at, restarted.step_seconds, restarted.log_interval) == (30.0, pytest.approx(0.5), 10)
    assert restarted.stall(LIMITS, 45.0, TRAINJOB) is None
    assert restarted.stall(LIMITS, 45.5, TRAINJOB) is not None


def test_the_log_interval_is_the_widest_steady_line_not_a_short_last_one() -> None:
    # `--train-iters 45`: the last line covers 5 iterations; the window still scales by 10 per line.
    lines = [*TO_20, line(30, 500.0, total=45), line(40, 500.0, total=45), line(45, 500.0, total=45)]
    assert Progress().observe(log(*lines), 5.0).log_interval == 10


# --- which categories are watched, with which budget --------------------------------------------------------------


def context(category: dict[str, Any], **options: Any) -> StepContext:
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "cert"},
        "spec": {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "categories": [category], **options},
    }
    (loaded,) = load_certifications(json.dumps(document), "t.yaml")
    resolved, errors = resolve_certification(loaded.certification.spec, load_catalog())
    assert errors == []
    return StepContext(resolved[0], "cert", "cert-0", "uid-0", "nvcre")


@pytest.mark.parametrize(
    ("category", "spec", "expected"),
    [
        pytest.param(NEMOTRON, {}, 1200, id="training-catalog-default"),
        pytest.param({**NEMOTRON, "options": {"startupStallTimeoutSeconds": 20}}, {}, 20, id="training-category"),
        pytest.param(NEMOTRON, {"startupStallTimeoutSeconds": 45}, 45, id="training-global"),
        pytest.param(
            {**NEMOTRON, "options": {"startupStallTimeoutSeconds": 20}},
            {"startupStallTimeoutSeconds": 45},
            20,
            id="training-category-over-global",
        ),
        pytest.param(ALL_REDUCE, {"startupStallTimeoutSeconds": 45}, None, id="nccl-not-watched"),
        pytest.param(DCGM, {"startupStallTimeoutSeconds": 45}, None, id="dcgm-not-watched"),
    ],
)
def test_only_training_categories_are_watched_with_the_category_over_global_over_catalog_budget(
    category: dict[str, Any], spec: dict[str, Any], expected: int | None
) -> None:
    limits = stall_limits(context(category, **spec))
    assert (limits.startup_seconds if limits else None) == expected
    if limits is not None:
        assert limits.multiplier == 3  # not a Certification option: the reference's training entries' setting


# --- reading the log ----------------------------------------------------------------------------------------------


class Logs:
    """Serves each pod's log (or an ApiError) and records what was asked."""

    def __init__(self, answers: dict[str, str | ApiError]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int, int]] = []

    def read_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        limit_bytes: int = 65536,
        tail_lines: int = 2000,
    ) -> str:
        del namespace, container
        self.asked.append((pod, tail_lines, limit_bytes))
        answer = self.answers[pod]
        if isinstance(answer, ApiError):
            raise answer
        return answer


def rank(name: str, index: int, role: str = "node") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": role},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        }
    }


def test_the_log_end_of_the_last_rank_is_read_where_megatron_prints() -> None:
    logs = Logs({"r0": "rank 0", "r1": "rank 1", "r10": "rank 10"})
    pods = [rank("r1", 1), rank("r10", 10), rank("r0", 0), rank("other", 99, role="sidecar")]
    assert read_training_log(cast(KubeClient, logs), context(NEMOTRON), pods) == "rank 10"
    ((pod, tail_lines, limit_bytes),) = logs.asked
    assert pod == "r10"
    assert tail_lines <= 500  # the end only: it is read on every poll
    assert limit_bytes <= 256 << 10


def test_a_log_that_cannot_be_read_yet_is_no_progress_not_an_error() -> None:
    logs = Logs({"r0": ApiError(400, "BadRequest", 'container "node" is waiting to start: ContainerCreating')})
    assert read_training_log(cast(KubeClient, logs), context(NEMOTRON), [rank("r0", 0)]) == ""
    assert read_training_log(cast(KubeClient, logs), context(NEMOTRON), []) == ""
