"""The category Workflow's `activeDeadlineSeconds`, derived from its plan: a backstop, never the verdict.

The run step already ends every TrainJob at `timeoutPerJob` (of running time, and as long again blocked in
scheduling), so a healthy run never meets this deadline. It exists for what the steps cannot see: a step that
hangs itself, an executor stuck on a dead node, a controller that lost track. Only the plan step knows how
many groups there are, so it sets the deadline on its own Workflow once the plan is made; Argo counts it from
the Workflow's start, and enforces it by failing the Workflow and stopping its pods (the `cleanup` exit handler
still deletes the TrainJobs). A deadline already on the Workflow (compiled with `--category-deadline`) wins.

Bound: groups run in waves of `maxConcurrent`, an overflow group in its host's step after the host (one more
wave at worst), each group
`repeatCount` iterations, each iteration at most `timeoutPerJob` running plus one bounded wait (`timeoutPerJob`
blocked in scheduling, or at least `workload.CONTROLLER_WAIT_FLOOR_S` waiting on the controllers) plus
`measurementTimeout` waiting for its measurement (none where the verdict is the exit code), plus a
per-iteration allowance for pod start-up and polling, and as much again for each checkpoint restart
(`maxRestarts`), plus a fixed allowance for plan, record and cleanup.
A diagnose category bounds its rounds by the isolation planner's round limit; any other category whose
plan can need confirmation (a pinned group of two or more nodes, `plan.confirmation.confirmable`) adds a wave
per confirmation round; under `placement: Unpinned` no round can run, so none is allowed for.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import WORKFLOWS
from nvcre_argo.plan.confirmation import MAX_CONFIRMATION_ROUNDS, confirmable
from nvcre_argo.plan.isolation.model import DEFAULT_SETTINGS
from nvcre_argo.plan.model import Plan
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.workload import CONTROLLER_WAIT_FLOOR_S

ITERATION_ALLOWANCE_S = 300
WORKFLOW_ALLOWANCE_S = 900


def _waves(groups: int, max_concurrent: int | None) -> int:
    if groups == 0:
        return 0
    return math.ceil(groups / max_concurrent) if max_concurrent else 1


def category_deadline_seconds(plan: Plan, category: ResolvedCategory) -> int:
    """The longest a category Workflow running `plan` may take when every step does its job."""
    limit = category.options.max_concurrent
    if plan.isolation is not None:
        # Rounds are planned as results arrive: bound them by the planner's round limit, each round by its
        # largest possible fan-out (every node in a group of minGroupSize).
        largest_round = math.ceil(len(plan.isolation.domains) / plan.isolation.min_group_size)
        waves = DEFAULT_SETTINGS.max_rounds * _waves(largest_round, limit)
    else:
        regular = sum(1 for group in plan.groups if not group.overflow)
        waves = _waves(regular, limit) + (1 if regular < len(plan.groups) else 0)
        if confirmable(plan.groups):
            # The same rule that decides whether the `confirm` step runs at all. A confirmation round has at
            # most one group per suspect, and per k - 1 healthy nodes for groups of k: never more than twice the
            # regular groups.
            waves += MAX_CONFIRMATION_ROUNDS * _waves(2 * regular, limit)
    timeout = duration_seconds(category.timeout_per_job)
    iteration = timeout + max(timeout, CONTROLLER_WAIT_FLOOR_S) + category.measurement_wait_seconds
    iteration += ITERATION_ALLOWANCE_S
    iteration *= 1 + (category.checkpoint.max_restarts if category.checkpoint is not None else 0)
    return WORKFLOW_ALLOWANCE_S + waves * (category.options.repeat_count or 1) * iteration


def set_category_deadline(
    kube: KubeClient, context: StepContext, plan: Plan, *, report: Callable[[str], None] = print
) -> int | None:
    """Set the derived deadline on this step's own Workflow unless one is set; returns the deadline in force."""
    workflow = kube.get(WORKFLOWS, context.workflow_name, context.namespace) or {}
    existing = (workflow.get("spec") or {}).get("activeDeadlineSeconds")
    if existing is not None:
        report(f"activeDeadlineSeconds {existing} (already set: compiled in, or by an earlier try of this step)")
        return int(existing)
    deadline = category_deadline_seconds(plan, context.category)
    kube.merge_patch(WORKFLOWS, context.workflow_name, {"spec": {"activeDeadlineSeconds": deadline}}, context.namespace)
    report(f"activeDeadlineSeconds {deadline} (derived from {len(plan.groups)} group(s) and timeoutPerJob)")
    return deadline
