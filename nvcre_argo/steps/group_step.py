"""One item of a category's group fan-out, run to its end: the group Argo shows as `group(i:<name>)`, then the
overflow groups it hosts (they borrow its nodes, so they run after it), and what Argo should show for it.

Both ways a category runs its groups share this: a step pod per group (`nvcre-argo step run`, the outcome
becomes the pod's outputs and exit code) and one shared runner for all the groups (`steps.shared_runner`,
the outcome becomes the group's suspend node's phase, message and outputs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.plan.model import Plan
from nvcre_argo.plan.platform import planned_gpu_values
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.following import RunSettings
from nvcre_argo.steps.group_summary import (
    confirmation_job_summary,
    failed_node_count,
    failure_summary,
    isolation_job_summary,
    measurements_text,
)
from nvcre_argo.steps.measurement_wait import Measure
from nvcre_argo.steps.running import run_group


@dataclass(frozen=True)
class GroupStepOutcome:
    """What Argo shows for one item: passed or not, the one-line failure (its message), and its outputs."""

    passed: bool
    summary: str
    measurements: str
    failed_node_count: str


def fan_out_nodes(plan: Plan, items: Sequence[str]) -> set[str]:
    """Every node the items of a fan-out test: their groups' and those of the overflow groups they host."""
    return {node for item in items for member in (plan.group(item), *plan.hosted_by(item)) for node in member.nodes}


def run_group_step(
    kube: KubeClient,
    context: StepContext,
    plan: Plan,
    item: str,
    *,
    settings: RunSettings,
    measure: Measure | None,
    report: Callable[[str], None],
) -> GroupStepOutcome:
    """Run the group named `item` and the overflow groups it hosts; PlanError (LookupError) when the plan has
    no such group. A diagnose job blames nobody (the record step's isolation verdict names the faulty nodes),
    so its failed-node count is empty and its failure says what the job was."""
    group = plan.group(item)
    results = [
        run_group(
            kube,
            context,
            group=member.name,
            nodes=member.nodes,
            gpu=planned_gpu_values(context.category, plan),
            settings=settings,
            measure=measure,
            report=report,
            matched=len(plan.candidates),
        )
        for member in (group, *plan.hosted_by(group.name))
    ]
    measurements = measurements_text(results)
    if group.round is not None:
        passed = results[0].succeeded
        if passed:
            summary = ""
        elif plan.isolation is None:
            summary = confirmation_job_summary(results[0], round_number=group.round)
        else:
            summary = isolation_job_summary(results[0], round_number=group.round, stage=group.stage or "")
        return GroupStepOutcome(passed, summary, measurements, "")
    passed = all(result.succeeded for result in results)
    return GroupStepOutcome(
        passed, "" if passed else failure_summary(results), measurements, str(failed_node_count(results))
    )
