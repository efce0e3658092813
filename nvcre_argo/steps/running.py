"""The run step of one node group: create its TrainJob, watch it to the end, attribute failures.

Idempotent: the TrainJob name is deterministic per (Workflow, group, iteration), so a retried or restarted
step finds the TrainJob it created instead of submitting a second one. Each iteration's result is written to
the group's result ConfigMap as soon as it is known, so a crash later loses nothing already observed; the
record step gathers them. `repeatCount` iterations run here, one after another, for this group.

The health check reads the group's Node objects on every poll. A large group is read with one LIST through
the target's label selector (a page of up to 5,000 Nodes: one request for a full-scale group), a small share
of a large target with one GET per node, so a per-node category never lists the whole target per group.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from nvcre_argo.kube.client import ApiError, KubeClient
from nvcre_argo.kube.resources import NODES, PODS, TRAINJOBS, owned_by
from nvcre_argo.measure.nccl import data_check_failure
from nvcre_argo.names import LABEL_GROUP, LABEL_RECORD, group_result_configmap, runtime_name, trainjob_name
from nvcre_argo.plan.selection import target_label_selector
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.resolve.values import GpuValues
from nvcre_argo.results import HARDWARE_FAILURE_DETECTED, THRESHOLD_VIOLATION, WORKLOAD_FAILED, sanitize_log_tail
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.health import DEFAULT_HEALTH_EXPRESSION, monitor_enabled, unhealthy_nodes
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
RECORD_GROUP_RESULT = "group-result"
# Lists on every poll (the workload's pods, the group's Nodes) take pages this large, so a full-scale group of
# 4,096 nodes costs one request each, not nine.
POLL_PAGE_SIZE = 5000
# The health check lists through the target's selector when that brings at most this many Nodes per group
# node; a smaller share of the target is read with one GET per node.
HEALTH_LIST_SHARE = 4


@dataclass(frozen=True)
class RunSettings:
    """How the step observes; the clock and sleep are injectable so tests control time."""

    poll_seconds: float = 10.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    health_expression: str = DEFAULT_HEALTH_EXPRESSION
    log_limit_bytes: int = 4096


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

    @property
    def succeeded(self) -> bool:
        return bool(self.iterations) and all(item.succeeded for item in self.iterations)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=1)


# A callable that turns a finished workload's log into measurements and threshold verdicts.
Measure = Callable[[StepContext, str], tuple[dict[str, float], list[str]]]


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
    result = GroupResult(group=group, nodes=sorted(nodes))
    repeat = context.category.options.repeat_count or 1
    for iteration in range(repeat):
        outcome = _run_iteration(
            kube,
            context,
            group=group,
            nodes=result.nodes,
            gpu=gpu,
            iteration=iteration,
            settings=settings,
            measure=measure,
            report=report,
            health_selector=health_selector(context, len(result.nodes), matched),
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
    settings: RunSettings,
    measure: Measure | None,
    report: Callable[[str], None],
    health_selector: str | None,
) -> IterationResult:
    name = trainjob_name(context.workflow_name, group, iteration)
    collision = _ensure_trainjob(kube, context, name=name, group=group, nodes=nodes, gpu=gpu)
    if collision:
        return _failed(iteration, name, collision, nodes, WORKLOAD_FAILED)
    timeout = duration_seconds(context.category.timeout_per_job)
    clock = Clock()
    last_phase: Phase | None = None
    # Failed rank containers as first seen: JobSet may delete a failed Job's pods before the TrainJob reports
    # Failed, so the evidence of who failed first is gathered on every poll, not only at the end.
    seen_failures: dict[tuple[str, str], RankFailure] = {}
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
            return _succeeded(kube, context, iteration=iteration, name=name, nodes=nodes, pods=pods, measure=measure)
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
        if monitor_enabled(context.category.target) and phase is Phase.RUNNING:
            sick = unhealthy_nodes(_group_nodes(kube, nodes, health_selector), settings.health_expression)
            if sick:
                kube.delete(TRAINJOBS, name, context.namespace)
                message = f"node health check `{settings.health_expression}` fired during TrainJob/{name}"
                return _failed(iteration, name, message, sick, HARDWARE_FAILURE_DETECTED)
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


def health_selector(context: StepContext, group_size: int, matched: int | None) -> str | None:
    """The label selector the health check lists the group's Nodes with, or None to GET each node: listing
    pays when the group is a large enough share of what the selector lets through (a full-scale group is one
    request instead of thousands), GETs when it is not (a per-node group must not list the whole target)."""
    selector = target_label_selector(context.category.target)
    if selector is None or matched is None or group_size * HEALTH_LIST_SHARE < matched:
        return None
    return selector


def _group_nodes(kube: KubeClient, nodes: Sequence[str], selector: str | None) -> list[dict[str, Any]]:
    """The group's Node objects (a deleted node is absent): one LIST through `selector`, else one GET each.

    A group node the list misses (its labels changed mid-run, as when GPU Feature Discovery drops a lost GPU's
    labels) is read with its own GET, so it is still checked."""
    listed: list[dict[str, Any]] = []
    if selector is not None:
        wanted = set(nodes)
        for page in kube.pages(NODES, label_selector=selector, limit=POLL_PAGE_SIZE):
            listed.extend(node for node in page.get("items", []) if node.get("metadata", {}).get("name") in wanted)
    seen = {node.get("metadata", {}).get("name") for node in listed}
    found = (kube.get(NODES, name) for name in nodes if name not in seen)
    return listed + [node for node in found if node is not None]


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
) -> IterationResult:
    kind = context.category.entry.measurement
    if measure is None or kind == "exit-code":
        return IterationResult(iteration, name, True, f"TrainJob/{name} completed")
    log_text, source = _primary_log(kube, context, pods)
    if kind == "nccl-bandwidth" and (corrupted := data_check_failure(log_text)):
        # Corrupted data fails the workload whatever its bandwidth (nccl-tests exits 1 for it; a wrapper may not).
        return _failed(iteration, name, f"TrainJob/{name} completed but {corrupted}", nodes, WORKLOAD_FAILED)
    values, violations = measure(context, log_text)
    if violations:
        message = "; ".join(violations)
        failed = [{"name": node, "reason": THRESHOLD_VIOLATION, "message": message} for node in nodes]
        return IterationResult(iteration, name, False, message, failed, values)
    if not values:
        # A certification that cannot see its measurement has not certified anything: the group does not
        # pass, and no node is blamed (without thresholds nothing was violated), so its nodes stay uncertified.
        message = f"TrainJob/{name} completed but its {kind} measurement is unavailable: {source}"
        return IterationResult(iteration, name, False, message)
    figures = ", ".join(f"{key}={value:.4g}" for key, value in sorted(values.items()))
    return IterationResult(iteration, name, True, f"TrainJob/{name} completed ({figures})", [], values)


def _primary_log(kube: KubeClient, context: StepContext, pods: list[dict[str, Any]]) -> tuple[str, str]:
    """(log text, where it came from or why there is none) of the pod whose log carries the results: the MPI
    launcher (nccl-tests prints there); for training, the last node (Megatron-LM logs from the last rank)."""
    last_rank_first = context.category.entry.measurement == "megatron-goodput"
    ordered = sorted(pods, key=lambda pod: _log_priority(pod, last_rank_first))
    problems = []
    for pod in ordered:
        pod_name = pod["metadata"]["name"]
        try:
            text = kube.read_log(context.namespace, pod_name, limit_bytes=1 << 20)
        except ApiError as error:
            log.warning("cannot read the log of pod %s: %s", pod_name, error)
            problems.append(f"the log of pod {pod_name} cannot be read ({error.status} {error.reason})")
            continue
        return text, f"nothing measurable in the log of pod {pod_name}"
    return "", "; ".join(problems) or "the workload left no pod whose log could be read"


def _log_priority(pod: dict[str, Any], last_rank_first: bool) -> tuple[bool, int, str]:
    labels = pod.get("metadata", {}).get("labels", {})
    annotations = pod.get("metadata", {}).get("annotations", {})
    index = int(
        annotations.get(
            "batch.kubernetes.io/job-completion-index", labels.get("batch.kubernetes.io/job-completion-index", 0)
        )
        or 0
    )
    is_launcher = labels.get("jobset.sigs.k8s.io/replicatedjob-name") == "launcher"
    return (not is_launcher, -index if last_rank_first else index, pod["metadata"]["name"])


def _failed(iteration: int, name: str, message: str, nodes: Sequence[str], reason: str) -> IterationResult:
    failed = [{"name": node, "reason": reason, "message": message} for node in sorted(nodes)]
    return IterationResult(iteration, name, False, message, failed)


def save_group_result(kube: KubeClient, context: StepContext, result: GroupResult) -> None:
    """Write (or overwrite) the group's result ConfigMap, owned by the Workflow."""
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": group_result_configmap(context.workflow_uid, result.group),
            "namespace": context.namespace,
            "labels": context.labels(**{LABEL_GROUP: result.group, LABEL_RECORD: RECORD_GROUP_RESULT}),
            "ownerReferences": context.owner_references(),
        },
        "data": {"result.json": result.to_json()},
    }
    kube.create_or_replace(manifest)
