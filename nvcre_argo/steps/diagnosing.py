"""`testScale: diagnose` inside Argo: plan each isolation round from the results so far, and turn the final
verdict into the category's failed/succeeded nodes.

The category Workflow loops `plan-round -> group x N -> next round` (Argo recursion) until `plan-round`
finds nothing left to learn. Everything a round needs is already in the cluster: the plan ConfigMap holds
the nodes' domains and every round's groups (appended by `plan-round`, so the run step finds its group as
for any other category), and each group's run step leaves its result ConfigMap. So `plan-round` is a pure
function of those objects (`plan.isolation.plan_isolation_round`): a retried or restarted step plans the
same round again, and a round already planned is re-emitted, never planned twice.

A job's outcome is its group's: passed when every iteration passed, not-run when every failed iteration
never started (the controllers created none of its pods in time: nothing is known about the nodes, and the
planner plans them again), below-threshold when the only blame was a threshold miss, failed otherwise (a
workload failure, an unreadable measurement, or no result at all).
Which node was at fault is for the planner to find (any group containing a bad node fails), not the run
step: a node blamed by the run step only because its rank failed first may well be healthy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, cast, get_args

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.plan.isolation import (
    Group,
    JobResult,
    Outcome,
    Round,
    Stage,
    Verdict,
)
from nvcre_argo.plan.model import NodeGroup, Plan, PlanError
from nvcre_argo.plan.rounds import isolation_of_plan, plan_isolation, round_node_groups
from nvcre_argo.results import (
    HARDWARE_FAILURE_DETECTED,
    THRESHOLD_VIOLATION,
    WORKLOAD_FAILED,
    DiagnoseRecord,
    FailedNode,
    GroupResultRecord,
    last_failure_message,
    reasons_for,
)
from nvcre_argo.steps.confirming import decide_confirmation_round
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.planning import load_plan, plan_configmap

STAGES: Final = frozenset(get_args(Stage))


@dataclass(frozen=True)
class RoundDecision:
    """What `plan-round` tells Argo: this round's group names, or that the isolation is done."""

    number: int
    groups: tuple[str, ...]
    progress: str = ""  # one line: where the isolation stands (`round 2: 9 group(s): bisection, confirmation`)

    @property
    def done(self) -> bool:
        return not self.groups


def job_outcome(result: GroupResultRecord | None) -> Outcome:
    """A group's outcome as the isolation planner counts it (see the module docstring)."""
    if result is None or not result["iterations"]:
        return "failed"
    if all(iteration["succeeded"] for iteration in result["iterations"]):
        return "passed"
    if all(iteration["never_ran"] for iteration in result["iterations"] if not iteration["succeeded"]):
        return "not-run"
    reasons = {node["reason"] for iteration in result["iterations"] for node in iteration["failed_nodes"]}
    return "below-threshold" if reasons == {THRESHOLD_VIOLATION} else "failed"


def _stage(group: NodeGroup) -> Stage:
    if group.stage not in STAGES:
        raise PlanError(f"group {group.name}: unknown isolation stage {group.stage!r}")
    return cast(Stage, group.stage)


def job_history(
    plan: Plan, results: Mapping[str, GroupResultRecord], *, before: int | None = None
) -> tuple[JobResult, ...]:
    """Every planned round's jobs with their outcome (only rounds before `before`, when given)."""
    return tuple(
        JobResult(
            round=group.round,
            group=Group(nodes=group.nodes, mnnvl=True, stage=_stage(group)),
            outcome=job_outcome(results.get(group.name)),
        )
        for group in plan.groups
        if group.round is not None and (before is None or group.round < before)
    )


def decide_round(plan: Plan, results: Mapping[str, GroupResultRecord], number: int) -> tuple[Plan, RoundDecision]:
    """Round `number` of the plan: the one already planned, or the next from the results (the plan gains its
    groups), or done. PlanError when rounds before it were never planned (the loop skipped one). A plan
    without isolation plans confirmation rounds instead (`steps.confirming`)."""
    if plan.isolation is None:
        updated, groups, progress = decide_confirmation_round(plan, results, number)
        return updated, RoundDecision(number, tuple(group.name for group in groups), progress)
    isolation = isolation_of_plan(plan)
    planned = plan.round_groups(number)
    if planned:
        return plan, _decision(number, planned)
    history = job_history(plan, results, before=number)
    expected = max((job.round for job in history), default=0) + 1
    if expected != number:
        raise PlanError(f"round {number} cannot be planned: the plan's last round is {expected - 1}")
    decision = plan_isolation(isolation, history)
    if isinstance(decision, Verdict):
        return plan, RoundDecision(number, (), f"isolation complete after {number - 1} round(s); recording the verdict")
    groups = round_node_groups(decision, dict(isolation.domains))
    return replace(plan, groups=plan.groups + groups), _decision(number, groups)


def _decision(number: int, groups: Sequence[NodeGroup]) -> RoundDecision:
    stages = ", ".join(sorted({group.stage or "" for group in groups}))
    node_jobs = sum(len(group.nodes) for group in groups)
    progress = f"round {number}: {len(groups)} group(s), {node_jobs} node-jobs ({stages})"
    return RoundDecision(number, tuple(group.name for group in groups), progress)


def plan_round_step(
    kube: KubeClient,
    context: StepContext,
    number: int,
    results: Mapping[str, GroupResultRecord],
    *,
    report: Callable[[str], None] = print,
) -> RoundDecision:
    """Plan (or re-emit) round `number`, publishing its groups in the plan ConfigMap before Argo runs them."""
    plan = load_plan(kube, context)
    if number > 1:
        for line in round_summary(plan, results, number - 1):
            report(line)
    updated, decision = decide_round(plan, results, number)
    if updated is not plan:
        kube.create_or_replace(plan_configmap(context, updated))
    report(decision.progress)
    for group in updated.round_groups(number):
        report(f"  {group.name} [{group.stage}]: {', '.join(group.nodes)}")
    return decision


def round_summary(plan: Plan, results: Mapping[str, GroupResultRecord], number: int) -> list[str]:
    """One line per job of round `number`, with its outcome: the log of `plan-round` reads as a story."""
    jobs = plan.round_groups(number)
    outcomes = [job_outcome(results.get(group.name)) for group in jobs]
    failed = sum(outcome != "passed" for outcome in outcomes)
    lines = [f"round {number}: {len(jobs)} job(s), {failed} did not pass"]
    lines += [f"  {group.name} [{group.stage}]: {outcome}" for group, outcome in zip(jobs, outcomes, strict=True)]
    return lines


@dataclass(frozen=True)
class DiagnoseOutcome:
    """What the record step writes for a diagnose category."""

    failed: list[FailedNode]
    succeeded: list[str]
    findings: list[str]  # why the category did not pass beyond its failed nodes (faults between domains, ...)
    record: DiagnoseRecord


def diagnose_outcome(plan: Plan, results: Mapping[str, GroupResultRecord]) -> DiagnoseOutcome:
    """The verdict of every round so far, as failed nodes (with the reason and jobs that convicted them),
    succeeded nodes, findings and the isolation summary."""
    isolation = isolation_of_plan(plan)
    history = job_history(plan, results)
    decision = plan_isolation(isolation, history)
    if isinstance(decision, Round):
        raise PlanError(
            f"the isolation has not finished: round {decision.number} still has {len(decision.groups)} group(s)"
        )
    jobs = [group for group in plan.groups if group.round is not None]
    healthy = frozenset(decision.healthy)
    failed = [_faulty_node(node, jobs, results, healthy) for node in decision.faulty]
    findings = [_describe_fault(fault.domain, fault.group_a, fault.group_b) for fault in decision.infrastructure_faults]
    if decision.untested:
        findings.append(
            f"{len(decision.untested)} node(s) left untested: "
            + ", ".join(f"{item.node} ({item.reason})" for item in decision.untested[:5])
            + (", ..." if len(decision.untested) > 5 else "")
        )
    return DiagnoseOutcome(
        failed=failed,
        succeeded=list(decision.healthy),
        findings=findings,
        record=_record(decision, jobs, results),
    )


def _faulty_node(
    node: str, jobs: Sequence[NodeGroup], results: Mapping[str, GroupResultRecord], healthy: frozenset[str]
) -> FailedNode:
    """A convicted node, with the reason of the last job that failed because of it alone (every other member
    healthy; typically its confirmation): HardwareFailureDetected when that job's health check fired on this
    node (evidence about the node itself, where the others are about the job), ThresholdViolation when the
    job ran but too slowly, else WorkloadFailed. The message names every job it failed in, and that job's own
    message."""
    failing = [group for group in jobs if node in group.nodes and job_outcome(results.get(group.name)) != "passed"]
    alone = [group for group in failing if set(group.nodes) - {node} <= healthy]
    decisive = (alone or failing)[-1] if failing else None
    record = results.get(decisive.name) if decisive else None
    slow = decisive is not None and job_outcome(record) == "below-threshold"
    detail = last_failure_message(record) if record else ""
    message = f"diagnose: failed in {len(failing)} job(s) ({', '.join(group.name for group in failing)})"
    if decisive is not None:
        message += f", decided by {decisive.name}"
    if detail:
        message += f": {detail.splitlines()[0]}"
    reason = THRESHOLD_VIOLATION if slow else WORKLOAD_FAILED
    if record is not None and HARDWARE_FAILURE_DETECTED in reasons_for(node, record):
        reason = HARDWARE_FAILURE_DETECTED
    return FailedNode(node, reason, message)


def _describe_fault(domain: str, group_a: Sequence[str], group_b: Sequence[str]) -> str:
    if "|" in domain:
        first, second = domain.split("|", 1)
        return f"link fault between domains {first} and {second}"
    return f"fault inside domain {domain} between {', '.join(group_a)} and {', '.join(group_b)}"


def _record(verdict: Verdict, jobs: Sequence[NodeGroup], results: Mapping[str, GroupResultRecord]) -> DiagnoseRecord:
    rounds = sorted({group.round for group in jobs if group.round is not None})
    return {
        "rounds": verdict.rounds,
        "jobs": len(jobs),
        "nodeJobs": sum(len(group.nodes) for group in jobs),
        "faulty": list(verdict.faulty),
        "healthy": len(verdict.healthy),
        "infrastructureFaults": [
            {"domain": f.domain, "groupA": list(f.group_a), "groupB": list(f.group_b), "stage": f.stage}
            for f in verdict.infrastructure_faults
        ],
        "untested": [{"node": item.node, "reason": item.reason} for item in verdict.untested],
        "history": [
            {
                "round": number,
                "groups": [
                    {
                        "name": group.name,
                        "stage": group.stage or "",
                        "nodes": len(group.nodes),
                        "outcome": job_outcome(results.get(group.name)),
                    }
                    for group in jobs
                    if group.round == number
                ],
            }
            for number in rounds
        ],
    }
