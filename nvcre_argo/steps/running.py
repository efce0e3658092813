"""The run step of one node group: create its TrainJob, watch it to the end, attribute failures.

Idempotent: the TrainJob name is deterministic per (Workflow, group, iteration, attempt), so a retried or
restarted step finds the TrainJob it created instead of submitting a second one. A step run again after its
group's result was fully recorded (`argo retry` of the category Workflow) is a new attempt: new TrainJobs
(`-a2`), a new test, never the old verdict read again. Each iteration's result is written to
the group's result ConfigMap as soon as it is known, so a crash later loses nothing already observed; the
record step gathers them. `repeatCount` iterations run here, one after another, for this group. A workload
that succeeded is measured from its log, waiting up to `measurementTimeout` for the measurement to appear
(`steps.measurement_wait`). A training workload that stops making progress (no first iteration within
`startupStallTimeoutSeconds`, or no new one for 3 x its average step time) is deleted and failed
`WorkloadStalled` (`steps.stall`; one read of the last rank's log end per poll while it runs).

The health check follows the group's Nodes with one list + watch for the life of an iteration
(`steps.node_watch`), so a steady poll costs two requests (the TrainJob, its pods) whatever the group's size:
a large share of the target is watched through the target's label selector, a one-node group through its
name, and a few nodes of a large target are read with one GET each per poll (`health_selection` says why).
The expression is compiled once per run and evaluated only on nodes that changed (`steps.health`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from nvcre_argo.kube.client import ApiError, KubeClient
from nvcre_argo.kube.resources import CONFIGMAPS, PODS, TRAINJOBS, owned_by
from nvcre_argo.measure.megatron import parse_megatron_log
from nvcre_argo.names import LABEL_GROUP, LABEL_RECORD, group_result_configmap, runtime_name, trainjob_name
from nvcre_argo.plan.selection import target_label_selector
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.resolve.values import GpuValues
from nvcre_argo.results import (
    HARDWARE_FAILURE_DETECTED,
    RECORD_GROUP_RESULT,
    THRESHOLD_VIOLATION,
    WORKLOAD_FAILED,
    GroupResultRecord,
    ResultsError,
    group_result_binary_data,
    read_group_result,
    sanitize_log_tail,
)
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.health import DEFAULT_HEALTH_EXPRESSION, HealthCheck, compile_health_check, monitor_enabled
from nvcre_argo.steps.measurement_wait import Measure, MeasurementWait, await_measurement, timeout_message
from nvcre_argo.steps.node_watch import GroupHealth, NodeWatch, Selection, one_node_selection
from nvcre_argo.steps.stall import Progress, TrainingLog, read_training_log, stall_limits
from nvcre_argo.steps.workload import (
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

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# The pods list on every poll takes pages this large, so a full-scale group of 4,096 nodes costs one request.
POLL_PAGE_SIZE = 5000
# The health check watches the target's selector when that brings at most this many Nodes per group node;
# each concurrent group's watch lists the whole target once, so only groups this large a share of it (at most
# this many at once) watch it, and a few nodes of a large target are read with one GET each per poll.
HEALTH_LIST_SHARE = 4


@dataclass(frozen=True)
class RunSettings:
    """How the step observes; the clock and sleep are injectable so tests control time. `poll_seconds` paces
    both the TrainJob's polls and the re-reads of a finished workload's log while its measurement is awaited."""

    poll_seconds: float = 10.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    health_expression: str = DEFAULT_HEALTH_EXPRESSION
    log_limit_bytes: int = 4096
    # How a running training workload's log end is read for stall detection (a test's canned log: no kubelet).
    training_log: TrainingLog = read_training_log


@dataclass
class IterationResult:
    iteration: int
    trainjob: str
    succeeded: bool
    message: str
    failed_nodes: list[dict[str, str]] = field(default_factory=list)  # {name, reason, message}
    measurements: dict[str, float] = field(default_factory=dict)


@dataclass
class GroupResult:
    group: str
    nodes: list[str]
    iterations: list[IterationResult] = field(default_factory=list)
    attempt: int = 1

    @property
    def succeeded(self) -> bool:
        return bool(self.iterations) and all(item.succeeded for item in self.iterations)

    def binary_data(self) -> dict[str, str]:
        """The result ConfigMap's `binaryData` (compressed; see `results`)."""
        return group_result_binary_data(asdict(self))


def run_group(
    kube: KubeClient,
    context: StepContext,
    *,
    group: str,
    nodes: Sequence[str],
    gpu: GpuValues,
    settings: RunSettings,
    measure: Measure | None = None,
    report: Callable[[str], None] = print,
    matched: int | None = None,
) -> GroupResult:
    """Run every iteration of one group and return (and persist) its result. `matched` is how many nodes the
    target matched at plan time (it decides how the health check reads the group's Nodes; None: unknown)."""
    repeat = context.category.options.repeat_count or 1
    attempt = next_attempt(_previous_result(kube, context, group), repeat)
    result = GroupResult(group=group, nodes=sorted(nodes), attempt=attempt)
    check = compile_health_check(settings.health_expression)
    for iteration in range(repeat):
        outcome = _run_iteration(
            kube,
            context,
            group=group,
            nodes=result.nodes,
            gpu=gpu,
            iteration=iteration,
            attempt=attempt,
            settings=settings,
            measure=measure,
            report=report,
            check=check,
            selection=health_selection(context, result.nodes, matched),
        )
        result.iterations.append(outcome)
        save_group_result(kube, context, result)
        verdict = "PASSED" if outcome.succeeded else "FAILED"
        report(f"group {group} iteration {iteration + 1}/{repeat}: {verdict}: {outcome.message}")
    return result


def _run_iteration(
    kube: KubeClient,
    context: StepContext,
    *,
    group: str,
    nodes: list[str],
    gpu: GpuValues,
    iteration: int,
    attempt: int,
    settings: RunSettings,
    measure: Measure | None,
    report: Callable[[str], None],
    check: HealthCheck,
    selection: Selection | None,
) -> IterationResult:
    name = trainjob_name(context.workflow_name, group, iteration, attempt)
    collision = _ensure_trainjob(kube, context, name=name, group=group, nodes=nodes, gpu=gpu)
    if collision:
        return _failed(iteration, name, collision, nodes, WORKLOAD_FAILED)
    # The monitor follows the group's Nodes for the whole iteration, and stops with it, however it ends.
    health = NodeWatch(kube, GroupHealth(nodes, check), selection) if monitor_enabled(context.category.target) else None
    with health if health is not None else contextlib.nullcontext():
        return _follow_trainjob(
            kube,
            context,
            iteration=iteration,
            name=name,
            nodes=nodes,
            settings=settings,
            measure=measure,
            report=report,
            health=health,
        )


def _follow_trainjob(
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
) -> IterationResult:
    """Poll the TrainJob and its pods to an outcome; `health` (None: the monitor is off) says which group
    nodes the health check fires on."""
    timeout = duration_seconds(context.category.timeout_per_job)
    clock = Clock()
    last_phase: Phase | None = None
    # Failed rank containers as first seen: JobSet may delete a failed Job's pods before the TrainJob reports
    # Failed, so the evidence of who failed first is gathered on every poll, not only at the end.
    seen_failures: dict[tuple[str, str], RankFailure] = {}
    limits = stall_limits(context)
    progress = Progress()
    while True:
        trainjob = kube.get(TRAINJOBS, name, context.namespace)
        pods, _ = kube.list(PODS, context.namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}", limit=POLL_PAGE_SIZE)
        for failure in rank_failures(pods, context.category.entry.gpu_replicated_jobs):
            seen_failures.setdefault((failure.pod, failure.container), failure)
        phase = classify(trainjob, pods)
        clock = clock.advance(phase, settings.clock())
        if phase is not last_phase:
            report(f"TrainJob/{name}: {phase.value} (running time counted: {clock.active_seconds:.0f}s of {timeout}s)")
            last_phase = phase
        if phase is Phase.MISSING:
            return _failed(iteration, name, f"Workload TrainJob/{name} was deleted", nodes, WORKLOAD_FAILED)
        if phase is Phase.COMPLETE:
            return _succeeded(
                kube,
                context,
                iteration=iteration,
                name=name,
                nodes=nodes,
                pods=pods,
                measure=measure,
                settings=settings,
                report=report,
            )
        if phase is Phase.FAILED:
            assert trainjob is not None
            return _attributed_failure(
                kube,
                context,
                iteration=iteration,
                name=name,
                summary=f"TrainJob/{name} failed: {failure_message(trainjob)}",
                nodes=nodes,
                culprits=first_failures(list(seen_failures.values())),
                settings=settings,
            )
        if health is not None and phase is Phase.RUNNING:
            sick = health.sick()
            if sick:
                kube.delete(TRAINJOBS, name, context.namespace)
                message = f"node health check `{settings.health_expression}` fired during TrainJob/{name}"
                return _failed(iteration, name, message, sick, HARDWARE_FAILURE_DETECTED)
        if limits is not None and phase is Phase.RUNNING:
            text = settings.training_log(kube, context, pods)
            progress = progress.observe(parse_megatron_log(text), clock.active_seconds)
            stalled = progress.stall(limits, clock.active_seconds, name)
            if stalled:
                kube.delete(TRAINJOBS, name, context.namespace)
                return _failed(iteration, name, stalled, nodes, WORKLOAD_FAILED)
        if clock.blocked_too_long(timeout):
            kube.delete(TRAINJOBS, name, context.namespace)
            message = (
                f"TrainJob/{name} timed out after {context.category.timeout_per_job} blocked in scheduling: "
                f"{scheduling_message(pods)}"
            )
            return _failed(iteration, name, message, nodes, WORKLOAD_FAILED)
        if clock.timed_out(timeout):
            kube.delete(TRAINJOBS, name, context.namespace)
            message = f"TrainJob/{name} timed out after {context.category.timeout_per_job} of running time"
            return _failed(iteration, name, message, nodes, WORKLOAD_FAILED)
        settings.sleep(settings.poll_seconds)


def next_attempt(previous: GroupResultRecord | None, repeat: int) -> int:
    """Which attempt this run of the step is: the recorded one while it is unfinished (a retried step pod
    follows its TrainJobs), the next one once every iteration was recorded (the group is tested again)."""
    if previous is None:
        return 1
    return previous["attempt"] + 1 if len(previous["iterations"]) >= repeat else previous["attempt"]


def _previous_result(kube: KubeClient, context: StepContext, group: str) -> GroupResultRecord | None:
    """The group's recorded result, or None (none yet, or unreadable: then the first attempt's names apply)."""
    configmap = kube.get(CONFIGMAPS, group_result_configmap(context.workflow_uid, group), context.namespace)
    if configmap is None:
        return None
    try:
        return read_group_result(configmap)
    except ResultsError as error:
        log.warning("ignoring the unreadable result of group %s: %s", group, error)
        return None


def _ensure_trainjob(
    kube: KubeClient, context: StepContext, *, name: str, group: str, nodes: list[str], gpu: GpuValues
) -> str | None:
    """Create the TrainJob unless this Workflow already did; a foreign object of that name is a collision."""
    manifest = render_trainjob(
        context.category,
        gpu,
        name=name,
        namespace=context.namespace,
        certification=context.certification,
        runtime_name=runtime_name(context.workflow_name),
        group=group,
        nodes=nodes,
        owner_references=context.owner_references(),
    )
    if kube.create_if_absent(manifest):
        return None
    existing = kube.get(TRAINJOBS, name, context.namespace) or {}
    if owned_by(existing, context.workflow_uid):
        return None
    return f"TrainJob/{name} already exists and is not owned by this Workflow; it was left alone"


def health_selection(context: StepContext, nodes: Sequence[str], matched: int | None) -> Selection | None:
    """How the health check follows the group's Nodes (see the module docstring of `steps.node_watch`).

    - the target's label selector when the group is a large enough share of what it lets through (a
      full-scale group: one list, then events only; `matched` None, unknown, counts as large);
    - the node's name for a one-node group (per-node categories: one watch of one key, no poll traffic);
    - None otherwise, one GET per node per poll: a watch of the whole target would list every Node it matches
      once per concurrent group (10,000 Nodes, ~185 MiB, for each 8-node group), where 8 GETs per 10 s poll
      read 8 Nodes.
    """
    selector = target_label_selector(context.category.target)
    if selector is not None and (matched is None or len(nodes) * HEALTH_LIST_SHARE >= matched):
        return Selection(label_selector=selector)
    if len(nodes) == 1:
        return one_node_selection(nodes)
    return None


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
        return _failed(iteration, name, message, nodes, WORKLOAD_FAILED)
    first = culprits[0]
    message = f"{summary}; first failure: {'; '.join(culprit.describe() for culprit in culprits)}"
    try:
        tail = kube.read_log(context.namespace, first.pod, container=first.container)
        message += "; log tail:\n" + sanitize_log_tail(tail, settings.log_limit_bytes)
    except ApiError as error:
        message += f"; log unavailable: {error.reason or error.status}"
    return _failed(iteration, name, message, sorted({culprit.node for culprit in culprits}), WORKLOAD_FAILED)


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


def measured_iteration(
    context: StepContext, *, iteration: int, name: str, nodes: Sequence[str], wait: MeasurementWait
) -> IterationResult:
    """A completed workload's iteration, judged by what the wait for its measurement found (pure).

    Corrupted data fails the workload whatever its bandwidth (nccl-tests exits 1 for it; a wrapper may not).
    No measurement within `measurementTimeout` does not pass: the nodes are blamed (`ThresholdViolation`) only
    when the category set thresholds, which an unmeasured run cannot meet; without thresholds nothing was
    violated, so no node is blamed and they stay uncertified (nvcre-contract.md §7.9)."""
    reading = wait.reading
    if reading.corrupted:
        return _failed(iteration, name, f"TrainJob/{name} completed but {reading.corrupted}", nodes, WORKLOAD_FAILED)
    if not reading.settled:
        message = timeout_message(context, name, wait)
        blamed = nodes if context.category.thresholds else []
        return replace(_failed(iteration, name, message, blamed, THRESHOLD_VIOLATION), measurements=reading.values)
    if reading.violations:
        message = "; ".join(reading.violations)
        return replace(_failed(iteration, name, message, nodes, THRESHOLD_VIOLATION), measurements=reading.values)
    figures = ", ".join(f"{key}={value:.4g}" for key, value in sorted(reading.values.items()))
    return IterationResult(iteration, name, True, f"TrainJob/{name} completed ({figures})", [], reading.values)


def _failed(iteration: int, name: str, message: str, nodes: Sequence[str], reason: str) -> IterationResult:
    failed = [{"name": node, "reason": reason, "message": message} for node in sorted(nodes)]
    return IterationResult(iteration, name, False, message, failed)


def save_group_result(kube: KubeClient, context: StepContext, result: GroupResult) -> None:
    """Write (or overwrite) the group's result ConfigMap, owned by the Workflow (compressed: a group that
    blames all of its 10,000 nodes stays far below the 1 MiB object limit)."""
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": group_result_configmap(context.workflow_uid, result.group),
            "namespace": context.namespace,
            "labels": context.labels(**{LABEL_GROUP: result.group, LABEL_RECORD: RECORD_GROUP_RESULT}),
            "ownerReferences": context.owner_references(),
        },
        "binaryData": result.binary_data(),
    }
    kube.create_or_replace(manifest)
