"""A diagnose plan's rounds as plan groups: the isolation planner's groups of round n become `NodeGroup`s
named `r<n>-g<i>` (with their round and stage), so the run step, the record step and `nvcre-argo plan`
treat them like any other group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from nvcre_argo.plan.isolation import Candidate, JobResult, Round, Settings, Verdict, plan_isolation_round
from nvcre_argo.plan.model import Isolation, NodeGroup, Plan, PlanError


def round_group_name(number: int, index: int) -> str:
    return f"r{number}-g{index}"


def isolation_of_plan(plan: Plan) -> Isolation:
    if plan.isolation is None:
        raise PlanError("the plan is not a diagnose plan (testScale diagnose plans rounds, this plan has groups)")
    return plan.isolation


def plan_isolation(isolation: Isolation, history: Sequence[JobResult]) -> Round | Verdict:
    """The isolation planner over the plan's nodes and the jobs so far."""
    candidates = tuple(Candidate(node=node, domain=domain) for node, domain in isolation.domains)
    return plan_isolation_round(candidates, history, Settings(min_group_size=isolation.min_group_size))


def round_node_groups(round_: Round, domains: Mapping[str, str]) -> tuple[NodeGroup, ...]:
    """The round's groups as plan groups; a group's `domain` is set when all its nodes share one."""
    groups = []
    for index, group in enumerate(round_.groups):
        shared = {domains.get(node) for node in group.nodes}
        domain = shared.pop() if len(shared) == 1 else None
        name = round_group_name(round_.number, index)
        groups.append(NodeGroup(name, group.nodes, domain=domain, round=round_.number, stage=group.stage))
    return tuple(groups)


def with_first_round(plan: Plan) -> Plan:
    """A diagnose plan with its first round's groups (known before any job ran: the screening); any other
    plan unchanged. What `nvcre-argo plan` shows: later rounds depend on what fails."""
    if plan.isolation is None or plan.groups:
        return plan
    first = plan_isolation(plan.isolation, ())
    if isinstance(first, Verdict):
        return plan
    return replace(plan, groups=round_node_groups(first, dict(plan.isolation.domains)))
