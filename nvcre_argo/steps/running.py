"""The run step of one node group: create its TrainJob, watch it to the end, attribute failures.

Idempotent: the TrainJob name is deterministic per (Workflow, group, iteration), so a retried or restarted
step finds the TrainJob it created instead of submitting a second one. Each iteration's result is written to
the group's result ConfigMap as soon as it is known, so a crash later loses nothing already observed; the
record step gathers them. `repeatCount` iterations run here, one after another, for this group.
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
from nvcre_argo.names import LABEL_GROUP, LABEL_RECORD, group_result_configmap, runtime_name, trainjob_name
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.resolve.values import GpuValues
from nvcre_argo.results import HARDWARE_FAILURE_DETECTED, THRESHOLD_VIOLATION, WORKLOAD_FAILED, sanitize_log_tail
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.health import DEFAULT_HEALTH_EXPRESSION, monitor_enabled, unhealthy_nodes
from nvcre_argo.steps.workload import Clock, Phase, classify, failure_message, scheduling_message

log = logging.getLogger(__name__)

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RECORD_GROUP_RESULT = "group-result"


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
) -> GroupResult:
    """Run every iteration of one group and return (and persist) its result."""
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
) -> IterationResult:
    name = trainjob_name(context.workflow_name, group, iteration)
    collision = _ensure_trainjob(kube, context, name=name, group=group, nodes=nodes, gpu=gpu)
    if collision:
        return _failed(iteration, name, collision, nodes, WORKLOAD_FAILED)
    timeout = duration_seconds(context.category.timeout_per_job)
    clock = Clock()
    last_phase: Phase | None = None
    while True:
        trainjob = kube.get(TRAINJOBS, name, context.namespace)
        pods, _ = kube.list(PODS, context.namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")
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
            detail = _failure_detail(kube, context, pods, settings)
            return _failed(
                iteration, name, f"TrainJob/{name} failed: {failure_message(trainjob)}{detail}", nodes, WORKLOAD_FAILED
            )
        if monitor_enabled(context.category.target) and phase is Phase.RUNNING:
            sick = unhealthy_nodes(_group_nodes(kube, nodes), settings.health_expression)
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


def _group_nodes(kube: KubeClient, nodes: Sequence[str]) -> list[dict[str, Any]]:
    found = (kube.get(NODES, name) for name in nodes)
    return [node for node in found if node is not None]


def _failure_detail(kube: KubeClient, context: StepContext, pods: list[dict[str, Any]], settings: RunSettings) -> str:
    """Which pod failed, on which node, with which exit code, and the end of its log when it can be read."""
    for pod in sorted(pods, key=lambda item: item["metadata"]["name"]):
        for status in pod.get("status", {}).get("containerStatuses") or []:
            terminated = status.get("state", {}).get("terminated") or status.get("lastState", {}).get("terminated")
            if terminated and terminated.get("exitCode", 0) != 0:
                pod_name = pod["metadata"]["name"]
                node = pod.get("spec", {}).get("nodeName", "?")
                detail = (
                    f"; pod {pod_name} on node {node}: container {status.get('name')} exited {terminated['exitCode']}"
                )
                if terminated.get("reason"):
                    detail += f" ({terminated['reason']})"
                try:
                    tail = kube.read_log(context.namespace, pod_name, container=status.get("name"))
                except ApiError as error:
                    return detail + f"; log unavailable: {error.reason or error.status}"
                return detail + "; log tail:\n" + sanitize_log_tail(tail, settings.log_limit_bytes)
    return ""


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
    if measure is None or context.category.entry.measurement == "exit-code":
        return IterationResult(iteration, name, True, f"TrainJob/{name} completed")
    log_text = _primary_log(kube, context, pods)
    values, violations = measure(context, log_text)
    if violations:
        message = "; ".join(violations)
        failed = [{"name": node, "reason": THRESHOLD_VIOLATION, "message": message} for node in nodes]
        return IterationResult(iteration, name, False, message, failed, values)
    figures = ", ".join(f"{key}={value:.4g}" for key, value in sorted(values.items()))
    return IterationResult(
        iteration, name, True, f"TrainJob/{name} completed" + (f" ({figures})" if figures else ""), [], values
    )


def _primary_log(kube: KubeClient, context: StepContext, pods: list[dict[str, Any]]) -> str:
    """The pod whose log carries the results: the MPI launcher (nccl-tests prints there); for training, the
    last node (Megatron-LM logs from the last rank)."""
    last_rank_first = context.category.entry.measurement == "megatron-goodput"
    ordered = sorted(pods, key=lambda pod: _log_priority(pod, last_rank_first))
    for pod in ordered:
        try:
            return kube.read_log(context.namespace, pod["metadata"]["name"], limit_bytes=1 << 20)
        except ApiError as error:
            log.warning("cannot read the log of pod %s: %s", pod["metadata"]["name"], error)
    return ""


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
