"""Follow one TrainJob to its outcome: poll it and its pods, check the nodes and the training's progress, and
judge the end (attributed failure, measured success).

The health check follows the group's Nodes with one list + watch for the life of a workload
(`steps.node_watch`), so a steady poll costs two requests (the TrainJob, its pods) whatever the group's size,
and none under the shared runner, whose groups read all three from its mirrors (`steps.category_mirror`).
A workload that succeeded is measured from its log, waiting up to `measurementTimeout` for the measurement to
appear (`steps.measurement_wait`). A training workload that stops making progress (no first iteration within
`startupStallTimeoutSeconds`, or no new one for 3 x its average step time) is deleted and failed
`WorkloadStalled` (`steps.stall`; one read of the last rank's log end per poll while it runs). A checkpointing
workload's first rank's log end is read too, where Megatron-LM prints the checkpoints it saved and the one it
loaded, which a checkpoint restart needs (`steps.restarts`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import PODS, TRAINJOBS, Resource
from nvcre_argo.measure.checkpoints import last_saved_iteration, loaded_iteration
from nvcre_argo.measure.megatron import MegatronResult, parse_megatron_log
from nvcre_argo.names import JOBSET_NAME_LABEL
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.results import (
    HARDWARE_FAILURE_DETECTED,
    WORKLOAD_FAILED,
    sanitize_log_tail,
)
from nvcre_argo.steps.category_mirror import CategoryMirror
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.health import DEFAULT_HEALTH_EXPRESSION
from nvcre_argo.steps.iteration import IterationResult, failed_iteration, measured_iteration
from nvcre_argo.steps.measurement_wait import Measure, await_measurement
from nvcre_argo.steps.node_watch import NodeWatch
from nvcre_argo.steps.restarts import (
    CheckpointSeen,
    Restart,
    completed_restart,
    goodput_factor,
    restart_aware,
)
from nvcre_argo.steps.stall import (
    Progress,
    StallLimits,
    TrainingLog,
    read_checkpoint_log,
    read_training_log,
    stall_limits,
)
from nvcre_argo.steps.workload import (
    CONTROLLER_WAIT_FLOOR_S,
    Clock,
    Phase,
    RankFailure,
    classify,
    failure_message,
    first_failures,
    rank_failures,
    scheduling_message,
)

log = logging.getLogger(__name__)

# The pods list on every poll takes pages this large, so a full-scale group of 4,096 nodes costs one request.
POLL_PAGE_SIZE = 5000


@dataclass(frozen=True)
class RunSettings:
    """How the step observes; the clock and sleep are injectable so tests control time. `poll_seconds` paces
    both the TrainJob's polls and the re-reads of a finished workload's log while its measurement is awaited."""

    poll_seconds: float = 10.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # Between two polls of a TrainJob: wait for it to change, at most `poll_seconds` (`kube.change`), so the
    # step sees a workload's end at once rather than up to a poll later. None sleeps the interval out.
    until_changed: Callable[[KubeClient, Resource, Mapping[str, Any], float], object] | None = None
    health_expression: str = DEFAULT_HEALTH_EXPRESSION
    log_limit_bytes: int = 4096
    # How a running training workload's log end is read for stall detection (a test's canned log: no kubelet).
    training_log: TrainingLog = read_training_log
    # How a checkpointing workload's first rank's log end is read for its checkpoint lines (likewise).
    checkpoint_log: TrainingLog = read_checkpoint_log
    # Where a running workload's TrainJob, pods and Nodes are read (the shared runner's mirrors); None: from
    # the API server. Its final state is read from the API server either way (see `observe`).
    mirror: CategoryMirror | None = None
    # The least a wait on the controllers may last (`workload.CONTROLLER_WAIT_FLOOR_S`); tests lower it.
    controller_wait_floor_s: float = CONTROLLER_WAIT_FLOOR_S

    def wait_limit(self, phase: Phase, timeout_seconds: float) -> float:
        """How long one episode of a bounded wait in `phase` may last: `timeoutPerJob` when blocked in
        scheduling (the nodes' side: the reference blames them), at least the floor when waiting on the
        controllers (not the nodes' side)."""
        if phase is Phase.SCHEDULING_BLOCKED:
            return timeout_seconds
        return max(timeout_seconds, self.controller_wait_floor_s)

    def pause(self, kube: KubeClient, trainjob: Mapping[str, Any] | None) -> None:
        """The wait before the next poll of `trainjob` (as last read)."""
        if self.until_changed is None or trainjob is None:
            self.sleep(self.poll_seconds)
        else:
            self.until_changed(kube, TRAINJOBS, trainjob, self.poll_seconds)


@dataclass
class RestartHistory:
    """An iteration's checkpoint restarts so far, and the step-clock times their costs are measured from."""

    restarts: list[Restart] = field(default_factory=list)
    started_at: float | None = None  # when the iteration's first workload was seen running
    failed_at: float | None = None  # when the newest restarted workload's failure was seen


@dataclass(frozen=True)
class Followed:
    """How one TrainJob ended, and what the step saw of it that a checkpoint restart needs."""

    result: IterationResult
    crashed: bool = False  # the TrainJob reported Failed (the only end a checkpoint restart recovers from)
    checkpoint: CheckpointSeen | None = None
    active_seconds: float = 0.0


@dataclass
class _Watched:
    """What the step has seen of a running training workload's log (checkpoints, the first iteration, the
    checkpoint it loaded), poll by poll."""

    limits: StallLimits | None = None  # None: the workload prints no iterations to watch
    progress: Progress = field(default_factory=Progress)
    running_at: float | None = None  # step clock when a pod of the workload was first seen started
    running_active: float = 0.0  # counted running seconds then
    first_iteration_at: float | None = None  # counted running seconds at the first training line
    resumed_from: int | None = None
    checkpoint: CheckpointSeen | None = None

    def observe(self, result: MegatronResult, active_seconds: float) -> None:
        """One read of the last rank's log end: training progress."""
        self.progress = self.progress.observe(result, active_seconds)
        if self.first_iteration_at is None and result.records:
            self.first_iteration_at = active_seconds

    def observe_checkpoints(self, text: str, active_seconds: float) -> None:
        """One read of the first rank's log end: the checkpoint it loaded and the newest one it saved."""
        if self.resumed_from is None:
            self.resumed_from = loaded_iteration(text)
        saved = last_saved_iteration(text)
        if saved is not None and (self.checkpoint is None or saved > self.checkpoint.iteration):
            self.checkpoint = CheckpointSeen(saved, active_seconds)

    def settle(self, history: RestartHistory) -> None:
        """Complete the newest restart's record with what this workload showed (once it ended)."""
        if not history.restarts or history.restarts[-1].reschedule_seconds is not None:
            return
        reschedule = None
        if self.running_at is not None and history.failed_at is not None:
            reschedule = self.running_at - history.failed_at
        resume = None if self.first_iteration_at is None else max(0.0, self.first_iteration_at - self.running_active)
        history.restarts[-1] = completed_restart(
            history.restarts[-1], reschedule_seconds=reschedule, resume_seconds=resume, resumed_from=self.resumed_from
        )

    def started(self, pods: Sequence[dict[str, Any]], now: float, active_seconds: float) -> None:
        """Note when the workload's pods first run: its reschedule ends there (deleting the failed workload,
        queueing, scheduling, pulling), and its resume (loading the checkpoint) begins."""
        if self.running_at is None and any(_pod_started(pod) for pod in pods):
            self.running_at, self.running_active = now, active_seconds


def _pod_started(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")


def follow_trainjob(
    kube: KubeClient,
    context: StepContext,
    *,
    iteration: int,
    name: str,
    nodes: list[str],
    settings: RunSettings,
    measure: Measure | None,
    report: Callable[[str], None],
    health: NodeWatch | None,
    history: RestartHistory,
) -> Followed:
    """Poll the TrainJob and its pods to an outcome; `health` (None: the monitor is off) says which group
    nodes the health check fires on; `history` is the iteration's restarts (completed here with what this
    workload showed)."""
    timeout = duration_seconds(context.category.timeout_per_job)
    clock = Clock()
    last_phase: Phase | None = None
    # Failed rank containers as first seen: JobSet may delete a failed Job's pods before the TrainJob reports
    # Failed, so the evidence of who failed first is gathered on every poll, not only at the end.
    seen_failures: dict[tuple[str, str], RankFailure] = {}
    watched = _Watched(limits=stall_limits(context))

    def ended(result: IterationResult, *, crashed: bool = False) -> Followed:
        watched.settle(history)
        return Followed(result, crashed, watched.checkpoint, clock.active_seconds)

    while True:
        trainjob, pods, phase = observe(kube, context, name, settings.mirror, seen_failures)
        now = settings.clock()
        clock = clock.advance(phase, now)
        if phase is not last_phase:
            report(f"TrainJob/{name}: {phase.value} (running time counted: {clock.active_seconds:.0f}s of {timeout}s)")
            last_phase = phase
        if phase is Phase.RUNNING:
            watched.started(pods, now, clock.active_seconds)
            history.started_at = now if history.started_at is None else history.started_at
        if phase is Phase.MISSING:
            return ended(
                failed_iteration(iteration, name, f"Workload TrainJob/{name} was deleted", nodes, WORKLOAD_FAILED)
            )
        if phase is Phase.COMPLETE:
            watched.settle(history)
            result = _succeeded(
                kube,
                context,
                iteration=iteration,
                name=name,
                nodes=nodes,
                pods=pods,
                measure=_charged_for_restarts(measure, history, now),
                settings=settings,
                report=report,
            )
            return ended(result)
        if phase is Phase.FAILED:
            assert trainjob is not None
            if watched.limits is not None and context.category.checkpoint is not None:
                # A save printed since the last poll still counts, if the rank's log can still be read.
                watched.observe_checkpoints(settings.checkpoint_log(kube, context, pods), clock.active_seconds)
            result = _attributed_failure(
                kube,
                context,
                iteration=iteration,
                name=name,
                summary=f"TrainJob/{name} failed: {failure_message(trainjob)}",
                nodes=nodes,
                culprits=first_failures(list(seen_failures.values())),
                settings=settings,
            )
            return ended(result, crashed=True)
        if phase in (Phase.STARTING, Phase.RUNNING, Phase.FINISHING):
            stopped = _check_running(
                kube,
                context,
                iteration=iteration,
                name=name,
                nodes=nodes,
                pods=pods,
                settings=settings,
                health=health,
                watched=watched,
                active_seconds=clock.active_seconds,
            )
            if stopped is not None:
                return ended(stopped)
        limit = settings.wait_limit(phase, timeout)
        if clock.waited_too_long(limit):
            kube.delete(TRAINJOBS, name, context.namespace)
            shown = context.category.timeout_per_job if limit == timeout else f"{limit:.0f}s"
            return ended(_waited_too_long(iteration, name, phase, limit=shown, nodes=nodes, pods=pods))
        if clock.timed_out(timeout):
            kube.delete(TRAINJOBS, name, context.namespace)
            message = f"TrainJob/{name} timed out after {context.category.timeout_per_job} of running time"
            return ended(failed_iteration(iteration, name, message, nodes, WORKLOAD_FAILED))
        settings.pause(kube, trainjob)


def _waited_too_long(
    iteration: int, name: str, phase: Phase, *, limit: str, nodes: list[str], pods: list[dict[str, Any]]
) -> IterationResult:
    """The end of a wait longer than its `limit` (`RunSettings.wait_limit`). Pods that cannot be placed blame
    the group's nodes (the reference's rule); a wait on the controllers, before any pod exists or after every
    pod succeeded, blames none: nothing failed on the nodes, and none is certified either."""
    if phase is Phase.SCHEDULING_BLOCKED:
        message = f"TrainJob/{name} timed out after {limit} blocked in scheduling: {scheduling_message(pods)}"
        return failed_iteration(iteration, name, message, nodes, WORKLOAD_FAILED)
    never_ran = phase is Phase.STARTING
    if never_ran:
        waited = "none of its pods was created (the Trainer, JobSet and Job controllers create them)"
    else:
        waited = "its workload finished, but the TrainJob was not marked Complete"
    message = f"TrainJob/{name} timed out after {limit} waiting: {waited}; no node is blamed"
    return replace(failed_iteration(iteration, name, message, [], WORKLOAD_FAILED), never_ran=never_ran)


def observe(
    kube: KubeClient,
    context: StepContext,
    name: str,
    mirror: CategoryMirror | None,
    seen_failures: dict[tuple[str, str], RankFailure],
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], Phase]:
    """One poll's reading of the TrainJob and its pods, and its phase; the failed ranks seen are added to
    `seen_failures`. From the mirror while the workload runs, with the last states of the pods already deleted
    (a crashed rank's pod may be gone before any poll saw it fail); a final state (Complete, Failed, gone) read
    there is read again from the API server, TrainJob then pods, so the verdict sees the pods at least as they
    were when the TrainJob ended (two mirrors lag independently)."""
    if mirror is None:
        trainjob, pods = _read(kube, context, name)
    else:
        trainjob, pods = mirror.trainjob(kube, name), mirror.workload_pods(name)
        # The mirror's live pods too, not only the re-read ones below: a failed pod the re-read finds already
        # deleted may not have reached the mirror's departed pods yet.
        _note_failures(context, [*pods, *mirror.departed_pods(name)], seen_failures)
        if classify(trainjob, pods).terminal:
            trainjob, pods = _read(kube, context, name)
    _note_failures(context, pods, seen_failures)
    return trainjob, pods, classify(trainjob, pods)


def _read(kube: KubeClient, context: StepContext, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The TrainJob and its pods, from the API server."""
    trainjob = kube.get(TRAINJOBS, name, context.namespace)
    pods, _ = kube.list(PODS, context.namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}", limit=POLL_PAGE_SIZE)
    return trainjob, pods


def _note_failures(
    context: StepContext, pods: list[dict[str, Any]], seen_failures: dict[tuple[str, str], RankFailure]
) -> None:
    for failure in rank_failures(pods, context.category.entry.gpu_replicated_jobs):
        seen_failures.setdefault((failure.pod, failure.container), failure)


def _check_running(
    kube: KubeClient,
    context: StepContext,
    *,
    iteration: int,
    name: str,
    nodes: list[str],
    pods: list[dict[str, Any]],
    settings: RunSettings,
    health: NodeWatch | None,
    watched: _Watched,
    active_seconds: float,
) -> IterationResult | None:
    """The checks of a running workload, one poll's worth: the node health check, then (training) one read
    of the log's end for progress, checkpoints and stalls. An outcome when the workload was stopped."""
    if health is not None:
        sick = health.sick()
        if sick:
            kube.delete(TRAINJOBS, name, context.namespace)
            message = f"node health check `{settings.health_expression}` fired during TrainJob/{name}"
            return failed_iteration(iteration, name, message, sick, HARDWARE_FAILURE_DETECTED)
    if watched.limits is None:
        return None
    watched.observe(parse_megatron_log(settings.training_log(kube, context, pods)), active_seconds)
    if context.category.checkpoint is not None:
        watched.observe_checkpoints(settings.checkpoint_log(kube, context, pods), active_seconds)
    stalled = watched.progress.stall(watched.limits, active_seconds, name)
    if stalled:
        kube.delete(TRAINJOBS, name, context.namespace)
        return failed_iteration(iteration, name, stalled, nodes, WORKLOAD_FAILED)
    return None


def _charged_for_restarts(measure: Measure | None, history: RestartHistory, now: float) -> Measure | None:
    """The measurement of a workload that completed after restarts: goodput charged for what they cost."""
    if measure is None or not history.restarts or history.started_at is None:
        return measure
    return restart_aware(measure, goodput_factor(history.restarts, now - history.started_at))


def _attributed_failure(
    kube: KubeClient,
    context: StepContext,
    *,
    iteration: int,
    name: str,
    summary: str,
    nodes: list[str],
    culprits: list[RankFailure],
    settings: RunSettings,
) -> IterationResult:
    """Blame the node(s) whose rank failed first; their groupmates are not certified, not failed.

    Without a failed rank (only an MPI launcher failed, e.g. on corrupted NCCL data) nothing says which node
    is at fault, so every node of the group is recorded, and the message says the failure is unattributed.
    """
    if not culprits:
        message = f"{summary}; no rank pod failed, so the failure is not attributed to one node of the group"
        return failed_iteration(iteration, name, message, nodes, WORKLOAD_FAILED)
    first = culprits[0]
    message = f"{summary}; first failure: {'; '.join(culprit.describe() for culprit in culprits)}"
    try:
        tail = kube.read_log(context.namespace, first.pod, container=first.container)
        message += "; log tail:\n" + sanitize_log_tail(tail, settings.log_limit_bytes)
    except ApiError as error:
        message += f"; log unavailable: {error.reason or error.status}"
    return failed_iteration(iteration, name, message, sorted({culprit.node for culprit in culprits}), WORKLOAD_FAILED)


def _succeeded(
    kube: KubeClient,
    context: StepContext,
    *,
    iteration: int,
    name: str,
    nodes: list[str],
    pods: list[dict[str, Any]],
    measure: Measure | None,
    settings: RunSettings,
    report: Callable[[str], None],
) -> IterationResult:
    """The verdict of a workload that succeeded: its measurement, waited for up to `measurementTimeout`."""
    if measure is None or context.category.entry.measurement == "exit-code":
        return IterationResult(iteration, name, True, f"TrainJob/{name} completed")
    wait = await_measurement(
        kube,
        context,
        pods,
        measure,
        clock=settings.clock,
        sleep=settings.sleep,
        poll_seconds=settings.poll_seconds,
        report=report,
    )
    return measured_iteration(context, iteration=iteration, name=name, nodes=nodes, wait=wait)
