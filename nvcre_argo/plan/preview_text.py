"""`nvcre-argo plan`'s text output: a plan preview a person reads at any cluster size (pure).

Node lists are shortened to a few names per line (`a,b,c,d,e (+59 more)`) so a 1,000-node group stays one
line; every exclusion gets its own line with its reason, because each is a node someone has to look at.
`-o json` (`preview_document`) has every name.
"""

from __future__ import annotations

from nvcre_argo.plan.model import NodeGroup
from nvcre_argo.plan.preview import CategoryPreview, GpuHours, PlanPreview, group_size
from nvcre_argo.plan.selection import shorten_names

INDENT = "  "
LABEL_WIDTH = 11  # "TrainJobs: " and friends line up


def render_preview_text(preview: PlanPreview) -> str:
    """The whole preview: a header, one block per category, and the totals."""
    count = len(preview.categories)
    lines = [f"Certification {preview.certification}: {_plural(count, 'category', 'categories')}, run in order", ""]
    for item in preview.categories:
        lines += [*_category_lines(item), ""]
    lines.append(_total_line(preview))
    return "\n".join(lines) + "\n"


def _category_lines(item: CategoryPreview) -> list[str]:
    category, plan, hours = item.category, item.plan, item.gpu_hours
    lines = [f"category {category.index}: {category.key}"]
    if plan is None or hours is None:
        return [*lines, _row("error", f"cannot be planned: {item.error}")]
    lines.append(
        _row(
            "nodes",
            f"{len(plan.candidates)} match the target, {len(plan.eligible)} selected, {len(plan.excluded)} excluded",
        )
    )
    for number, exclusion in enumerate(plan.excluded):
        lines.append(
            _row("excluded" if number == 0 else "", f"{exclusion.node}: {exclusion.reason}: {exclusion.message}")
        )
    lines.append(_row("GPUs", f"architecture {plan.architecture or 'unknown'}, {item.gpus_per_node} per node"))
    if plan.platform is not None:
        instance = f", instance type {plan.platform.instance_type}" if plan.platform.instance_type else ""
        nic = f", NIC resource {plan.platform.nic_resource}" if plan.platform.nic_resource else ""
        lines.append(_row("platform", f"{plan.platform.name} ({plan.platform.source}{instance}{nic})"))
        lines.append(_row("arms", ", ".join(plan.platform.arms) or "none"))
    if plan.isolation is not None:
        lines.append(
            _row(
                "isolation",
                f"testScale diagnose over {len({d for _, d in plan.isolation.domains})} domain(s), minGroupSize "
                f"{plan.isolation.min_group_size}: round 1 below; later rounds split what fails (none if all pass)",
            )
        )
    lines.append(_row("groups", str(len(plan.groups))))
    lines += [_row("", _group_text(group, item)) for group in plan.groups]
    lines.append(_row("TrainJobs", _trainjobs_text(item)))
    lines.append(_row("GPU-hours", _hours_text(item, hours)))
    return lines


def _group_text(group: NodeGroup, item: CategoryPreview) -> str:
    size = group_size(group, item.category)
    gpus = size * (item.gpus_per_node or 0)
    text = f"{group.name}: {_plural(size, 'node', 'nodes')}, {gpus} GPUs"
    if group.domain:
        text += f", NVLink domain {group.domain}"
    host = item.plan.host_of(group) if item.plan else None
    if host:
        text += f", borrows nodes from {host} and runs after it, in {host}'s step"
    if not group.pinned:
        return text + ": any of the target's nodes, picked by the scheduler (placement Unpinned)"
    return f"{text}: {shorten_names(group.nodes)}"


def _trainjobs_text(item: CategoryPreview) -> str:
    groups = len(item.plan.groups) if item.plan else 0
    iterations = _plural(item.repeat, "iteration", "iterations")
    text = f"{len(item.trainjobs)} ({_plural(groups, 'group', 'groups')} x {iterations})"
    limit = item.category.options.max_concurrent
    return text + (f", at most {limit} at once (maxConcurrent)" if limit else ", no limit on how many at once")


def _hours_text(item: CategoryPreview, hours: GpuHours) -> str:
    gpus = sum(job.gpus for job in item.trainjobs)
    text = f"at most {format_hours(hours.upper_bound)} ({gpus} GPUs x timeoutPerJob {item.category.timeout_per_job})"
    if hours.nominal is None:
        return text + "; no nominal duration in the catalog"
    return text + f"; nominal {format_hours(hours.nominal)} ({gpus} GPUs x nominalDuration {item.nominal_duration})"


def _total_line(preview: PlanPreview) -> str:
    hours = preview.gpu_hours
    planned, count = len(preview.planned), len(preview.categories)
    text = f"total: at most {format_hours(hours.upper_bound)} GPU-hours"
    text += f" over {planned} of {count} categories" if planned < count else ""
    known = sum(1 for item in preview.planned if item.gpu_hours and item.gpu_hours.nominal is not None)
    if hours.nominal is not None:
        nominal = format_hours(hours.nominal)
        text += f"; nominal {nominal} GPU-hours for the {known} of {planned} with a nominal duration"
    if preview.failed:
        text += f"; {_plural(len(preview.failed), 'category', 'categories')} cannot be planned"
    return text


def _row(label: str, text: str) -> str:
    heading = f"{label}:" if label else ""
    return f"{INDENT}{heading.ljust(LABEL_WIDTH)}{text}"


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def format_hours(value: float) -> str:
    """`1536`, `1.5`, `0.27`: at most two decimals, no trailing zeros."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")
