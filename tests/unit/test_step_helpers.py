"""The pure helpers of the in-workflow steps: the workload clock, the verdict's status list, the phase rules.

The clock decides when a TrainJob is stopped for running too long or being blocked in scheduling too long.
Both limits are strict: a workload that has run exactly `timeoutPerJob` is still within its time, one that
has run a moment longer is not (the reference's "longer than timeoutPerJob"). The boundary cases below are
what catches an off-by-one (`>` turned into `>=`) in either rule.
"""

from __future__ import annotations

import pytest

from nvcre_argo.steps.verdict import parse_statuses
from nvcre_argo.steps.workload import Clock, Phase, classify

LIMIT = 600.0


def clock_after(*polls: tuple[Phase, float]) -> Clock:
    clock = Clock()
    for phase, moment in polls:
        clock = clock.advance(phase, moment)
    return clock


@pytest.mark.parametrize(
    ("ran", "timed_out"),
    [
        pytest.param(LIMIT - 1, False, id="a-second-before-the-limit"),
        pytest.param(LIMIT, False, id="exactly-the-limit"),
        pytest.param(LIMIT + 0.001, True, id="a-moment-past-the-limit"),
    ],
)
def test_a_running_workload_times_out_only_once_it_has_run_longer_than_the_limit(ran: float, timed_out: bool) -> None:
    clock = clock_after((Phase.RUNNING, 1000.0), (Phase.RUNNING, 1000.0 + ran))
    assert clock.active_seconds == pytest.approx(ran)
    assert clock.timed_out(LIMIT) is timed_out


def test_time_queued_or_blocked_in_scheduling_does_not_count_toward_the_timeout() -> None:
    clock = clock_after(
        (Phase.QUEUED, 0.0),
        (Phase.SCHEDULING_BLOCKED, 500.0),  # the 500 s queued do not count
        (Phase.RUNNING, 900.0),  # nor the 400 s blocked
        (Phase.RUNNING, 1000.0),  # 100 s running count
        (Phase.QUEUED, 1100.0),  # the 100 s before this poll were running: they count
        (Phase.RUNNING, 5000.0),  # requeued for 3900 s: not counted
    )
    assert clock.active_seconds == pytest.approx(200.0)
    assert not clock.timed_out(LIMIT)


def test_an_interval_counts_by_the_phase_seen_at_its_start() -> None:
    clock = clock_after((Phase.RUNNING, 0.0), (Phase.SCHEDULING_BLOCKED, 50.0), (Phase.RUNNING, 80.0))
    assert clock.active_seconds == pytest.approx(50.0)


def test_a_clock_that_goes_backwards_never_takes_running_time_away() -> None:
    clock = clock_after((Phase.RUNNING, 100.0), (Phase.RUNNING, 90.0))
    assert clock.active_seconds == 0.0


@pytest.mark.parametrize(
    ("blocked_for", "too_long"),
    [
        pytest.param(LIMIT - 1, False, id="a-second-before-the-limit"),
        pytest.param(LIMIT, False, id="exactly-the-limit"),
        pytest.param(LIMIT + 0.001, True, id="a-moment-past-the-limit"),
    ],
)
def test_one_scheduling_blocked_episode_is_too_long_only_past_the_limit(blocked_for: float, too_long: bool) -> None:
    clock = clock_after((Phase.SCHEDULING_BLOCKED, 10.0), (Phase.SCHEDULING_BLOCKED, 10.0 + blocked_for))
    assert clock.waited_too_long(LIMIT) is too_long
    assert not clock.timed_out(LIMIT)


def test_a_new_scheduling_blocked_episode_starts_its_own_count() -> None:
    clock = clock_after(
        (Phase.SCHEDULING_BLOCKED, 0.0),
        (Phase.SCHEDULING_BLOCKED, 500.0),
        (Phase.RUNNING, 550.0),
        (Phase.SCHEDULING_BLOCKED, 600.0),
        (Phase.SCHEDULING_BLOCKED, 1150.0),
    )
    assert clock.waiting_since == 600.0
    assert not clock.waited_too_long(LIMIT)  # 550 s in this episode, though 1050 s blocked overall


def test_a_fresh_clock_has_counted_nothing_and_is_not_blocked() -> None:
    assert Clock().active_seconds == 0.0
    assert not Clock().timed_out(0.0)
    assert not Clock().waited_too_long(0.0)


@pytest.mark.parametrize("phase", [Phase.STARTING, Phase.FINISHING], ids=["before-any-pod", "after-every-pod"])
def test_a_wait_on_the_controllers_does_not_count_but_one_episode_is_bounded(phase: Phase) -> None:
    clock = clock_after((Phase.RUNNING, 0.0), (phase, 60.0), (phase, 60.0 + LIMIT))
    assert clock.active_seconds == pytest.approx(60.0)
    assert not clock.waited_too_long(LIMIT)
    clock = clock.advance(phase, 60.0 + LIMIT + 0.001)
    assert clock.waited_too_long(LIMIT)
    assert not clock.timed_out(LIMIT)


def test_changing_from_one_bounded_wait_to_another_starts_a_new_episode() -> None:
    clock = clock_after((Phase.STARTING, 0.0), (Phase.SCHEDULING_BLOCKED, 500.0), (Phase.SCHEDULING_BLOCKED, 1000.0))
    assert clock.waiting_since == 500.0
    assert not clock.waited_too_long(LIMIT)


def test_only_running_counts_toward_the_timeout_and_only_ends_are_terminal() -> None:
    assert [phase for phase in Phase if phase.counts_toward_timeout] == [Phase.RUNNING]
    assert {phase for phase in Phase if phase.terminal} == {Phase.MISSING, Phase.COMPLETE, Phase.FAILED}


@pytest.mark.parametrize(
    ("text", "phases", "passed"),
    [
        pytest.param("a=Succeeded,b=Succeeded", [("a", "Succeeded"), ("b", "Succeeded")], True, id="all-succeeded"),
        pytest.param("a=Succeeded,b=Failed", [("a", "Succeeded"), ("b", "Failed")], False, id="one-failed"),
        pytest.param("a=Succeeded, b", [("a", "Succeeded"), ("b", "Unknown")], False, id="no-phase-is-unknown"),
        pytest.param(" a=Omitted ,,", [("a", "Omitted")], False, id="skipped-is-not-passed"),
        pytest.param("", [], False, id="nothing-is-not-a-pass"),
    ],
)
def test_the_verdict_passes_only_when_every_category_step_succeeded(
    text: str, phases: list[tuple[str, str]], passed: bool
) -> None:
    verdict = parse_statuses(text)
    assert verdict.phases == phases
    assert verdict.passed is passed
    assert verdict.failed == [name for name, phase in phases if phase != "Succeeded"]


def test_the_verdict_summary_names_what_did_not_succeed() -> None:
    assert parse_statuses("a=Succeeded,b=Error").summary().splitlines()[-1] == (
        "FAILED: 1/2 categories did not succeed: b"
    )
    assert parse_statuses("a=Succeeded").summary().splitlines()[-1] == "PASSED: 1/1 categories succeeded"


def _pod(phase: str, *, unschedulable: bool = False, job: str = "node") -> dict[str, object]:
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}] if unschedulable else []
    labels = {"jobset.sigs.k8s.io/replicatedjob-name": job}
    return {"metadata": {"labels": labels}, "status": {"phase": phase, "conditions": conditions}}


def _launcher(phase: str) -> dict[str, object]:
    return _pod(phase, job="launcher")


TRAINJOB = {"metadata": {"name": "tj"}, "spec": {}, "status": {}}


@pytest.mark.parametrize(
    ("pods", "phase"),
    [
        pytest.param([], Phase.STARTING, id="no-pod-yet"),
        pytest.param([_pod("Pending", unschedulable=True), _pod("Running")], Phase.SCHEDULING_BLOCKED, id="blocked"),
        pytest.param([_pod("Pending")], Phase.RUNNING, id="bound-not-started"),
        pytest.param([_pod("Succeeded"), _pod("Running")], Phase.RUNNING, id="one-still-running"),
        pytest.param([_pod("Succeeded"), _pod("Failed")], Phase.RUNNING, id="one-failed"),
        pytest.param([_pod("Succeeded"), _pod("Succeeded")], Phase.FINISHING, id="all-succeeded"),
        # MPI: the workers serve sshd until JobSet deletes them; mpirun's exit is the workload's end.
        pytest.param([_launcher("Succeeded"), _pod("Running"), _pod("Running")], Phase.FINISHING, id="mpi-done"),
        pytest.param([_launcher("Running"), _pod("Running"), _pod("Running")], Phase.RUNNING, id="mpi-running"),
        pytest.param([_launcher("Failed"), _pod("Running")], Phase.RUNNING, id="mpi-launcher-failed"),
        pytest.param([_launcher("Pending"), _pod("Succeeded")], Phase.RUNNING, id="mpi-launcher-not-started"),
    ],
)
def test_a_trainjob_not_yet_ended_is_classified_by_its_pods(pods: list[dict[str, object]], phase: Phase) -> None:
    assert classify(TRAINJOB, pods) is phase


def test_the_trainjobs_own_end_wins_over_its_pods() -> None:
    complete = {**TRAINJOB, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert classify(complete, []) is Phase.COMPLETE
    assert classify(None, [_pod("Succeeded")]) is Phase.MISSING
