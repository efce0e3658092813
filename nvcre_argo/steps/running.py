"""The run step of one node group: create its TrainJob, follow it to the end (`steps.following`), restart a
checkpointing workload that failed after a checkpoint (`steps.restarts`), and record the result.

Idempotent: the TrainJob name is deterministic per (Workflow, group, iteration, attempt, restart), so a
retried step finds the TrainJob it created instead of submitting a second one, and a restarted workload's
TrainJob carries the restarts before it. A step run again after its group's result was fully recorded
(`argo retry` of the category Workflow) is a new attempt: new TrainJobs (`-a2`), a new test, never the old
verdict read again. Each iteration's result is written to the group's result ConfigMap as soon as it is
known, so a crash later loses nothing already observed; the record step gathers them. `repeatCount`
iterations run here, one after another, for this group.

The health check follows the group's Nodes for the life of each workload: a large share of the target is
watched through the target's label selector, a one-node group through its name, and a few nodes of a large
target are read with one GET each per poll (`health_selection` says why). The expression is compiled once
per run and evaluated only on nodes that changed (`steps.health`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CONFIGMAPS, TRAINJOBS, owned_by
from nvcre_argo.names import (
    LABEL_GROUP,
    LABEL_RECORD,
    checkpoint_dir,
    group_result_configmap,
    runtime_name,
    trainjob_name,
)
from nvcre_argo.plan.selection import target_label_selector
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.values import GpuValues
from nvcre_argo.results import (
    RECORD_GROUP_RESULT,
    WORKLOAD_FAILED,
    GroupResultRecord,
    ResultsError,
    group_result_binary_data,
    read_group_result,
)
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.following import RestartHistory, RunSettings, follow_trainjob
from nvcre_argo.steps.health import HealthCheck, compile_health_check, monitor_enabled
from nvcre_argo.steps.iteration import IterationResult, failed_iteration
from nvcre_argo.steps.measurement_wait import Measure
from nvcre_argo.steps.node_watch import GroupHealth, NodeWatch, Selection, one_node_selection
from nvcre_argo.steps.restarts import (
    Restart,
    decode_restarts,
    encode_restarts,
    may_restart,
    restart_record,
)

log = logging.getLogger(__name__)


# The health check watches the target's selector when that brings at most this many Nodes per group node;
# each concurrent group's watch lists the whole target once, so only groups this large a share of it (at most
# this many at once) watch it, and a few nodes of a large target are read with one GET each per poll.
HEALTH_LIST_SHARE = 4


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
    """One test of the group: its TrainJob followed to an outcome, and for a checkpointing category the
    restarts from checkpoint of a failed workload (`steps.restarts`) until it passes, fails for good, or has
    no restarts left."""
    first = trainjob_name(context.workflow_name, group, iteration, attempt)
    checkpoint = context.category.checkpoint
    max_restarts = checkpoint.max_restarts if checkpoint is not None else 0
    history = RestartHistory(
        restarts=_restarts_so_far(
            kube, context, group=group, iteration=iteration, attempt=attempt, max_restarts=max_restarts
        )
    )
    while True:
        name = trainjob_name(context.workflow_name, group, iteration, attempt, restart=len(history.restarts))
        collision = _ensure_trainjob(
            kube,
            context,
            name=name,
            group=group,
            nodes=nodes,
            gpu=gpu,
            checkpoint_dir=checkpoint_dir(first) if checkpoint is not None else None,
            annotations=encode_restarts(history.restarts),
        )
        if collision:
            return failed_iteration(iteration, name, collision, nodes, WORKLOAD_FAILED)
        # The monitor follows the group's Nodes for the whole workload, and stops with it, however it ends.
        shared = settings.mirror.nodes if settings.mirror is not None else None
        health = (
            NodeWatch(kube, GroupHealth(nodes, check), selection, shared=shared)
            if monitor_enabled(context.category.target)
            else None
        )
        with health if health is not None else contextlib.nullcontext():
            followed = follow_trainjob(
                kube,
                context,
                iteration=iteration,
                name=name,
                nodes=nodes,
                settings=settings,
                measure=measure,
                report=report,
                health=health,
                history=history,
            )
        outcome = replace(followed.result, restarts=[asdict(item) for item in history.restarts])
        if not followed.crashed or not may_restart(
            restarts_used=len(history.restarts), max_restarts=max_restarts, checkpoint=followed.checkpoint
        ):
            return outcome
        assert followed.checkpoint is not None
        restart = restart_record(name, outcome.message, followed.checkpoint, followed.active_seconds)
        report(
            f"TrainJob/{name} failed after checkpoint iteration {restart.checkpoint_iteration}; restarting from it "
            f"({len(history.restarts) + 1}/{max_restarts}), {restart.lost_work_seconds:.0f}s of work lost"
        )
        with contextlib.suppress(ApiError):
            kube.delete(TRAINJOBS, name, context.namespace)
        history.restarts.append(restart)
        history.failed_at = settings.clock()


def _restarts_so_far(
    kube: KubeClient, context: StepContext, *, group: str, iteration: int, attempt: int, max_restarts: int
) -> list[Restart]:
    """The restarts a retried step pod inherits: those the newest TrainJob of this test carries (none when
    only the first exists, or none yet)."""
    for restart in range(max_restarts, 0, -1):
        existing = kube.get(
            TRAINJOBS, trainjob_name(context.workflow_name, group, iteration, attempt, restart), context.namespace
        )
        if existing is not None and owned_by(existing, context.workflow_uid):
            return decode_restarts(existing)[:restart]
    return []


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
    kube: KubeClient,
    context: StepContext,
    *,
    name: str,
    group: str,
    nodes: list[str],
    gpu: GpuValues,
    checkpoint_dir: str | None = None,
    annotations: dict[str, str] | None = None,
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
        checkpoint_dir=checkpoint_dir,
        annotations=annotations,
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
