"""What a TrainJob is doing, and how long it has really been running (pure).

The reference's clock rules: time a workload spends queued (suspended by an admission controller such as
Kueue) or blocked in scheduling (pods `PodScheduled=False`, reason `Unschedulable`) does not count toward
`timeoutPerJob`, but one scheduling-blocked episode longer than `timeoutPerJob` is a timeout (pods that can
never be placed must not hold the run step forever); Complete means success; Failed, a timeout, or the
TrainJob disappearing means failure.

Two more waits are the controllers', not the nodes', and do not count either: before any pod of the TrainJob
exists (the Trainer creates its JobSet, JobSet its Jobs, the Job controller their pods), and after every pod
has succeeded until the TrainJob is marked Complete. With a thousand TrainJobs at once the Trainer, which
reconciles one at a time, takes minutes for each of those; counted, they timed out 60 s workloads whose pods
had all succeeded, and blamed their nodes. One such episode longer than `timeoutPerJob` still ends the wait,
blaming no node.
The observing loop feeds each poll's objects to `classify` and `advance`; nothing here reads a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nvcre_argo import contract

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
MPI_LAUNCHER_JOB = "launcher"  # the replicated job of an MPI workload's launcher


class Phase(enum.Enum):
    MISSING = "Missing"
    QUEUED = "Queued"
    STARTING = "Starting"  # no pod of it exists yet
    SCHEDULING_BLOCKED = "SchedulingBlocked"
    RUNNING = "Running"
    FINISHING = "Finishing"  # its workload finished (every pod, or the MPI launcher, succeeded); not Complete yet
    COMPLETE = "Complete"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        return self in (Phase.MISSING, Phase.COMPLETE, Phase.FAILED)

    @property
    def counts_toward_timeout(self) -> bool:
        return self is Phase.RUNNING

    @property
    def bounded_wait(self) -> bool:
        """Not counted, but one episode of it longer than `timeoutPerJob` ends the wait (`Clock.waited_too_long`)."""
        return self in (Phase.STARTING, Phase.SCHEDULING_BLOCKED, Phase.FINISHING)


def _true_condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any] | None:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("type") == condition_type and condition.get("status") == "True":
            found: dict[str, Any] = condition
            return found
    return None


def _unschedulable(pod: dict[str, Any]) -> bool:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return bool(condition.get("reason") == "Unschedulable")
    return False


def is_mpi_launcher(pod: dict[str, Any]) -> bool:
    """The pod of an MPI workload's launcher (`mpirun`), not of a rank."""
    return bool((pod.get("metadata", {}).get("labels") or {}).get(REPLICATED_JOB_LABEL) == MPI_LAUNCHER_JOB)


def _workload_finished(pods: Sequence[dict[str, Any]]) -> bool:
    """Every pod succeeded; or, in an MPI workload, its launcher did: mpirun exits 0 only once every rank has
    finished, while the workers, which only serve sshd, run on until JobSet, seeing the launcher's Job complete,
    deletes them. What remains either way is the controllers' bookkeeping, not the workload."""
    launchers = [pod for pod in pods if is_mpi_launcher(pod)]
    finished = launchers or pods
    return all((pod.get("status") or {}).get("phase") == "Succeeded" for pod in finished)


def classify(trainjob: dict[str, Any] | None, pods: Sequence[dict[str, Any]]) -> Phase:
    """The phase of one TrainJob from its conditions and its pods."""
    if trainjob is None:
        return Phase.MISSING
    if _true_condition(trainjob, "Complete"):
        return Phase.COMPLETE
    if _true_condition(trainjob, "Failed"):
        return Phase.FAILED
    if trainjob.get("spec", {}).get("suspend") or _true_condition(trainjob, "Suspended"):
        return Phase.QUEUED
    if not pods:
        return Phase.STARTING
    if any(_unschedulable(pod) for pod in pods):
        return Phase.SCHEDULING_BLOCKED
    if _workload_finished(pods):
        return Phase.FINISHING
    return Phase.RUNNING


def scheduling_message(pods: Sequence[dict[str, Any]]) -> str:
    """The scheduler's reason for the first unschedulable pod (by name), or "" when none is blocked."""
    for pod in sorted(pods, key=lambda item: str(item.get("metadata", {}).get("name", ""))):
        if _unschedulable(pod):
            for condition in pod.get("status", {}).get("conditions") or []:
                if condition.get("type") == "PodScheduled":
                    return str(condition.get("message") or "Unschedulable")
    return ""


def failure_message(trainjob: dict[str, Any]) -> str:
    condition = _true_condition(trainjob, "Failed") or {}
    reason, message = condition.get("reason", ""), condition.get("message", "")
    return f"{reason}: {message}".strip(": ") or "TrainJob failed"


CONTROLLER_WAIT_FLOOR_S = 600
"""The least a wait on the controllers (no pod created yet, or its workload finished but the TrainJob not yet
Complete) may last before the test ends blaming no node: `timeoutPerJob` when longer. Why a floor: the Trainer
reconciles one TrainJob at a time, so a wave of `maxConcurrent` TrainJobs waits for it in turn. On 4,096
simulated nodes with 512 TrainJobs at once, 440 of 512 waited longer than a 90 s `timeoutPerJob` before any pod
existed (the longest wait measured in an earlier run with a 300 s timeout was 178 s): bounded by the test's
timeout, most of a wave ended untested. A controller that never acts still ends the test, ten minutes later."""


@dataclass(frozen=True)
class Clock:
    """Active (counted) seconds of a workload, advanced poll by poll, and when the current episode of a bounded
    wait (`Phase.bounded_wait`: starting, blocked in scheduling, finishing) was first seen."""

    active_seconds: float = 0.0
    last_seen: float | None = None
    last_phase: Phase | None = None
    waiting_since: float | None = None

    def advance(self, phase: Phase, now: float) -> Clock:
        """Count the interval since the last poll only if the workload was running throughout it."""
        counted = self.active_seconds
        if self.last_seen is not None and self.last_phase is not None and self.last_phase.counts_toward_timeout:
            counted += max(0.0, now - self.last_seen)
        waiting_since = None
        if phase.bounded_wait:
            same_episode = self.last_phase is phase and self.waiting_since is not None
            waiting_since = self.waiting_since if same_episode else now
        return replace(self, active_seconds=counted, last_seen=now, last_phase=phase, waiting_since=waiting_since)

    def timed_out(self, limit_seconds: float) -> bool:
        return self.active_seconds > limit_seconds

    def waited_too_long(self, limit_seconds: float) -> bool:
        """One episode of a bounded wait (the phase last seen) has lasted longer than the limit."""
        if self.waiting_since is None or self.last_seen is None:
            return False
        return self.last_seen - self.waiting_since > limit_seconds


@dataclass(frozen=True)
class RankFailure:
    """A container of a rank pod (a pod of a GPU replicated job) that terminated with a non-zero exit code.

    `stopped_by_deletion`: SIGTERM ended it while its pod was being deleted, the kubelet stopping it. When a
    rank crashes, JobSet deletes the group's other Jobs (and the Job controller its other pods) at once, so the
    groupmates' containers end within the same second as the crash; `finishedAt` counts whole seconds."""

    pod: str
    node: str
    container: str
    exit_code: int
    reason: str
    finished_at: str
    stopped_by_deletion: bool = False

    def describe(self) -> str:
        detail = f"pod {self.pod} on node {self.node}: container {self.container} exited {self.exit_code}"
        return detail + (f" ({self.reason})" if self.reason else "")


def rank_failures(pods: Sequence[dict[str, Any]], rank_jobs: Collection[str]) -> list[RankFailure]:
    """Every failed container of the pods that run on the group's GPUs, in pod-name order.

    An MPI launcher is not a rank: it fails *because* a rank failed, and it may run on any node, so it is
    never evidence against the node it ran on.
    """
    found = []
    for pod in sorted(pods, key=lambda item: str(item.get("metadata", {}).get("name", ""))):
        metadata = pod.get("metadata", {})
        if metadata.get("labels", {}).get(REPLICATED_JOB_LABEL) not in rank_jobs:
            continue
        for status in pod.get("status", {}).get("containerStatuses") or []:
            state = status.get("state", {}).get("terminated") or status.get("lastState", {}).get("terminated")
            if state and state.get("exitCode", 0) != 0:
                found.append(
                    RankFailure(
                        pod=str(metadata.get("name", "")),
                        node=str(pod.get("spec", {}).get("nodeName", "")),
                        container=str(status.get("name", "")),
                        exit_code=int(state["exitCode"]),
                        reason=str(state.get("reason") or ""),
                        finished_at=str(state.get("finishedAt") or ""),
                        stopped_by_deletion=bool(metadata.get("deletionTimestamp"))
                        and int(state["exitCode"]) == contract.EXIT_TERMINATED,
                    )
                )
    return found


def first_failures(failures: Collection[RankFailure]) -> list[RankFailure]:
    """The failures that came first: the culprits. When one rank dies, its groupmates fail after it (a
    collective or a torch elastic group tears down, or their pods are deleted), so only the earliest failures
    say which node broke. Within the earliest second, a container the kubelet stopped because its pod was being
    deleted is a consequence, not a cause, when a failure of its own ended in the same second; alone, or only
    with others stopped that way (the first failure an eviction, say), it is still the culprit."""
    timed = [failure for failure in failures if failure.finished_at]
    if not timed:
        return sorted(failures, key=lambda failure: failure.pod)
    earliest = min(failure.finished_at for failure in timed)
    first = [failure for failure in timed if failure.finished_at == earliest]
    return [failure for failure in first if not failure.stopped_by_deletion] or first
