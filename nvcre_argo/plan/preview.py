"""What a certification would do on given nodes, before it runs: `nvcre-argo plan`'s model (pure).

GPU time is what a certification costs, and nothing else shows it before a run: per category, the nodes the
target selects and those the plan step would leave out (with its reasons), the node groups, the TrainJobs (one
per group and iteration of `repeatCount`) and an upper bound of the GPU-hours they can hold.

The plan comes from `plan_category`, the function the in-workflow plan step calls, on nodes slimmed the same
way, so the preview and the run cannot disagree. A category the nodes cannot run is previewed with the plan
step's own error (the run would fail it the same way), and the others are still previewed.

GPU-hours per TrainJob are its GPUs (nodes x GPUs per node, for the architecture the plan found) x a duration:
- `upperBound` uses `timeoutPerJob`, the running time after which the run step fails and deletes the
  TrainJob (up to its poll interval and the pods' shutdown). Time queued or blocked in scheduling is not in
  it: under a gang scheduler such a group holds no GPU; without one, pods already placed while their
  groupmates wait hold theirs, for at most another `timeoutPerJob`, which this figure leaves out. It is GPU
  time, not wall-clock time (categories run one after the other, groups up to `maxConcurrent` at once);
- `nominal` uses the catalog entry's `nominalDuration` (how long the tool normally runs, cut to the timeout)
  where the catalog knows one, else it is None: an estimate, not a bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre_argo.plan.model import Exclusion, NodeGroup, Plan, PlanError, PlatformChoice
from nvcre_argo.plan.nodes import Node
from nvcre_argo.plan.planner import plan_category
from nvcre_argo.plan.platform import category_arms
from nvcre_argo.plan.rounds import with_first_round
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.resolve.values import gpu_values

SECONDS_PER_HOUR = 3600


@dataclass(frozen=True)
class TrainJobPreview:
    """One TrainJob the run would create: iteration `iteration` (0-based) of group `group`."""

    group: str
    iteration: int
    nodes: int
    gpus: int


@dataclass(frozen=True)
class GpuHours:
    """GPU-hours: `upper_bound` from timeoutPerJob; `nominal` from the catalog's nominal duration, if known."""

    upper_bound: float
    nominal: float | None


@dataclass(frozen=True)
class CategoryPreview:
    """One category: its plan and what it costs, or `error` (the plan step's message) and no plan."""

    category: ResolvedCategory
    plan: Plan | None
    error: str | None
    gpus_per_node: int | None
    trainjobs: tuple[TrainJobPreview, ...]
    gpu_hours: GpuHours | None

    @property
    def repeat(self) -> int:
        return repeat_count(self.category)

    @property
    def nominal_duration(self) -> str | None:
        return self.category.entry.defaults.nominal_duration


@dataclass(frozen=True)
class PlanPreview:
    """Every category of one Certification, in spec order (they run one after the other)."""

    certification: str
    categories: tuple[CategoryPreview, ...]

    @property
    def planned(self) -> tuple[CategoryPreview, ...]:
        return tuple(item for item in self.categories if item.error is None)

    @property
    def failed(self) -> tuple[CategoryPreview, ...]:
        return tuple(item for item in self.categories if item.error is not None)

    @property
    def gpu_hours(self) -> GpuHours:
        """Totals over the planned categories; `nominal` sums only the categories that have one."""
        hours = [item.gpu_hours for item in self.planned if item.gpu_hours is not None]
        nominal = [item.nominal for item in hours if item.nominal is not None]
        return GpuHours(
            upper_bound=round(sum(item.upper_bound for item in hours), 2),
            nominal=round(sum(nominal), 2) if nominal else None,
        )


def preview_certification(
    certification: str, categories: Sequence[ResolvedCategory], nodes: Iterable[Node]
) -> PlanPreview:
    """Preview every category over the same node list (every category shares the Certification's target)."""
    listed = list(nodes)
    return PlanPreview(certification, tuple(preview_category(category, listed) for category in categories))


def preview_category(category: ResolvedCategory, nodes: Sequence[Node]) -> CategoryPreview:
    """One category's plan (by the plan step's planner), its TrainJobs and their GPU-hours."""
    try:
        plan = with_first_round(plan_category(nodes, category, arms=category_arms(category)))
    except PlanError as error:
        return CategoryPreview(category, None, str(error), None, (), None)
    gpus_per_node = gpu_values(category, plan.architecture).gpus_per_node
    trainjobs = _trainjobs(plan, category, gpus_per_node)
    return CategoryPreview(category, plan, None, gpus_per_node, trainjobs, _gpu_hours(category, trainjobs))


def _trainjobs(plan: Plan, category: ResolvedCategory, gpus_per_node: int) -> tuple[TrainJobPreview, ...]:
    """Group by group, iteration by iteration; each iteration is a TrainJob of its own (`-i<n>` name suffix)."""
    jobs = []
    for group in plan.groups:
        size = group_size(group, category)
        jobs += [
            TrainJobPreview(group.name, iteration, size, size * gpus_per_node)
            for iteration in range(repeat_count(category))
        ]
    return tuple(jobs)


def group_size(group: NodeGroup, category: ResolvedCategory) -> int:
    """The nodes a group's TrainJob asks for: its own, or for an unpinned group (which names none) the
    `nodesPerJob` the scheduler picks, as the TrainJob renderer sizes it."""
    return len(group.nodes) or category.options.nodes_per_job or 1


def repeat_count(category: ResolvedCategory) -> int:
    """Iterations per group (`repeatCount`), each its own TrainJob, as the run step counts them."""
    return category.options.repeat_count or 1


def _gpu_hours(category: ResolvedCategory, trainjobs: Sequence[TrainJobPreview]) -> GpuHours:
    """A nominal duration longer than the timeout is cut to it: the run step stops the TrainJob there."""
    gpus = sum(job.gpus for job in trainjobs)
    timeout = duration_seconds(category.timeout_per_job)
    nominal = category.entry.defaults.nominal_duration
    return GpuHours(
        upper_bound=_hours(gpus * timeout),
        nominal=_hours(gpus * min(duration_seconds(nominal), timeout)) if nominal else None,
    )


def _hours(gpu_seconds: int) -> float:
    return round(gpu_seconds / SECONDS_PER_HOUR, 2)


def preview_document(preview: PlanPreview) -> dict[str, Any]:
    """The preview as JSON-ready data (`-o json`): full node lists, camelCase like the rest of the API."""
    return {
        "certification": preview.certification,
        "categories": [_category_document(item) for item in preview.categories],
        "gpuHours": _hours_document(preview.gpu_hours),
    }


def _category_document(item: CategoryPreview) -> dict[str, Any]:
    category, plan = item.category, item.plan
    document: dict[str, Any] = {
        "index": category.index,
        "domain": category.domain,
        "variant": category.variant,
        "timeoutPerJob": category.timeout_per_job,
        "nominalDuration": item.nominal_duration,
        "repeatCount": item.repeat,
        "maxConcurrent": category.options.max_concurrent or None,
        "error": item.error,
    }
    if plan is None:
        return document
    gpus_per_node = item.gpus_per_node or 0
    return document | {
        "architecture": plan.architecture,
        "gpusPerNode": item.gpus_per_node,
        "platform": _platform_document(plan.platform),
        "candidates": list(plan.candidates),
        "selected": list(plan.eligible),
        "excluded": [_exclusion_document(exclusion) for exclusion in plan.excluded],
        "groups": [_group_document(group, group_size(group, category), gpus_per_node) for group in plan.groups],
        "trainJobs": [
            {"group": job.group, "iteration": job.iteration, "nodes": job.nodes, "gpus": job.gpus}
            for job in item.trainjobs
        ],
        "gpuHours": _hours_document(item.gpu_hours) if item.gpu_hours else None,
    }


def _platform_document(choice: PlatformChoice | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    return {
        "name": choice.name,
        "source": choice.source,
        "instanceType": choice.instance_type,
        "arms": list(choice.arms),
        "nicResource": choice.nic_resource,
    }


def _exclusion_document(exclusion: Exclusion) -> dict[str, str]:
    return {"node": exclusion.node, "reason": exclusion.reason, "message": exclusion.message}


def _group_document(group: NodeGroup, size: int, gpus_per_node: int) -> dict[str, Any]:
    return {
        "name": group.name,
        "nodes": list(group.nodes),
        "size": size,
        "gpus": size * gpus_per_node,
        "overflow": group.overflow,
        "pinned": group.pinned,
        "domain": group.domain,
    }


def _hours_document(hours: GpuHours) -> Mapping[str, float | None]:
    return {"upperBound": hours.upper_bound, "nominal": hours.nominal}
