"""Compute a Certification's status from its Argo Workflows: a pure function, recomputed on every change.

Inputs are the Certification (a dict), every Workflow labelled `nvcre.nvidia.com/certification=<name>` (the
parent, role=certification, and its category Workflows, role=category, named `<parent>-<index>`), the status
written last time, and the clock. Why `previous` and `now` are inputs: a condition's `lastTransitionTime`
moves only when its status flips, and a deletion is only visible as "was there, is gone". Nothing else is
remembered, so a restarted watcher writes the same status from the same objects.

Rules (the reference's status semantics, docs/nvcre-contract.md §3.6 and §7.13; Argo's Workflow status,
docs/argo-hera-trainer.md §2.2), one category at a time, in spec order:

| what is seen | category status |
| --- | --- |
| its Workflow, phase `""`, Pending or Running | InProgress |
| its Workflow, Succeeded, and no group node (`run-group`, or `group`) Failed/Error | Succeeded |
| its Workflow, Succeeded, but a group node Failed/Error (hidden by `continueOn`), not a diagnose loop | Failed |
| its Workflow, Succeeded, but the parent's step for it Failed/Error (its pod lost for good) | Failed, saying both |
| its Workflow, Failed or Error | Failed, with the Workflow's message |
| no Workflow; the last status was terminal and of this run (*) (the Workflow was garbage-collected) | kept |
| no Workflow; the last status of this run (*) named one that was not finished | Failed: it was deleted |
| no Workflow; the parent's step creating it failed | Failed, with the step's message |
| no Workflow; the parent is gone after having been seen, or has finished | Failed: not run |
| no Workflow otherwise | Pending |

(*) "of this run": no parent Workflow exists, or the last status names the current parent's `<parent>-<index>`;
a new parent (a re-run) starts its categories afresh.

The certification is InProgress while any category is Pending or InProgress, then Failed if any category
failed (reason WorkflowDeleted when the parent Workflow disappeared mid-run), else Succeeded. Once terminal,
its reason and message stay put while the categories do not change, so a Workflow TTL never rewrites history.
ValidationFailed is True when a failed category's failed-nodes ConfigMap lists a `ThresholdViolation` node: a
structured fact the caller reads (`threshold_categories`), never guessed from message text. The category's
message gets a note saying so for people; when that ConfigMap cannot be read this time (deleted by hand), a
ValidationFailed already written True is kept rather than erased.

A `testScale: diagnose` category's failed-nodes ConfigMap also holds its isolation summary (`diagnose`, made
by `watch.diagnose.diagnose_summary`): the category's status carries it, and a fault no node explains
(a broken link between domains) or a node left untested makes the category Failed with the finding leading
its message, even when no node failed. An unreadable ConfigMap keeps the summary written before.

Two steps, so the caller reads each result ConfigMap once: `view_workflows` gives what the Workflows alone say
(including which ConfigMaps the categories point at), then `compute_status` adds the ConfigMap facts.

The per-category rules live in `watch.categories`; `events_for_transition` (from `watch.events`) is
re-exported here: the Events a status write deserves.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nvcre_argo.api.status import (
    CategoryStatus,
    CertificationStatus,
    Condition,
    DiagnoseSummary,
    Result,
)
from nvcre_argo.watch import workflows as wf
from nvcre_argo.watch.categories import (
    category_status,
    mark_threshold,
    parent_seen,
    select_workflows,
    spec_categories,
)
from nvcre_argo.watch.conditions import (
    EXCLUSIVE_TYPES,
    FAILED,
    IN_PROGRESS,
    MESSAGE_DELETED,
    MESSAGE_FAILED,
    MESSAGE_NO_CATEGORIES,
    MESSAGE_NO_THRESHOLD,
    MESSAGE_SUCCEEDED,
    MESSAGE_WAITING,
    REASON_CREATED,
    REASON_DELETED,
    REASON_FAILED,
    REASON_NO_THRESHOLD,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    REASON_THRESHOLD,
    REASON_WAITING,
    SUCCEEDED,
    TERMINAL,
    VALIDATION_FAILED,
    ConditionStatus,
    active_condition,
    find_condition,
)
from nvcre_argo.watch.diagnose import current_summaries, mark_diagnose
from nvcre_argo.watch.events import Event, events_for_transition

__all__ = [
    "Event",
    "WorkflowView",
    "compute_status",
    "derive_result",
    "events_for_transition",
    "format_time",
    "status_changed",
    "view_workflows",
]


def format_time(now: datetime) -> str:
    """RFC 3339 in UTC with seconds, as metav1.Time serialises (a naive datetime is taken as UTC)."""
    moment = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def derive_result(phases: Sequence[str], excluded_nodes: int | None) -> Result:
    """RUNNING while any category is not terminal, FAILED if any failed, INCOMPLETE if all passed but target
    nodes were left out ("not certified"), else PASSED (docs/nvcre-contract.md §7.13)."""
    if not phases or any(phase not in TERMINAL for phase in phases):
        return "RUNNING"
    if FAILED in phases:
        return "FAILED"
    return "INCOMPLETE" if excluded_nodes else "PASSED"


def _exclusive(
    categories: Sequence[CategoryStatus],
    parent: Mapping[str, Any] | None,
    parent_seen: bool,
    previous: CertificationStatus | None,
) -> tuple[str, str, str]:
    """`(type, reason, message)` of the one True condition among InProgress, Succeeded and Failed."""
    phases = [category.status for category in categories]
    if phases and all(phase in TERMINAL for phase in phases):
        kind = FAILED if FAILED in phases else SUCCEEDED
        before = active_condition(previous.conditions) if previous else None
        if before is not None and before.type == kind and previous and previous.category_statuses == list(categories):
            return kind, before.reason, before.message
        if kind == SUCCEEDED:
            return kind, REASON_SUCCEEDED, MESSAGE_SUCCEEDED
        if parent is None and parent_seen:
            return kind, REASON_DELETED, MESSAGE_DELETED
        return kind, REASON_FAILED, MESSAGE_FAILED
    if parent is None and not any(category.workflow_ref for category in categories):
        if not phases:
            return IN_PROGRESS, REASON_WAITING, MESSAGE_NO_CATEGORIES
        return IN_PROGRESS, REASON_WAITING, MESSAGE_WAITING
    running = next((c for c in categories if c.status == "InProgress"), None)
    if running is None and parent is not None and wf.phase(parent) in ("", "Pending"):
        return IN_PROGRESS, REASON_CREATED, f"Workflow {wf.name(parent)} created"
    done = sum(phase in TERMINAL for phase in phases)
    if running is not None:
        position = categories.index(running) + 1
        text = f"Running {running.domain}/{running.variant} (category {position} of {len(phases)})"
    else:
        text = f"{done} of {len(phases)} categories finished"
    return IN_PROGRESS, REASON_RUNNING, text


def _conditions(
    wanted: Sequence[tuple[str, ConditionStatus, str, str]],
    previous: CertificationStatus | None,
    generation: int | None,
    now: str,
) -> list[Condition]:
    """Conditions from `(type, status, reason, message)`; `lastTransitionTime` kept unless the status flipped."""
    before = {condition.type: condition for condition in (previous.conditions or [])} if previous else {}
    conditions = []
    for kind, status, reason, message in wanted:
        old = before.get(kind)
        moment = old.last_transition_time if old is not None and old.status == status else now
        conditions.append(
            Condition(
                type=kind,
                status=status,
                observed_generation=generation,
                last_transition_time=moment,
                reason=reason,
                message=message,
            )
        )
    return conditions


@dataclass(frozen=True)
class WorkflowView:
    """What the Workflows alone say about a Certification: each category's status (with the result ConfigMaps
    it points at), the parent Workflow, and whether a parent was seen before."""

    categories: tuple[CategoryStatus, ...]
    parent: Mapping[str, Any] | None
    parent_seen: bool


def view_workflows(
    certification: Mapping[str, Any], workflows: Sequence[Mapping[str, Any]], previous: CertificationStatus | None
) -> WorkflowView:
    """Every category's status from the Workflows and the previous status (the table in the module docstring)."""
    metadata = certification.get("metadata") or {}
    namespace = metadata.get("namespace") or None
    parent, children = select_workflows(str(metadata.get("name") or ""), workflows)
    parent_nodes = wf.nodes(parent) if parent is not None else {}
    names = {wf.name(item) for item in workflows}
    seen = parent_seen(previous)
    before = list(previous.category_statuses or []) if previous else []
    categories = tuple(
        category_status(
            index,
            domain,
            variant,
            parent=parent,
            parent_nodes=parent_nodes,
            child=children.get(index),
            names=names,
            before=before[index]
            if index < len(before) and (before[index].domain, before[index].variant) == (domain, variant)
            else None,
            parent_seen=seen,
            namespace=namespace,
        )
        for index, (domain, variant) in enumerate(spec_categories(certification))
    )
    return WorkflowView(categories, parent, seen)


def compute_status(
    certification: Mapping[str, Any],
    workflows: Sequence[Mapping[str, Any]],
    previous: CertificationStatus | None,
    now: datetime,
    *,
    view: WorkflowView | None = None,
    excluded_nodes: int | None = None,
    failed_node_names: Collection[str] | None = None,
    threshold_categories: Collection[int] = (),
    unread_categories: Collection[int] = (),
    diagnose: Mapping[int, DiagnoseSummary] | None = None,
) -> CertificationStatus:
    """The Certification's status given its Workflows (see the module docstring for every rule).

    `view` is `view_workflows(certification, workflows, previous)` when the caller already has it.
    `excluded_nodes` and `failed_node_names` come from ConfigMaps the caller read; when a caller passes None
    (it could not read them this time), the previous values are kept rather than erased.
    `threshold_categories` are the indices of categories whose failed-nodes ConfigMap lists a
    `ThresholdViolation` node, `unread_categories` those whose failed-nodes ConfigMap could not be read, and
    `diagnose` the isolation summaries found in failed-nodes ConfigMaps, by category index."""
    metadata = certification.get("metadata") or {}
    generation = metadata.get("generation")
    generation = generation if isinstance(generation, int) else None
    view = view if view is not None else view_workflows(certification, workflows, previous)
    summaries = current_summaries(view.categories, diagnose or {}, unread_categories, previous)
    categories = [
        _with_results(category, summaries.get(index), threshold=index in threshold_categories)
        for index, category in enumerate(view.categories)
    ]
    kind, reason, message = _exclusive(categories, view.parent, view.parent_seen, previous)
    wanted: list[tuple[str, ConditionStatus, str, str]] = [
        (item, "True", reason, message) if item == kind else (item, "False", reason, "") for item in EXCLUSIVE_TYPES
    ]
    validation = _validation(categories, set(threshold_categories), set(unread_categories), previous)
    if excluded_nodes is None and previous is not None:
        excluded_nodes = previous.excluded_nodes
    failed_nodes = len(set(failed_node_names)) if failed_node_names is not None else None
    if failed_nodes is None and previous is not None:
        failed_nodes = previous.failed_nodes
    phases = [category.status for category in categories]
    return CertificationStatus(
        observed_generation=generation,
        result=derive_result(phases, excluded_nodes),
        passed=f"{phases.count('Succeeded')}/{len(phases)}",
        failed_nodes=failed_nodes,
        excluded_nodes=excluded_nodes,
        conditions=_conditions([*wanted, validation], previous, generation, format_time(now)),
        category_statuses=categories,
    )


def _with_results(category: CategoryStatus, summary: DiagnoseSummary | None, *, threshold: bool) -> CategoryStatus:
    """A category with what its failed-nodes ConfigMap says: the isolation summary first (its findings lead
    the message), then the threshold note."""
    if summary is not None:
        category = mark_diagnose(category, summary)
    return mark_threshold(category) if threshold else category


def _validation(
    categories: Sequence[CategoryStatus], violated: set[int], unread: set[int], previous: CertificationStatus | None
) -> tuple[str, ConditionStatus, str, str]:
    """ValidationFailed: True naming the failed categories with a ThresholdViolation node. With none known
    but a failed category's ConfigMap unreadable, a True written before is kept (the evidence is gone, not
    disproved)."""
    failed = [index for index, category in enumerate(categories) if category.status == FAILED]
    named = [f"{categories[i].domain}/{categories[i].variant}" for i in failed if i in violated]
    if named:
        return VALIDATION_FAILED, "True", REASON_THRESHOLD, f"Threshold violation in {', '.join(named)}"
    before = find_condition(previous.conditions if previous else None, VALIDATION_FAILED)
    if before is not None and before.status == "True" and any(i in unread for i in failed):
        return VALIDATION_FAILED, "True", before.reason, before.message
    return VALIDATION_FAILED, "False", REASON_NO_THRESHOLD, MESSAGE_NO_THRESHOLD


def status_changed(old: CertificationStatus | None, new: CertificationStatus) -> bool:
    """Whether `new` differs from what is written: the watcher writes only on change (every field counts)."""
    if old is None:
        return True
    return old.model_dump(mode="json", by_alias=True) != new.model_dump(mode="json", by_alias=True)
