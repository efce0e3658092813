"""Which failed ranks are the culprits of a failed workload (`steps.workload.first_failures`): the earliest,
and within the earliest second not the containers the kubelet stopped because their pod was being deleted,
unless nothing else failed then."""

from __future__ import annotations

from typing import Any

from nvcre_argo.steps.workload import RankFailure, first_failures, rank_failures

CRASH_SECOND, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"


def failure(pod: str, exit_code: int, finished_at: str, *, stopped: bool = False) -> RankFailure:
    return RankFailure(pod, f"node-of-{pod}", "node", exit_code, "Error", finished_at, stopped_by_deletion=stopped)


def test_a_groupmate_stopped_by_deletion_in_the_crashs_second_is_not_a_culprit() -> None:
    crash, stopped = failure("a", 137, CRASH_SECOND), failure("b", 143, CRASH_SECOND, stopped=True)

    assert first_failures([stopped, crash]) == [crash]


def test_a_deletion_that_came_first_is_still_the_culprit() -> None:
    """An evicted rank, say: its groupmates crash a second later because they lost their peer."""
    evicted, crashed = failure("a", 143, CRASH_SECOND, stopped=True), failure("b", 1, LATER)

    assert first_failures([crashed, evicted]) == [evicted]


def test_when_every_first_failure_was_stopped_by_deletion_they_are_all_culprits() -> None:
    both = [failure("a", 143, CRASH_SECOND, stopped=True), failure("b", 143, CRASH_SECOND, stopped=True)]

    assert first_failures(both) == both


def pod(name: str, exit_code: int, *, deleting: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    terminated = {"exitCode": exit_code, "reason": "Error", "finishedAt": CRASH_SECOND}
    return {
        "metadata": metadata,
        "spec": {"nodeName": f"node-of-{name}"},
        "status": {"containerStatuses": [{"name": "node", "state": {"terminated": terminated}}]},
    }


def test_only_sigterm_while_the_pod_is_deleted_counts_as_stopped_by_deletion() -> None:
    pods = [
        pod("deleted-sigterm", 143, deleting=True),
        pod("deleted-crash", 137, deleting=True),  # SIGKILL or OOM: its own failure as far as anyone can tell
        pod("sigterm-alive", 143, deleting=False),
    ]

    stopped = {f.pod: f.stopped_by_deletion for f in rank_failures(pods, {"node"})}

    assert stopped == {"deleted-sigterm": True, "deleted-crash": False, "sigterm-alive": False}
