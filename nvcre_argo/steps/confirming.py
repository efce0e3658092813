"""Confirmation inside Argo: after a category's groups, test each node of an unattributed failure again with
known-healthy partners (`plan.confirmation`), and record who was really at fault.

The category Workflow runs `plan -> groups -> confirm -> record`; `confirm` is the same round loop as
`testScale: diagnose` (`plan-round -> groups -> next round`, Argo recursion), whose `plan-round` step plans
confirmation rounds for a plan without isolation. With nothing to confirm, its first `plan-round` says done
(and with the shared runner it is skipped when every group passed). Like diagnose, `plan-round` is a pure
function of the plan ConfigMap and the groups' result ConfigMaps, so a retried step plans the same round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from nvcre_argo.plan.confirmation import (
    Blame,
    Confirmation,
    confirmable,
    confirmation_state,
    plan_confirmation_round,
)
from nvcre_argo.plan.model import NodeGroup, Plan, PlanError
from nvcre_argo.results import (
    HARDWARE_FAILURE_DETECTED,
    WORKLOAD_FAILED,
    FailedNode,
    GroupResultRecord,
    last_failure_message,
    reasons_for,
)


def may_need_confirmation(plan: Plan) -> bool:
    """Whether the category's `confirm` step should run after a failed group: not for diagnose (its own rounds
    confirm), nor for a plan whose groups all have one node (`plan.confirmation.confirmable`)."""
    return plan.isolation is None and confirmable(plan.groups)


def blame_of(group: NodeGroup, result: GroupResultRecord | None) -> Blame | None:
    """What a group's result says about its nodes; None without a result. Unattributed: it failed, every node
    of the group (two or more) was blamed, and none by the health check (evidence about that node itself)."""
    if result is None or not result["iterations"]:
        return None
    iterations = result["iterations"]
    passed = all(iteration["succeeded"] for iteration in iterations)
    blamed = frozenset(node["name"] for iteration in iterations for node in iteration["failed_nodes"])
    by_health = any(node["reason"] == HARDWARE_FAILURE_DETECTED for it in iterations for node in it["failed_nodes"])
    unattributed = not passed and len(group.nodes) > 1 and blamed >= set(group.nodes) and not by_health
    return Blame(passed=passed, blamed=blamed, unattributed=unattributed)


def blames_of(plan: Plan, results: Mapping[str, GroupResultRecord]) -> dict[str, Blame]:
    return {group.name: blame for group in plan.groups if (blame := blame_of(group, results.get(group.name)))}


def decide_confirmation_round(
    plan: Plan, results: Mapping[str, GroupResultRecord], number: int
) -> tuple[Plan, tuple[NodeGroup, ...], str]:
    """Confirmation round `number`: the one already planned, or the next from the results (the plan gains its
    groups), or none. Returns the plan, the round's groups and one line of progress."""
    planned = plan.round_groups(number)
    if planned:
        return plan, planned, _progress(number, planned)
    last = max((group.round for group in plan.groups if group.round is not None), default=0)
    if last != number - 1:
        raise PlanError(f"confirmation round {number} cannot be planned: the plan's last round is {last}")
    blames = blames_of(plan, results)
    groups = plan_confirmation_round(plan.groups, blames, number)
    if not groups:
        state = confirmation_state(plan.groups, blames)
        return plan, (), _done(state)
    return replace(plan, groups=plan.groups + groups), groups, _progress(number, groups)


def _progress(number: int, groups: tuple[NodeGroup, ...]) -> str:
    return f"confirmation round {number}: {len(groups)} suspect(s), each with known-healthy partners"


def _done(state: Confirmation) -> str:
    if not state.suspects:
        return "no unattributed failure to confirm"
    text = f"confirmation complete: {len(state.convicted_by)} suspect(s) convicted, {len(state.cleared_by)} cleared"
    if state.open:
        text += f", {len(state.open)} unconfirmed (no known-healthy partner left): {', '.join(state.open)}"
    return text


@dataclass(frozen=True)
class ConfirmedFailures:
    """What confirmation changes in the record step: the suspects whose group's blame no longer stands
    (`decided`), the failures it found (convicted suspects, partners blamed by evidence), the nodes its passed
    jobs certify, and one report line per decided suspect."""

    decided: frozenset[str]
    failed: list[FailedNode]
    passed: frozenset[str]
    lines: list[str]


def confirmed_failures(plan: Plan, results: Mapping[str, GroupResultRecord]) -> ConfirmedFailures:
    """What the confirmation rounds in `plan` decided, from the groups' results: each convicted suspect with
    the reason its confirmation job gave it (and a message naming both jobs), the partners that job blamed by
    evidence of their own, and the nodes of passed confirmation jobs."""
    blames = blames_of(plan, results)
    state = confirmation_state(plan.groups, blames)
    failed: list[FailedNode] = []
    lines: list[str] = []
    for suspect, job_name in sorted(state.convicted_by.items()):
        job = plan.group(job_name)
        record = results[job_name]
        partners = ", ".join(node for node in job.nodes if node != suspect)
        detail = last_failure_message(record)
        message = (
            f"failed in {state.origin[suspect]}, then again in confirmation job {job_name} with known-healthy "
            f"{partners}: {detail.splitlines()[0] if detail else 'no detail'}"
        )
        failed.append(FailedNode(suspect, _reason(suspect, record), message))
        lines.append(f"confirmed {suspect}: {message}")
    for suspect, job_name in sorted(state.cleared_by.items()):
        lines.append(f"cleared {suspect}: failed in {state.origin[suspect]}, passed in {job_name}")
    for job in plan.groups:
        result = results.get(job.name)
        blame = blames.get(job.name)
        if job.round is None or result is None or blame is None or blame.unattributed:
            continue
        for iteration in result["iterations"]:
            failed += [
                FailedNode(item["name"], item["reason"], item["message"])
                for item in iteration["failed_nodes"]
                if item["name"] in state.attributed
            ]
    passed = {
        node
        for job in plan.groups
        if job.round is not None and (blame := blames.get(job.name)) is not None and blame.passed
        for node in job.nodes
    }
    return ConfirmedFailures(
        decided=frozenset(state.cleared_by) | frozenset(state.convicted_by),
        failed=failed,
        passed=frozenset(passed),
        lines=lines,
    )


def _reason(node: str, record: GroupResultRecord) -> str:
    """The reason the confirmation job gave the suspect (ThresholdViolation for a slow pair), else its first."""
    anyone = [item["reason"] for it in record["iterations"] for item in it["failed_nodes"]]
    reasons = reasons_for(node, record) or anyone
    return reasons[0] if reasons else WORKLOAD_FAILED
