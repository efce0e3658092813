"""One category's status, from its Workflow or, when there is none, from what was seen before.

Why a module of its own: this is where the Argo facts meet the category table of `watch.status` (read that
module's docstring first). The parent Workflow (role=certification) and its category Workflows
(role=category, `<parent>-<index>`, owned by the parent) are told apart by label; a newer parent is a re-run
and only its own children count. A Workflow that is gone is judged by the status written last time: a
terminal category keeps its result (Workflow TTL), a running one was deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nvcre_argo.api.status import (
    CategoryPhase,
    CategoryStatus,
    CertificationStatus,
    TypedLocalObjectReference,
    WorkflowReference,
)
from nvcre_argo.contract import (
    OUTPUT_FAILED_NODES_REF,
    OUTPUT_PROGRESS,
    OUTPUT_SUCCEEDED_NODES_REF,
    TEMPLATE_DIAGNOSE,
    TEMPLATE_GROUP,
    TEMPLATE_PLAN_ROUND,
    TEMPLATE_RUN_GROUP,
    category_step_template,
    shared_runner_entrypoint,
)
from nvcre_argo.names import LABEL_CATEGORY_INDEX, LABEL_CERTIFICATION, LABEL_ROLE, ROLE_CATEGORY, ROLE_PARENT
from nvcre_argo.watch import workflows as wf
from nvcre_argo.watch.conditions import (
    MESSAGE_NOT_RUN_DELETED,
    REASON_CREATED,
    REASON_RUNNING,
    TERMINAL,
    active_condition,
)

CONFIGMAP = "ConfigMap"
THRESHOLD_NOTE = "nodes failed with ThresholdViolation"


def spec_categories(certification: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`(domain, variant)` of every spec category, in order."""
    categories = (certification.get("spec") or {}).get("categories") or []
    return [(str(item.get("domain", "")), str(item.get("variant", ""))) for item in categories]


def _newest(candidates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return max(candidates, key=lambda item: (wf.created(item), wf.name(item)), default=None)


def select_workflows(
    certification: str, workflows: Sequence[Mapping[str, Any]]
) -> tuple[Mapping[str, Any] | None, dict[int, Mapping[str, Any]]]:
    """The newest parent Workflow and, per category index, its category Workflow.

    With a parent, only its own children count (owned by its uid or named `<parent>-<index>`), so the
    leftovers of an earlier run are not mistaken for this one; without one, the newest child per index."""
    mine = [item for item in workflows if certification in ("", wf.label(item, LABEL_CERTIFICATION))]
    parent = _newest([item for item in mine if wf.label(item, LABEL_ROLE) == ROLE_PARENT])
    by_index: dict[int, list[Mapping[str, Any]]] = {}
    for item in mine:
        text = wf.label(item, LABEL_CATEGORY_INDEX) or ""
        if wf.label(item, LABEL_ROLE) == ROLE_CATEGORY and text.isdigit():
            by_index.setdefault(int(text), []).append(item)
    children = {}
    for index, found in by_index.items():
        candidates = found
        if parent is not None:
            candidates = [
                item
                for item in candidates
                if wf.name(item) == f"{wf.name(parent)}-{index}"
                or (wf.uid(parent) and wf.uid(parent) in wf.owner_uids(item))
            ]
        child = _newest(candidates)
        if child is not None:
            children[index] = child
    return parent, children


def _config_map(name: str | None) -> TypedLocalObjectReference | None:
    return TypedLocalObjectReference(api_group="", kind=CONFIGMAP, name=name) if name else None


def _from_workflow(domain: str, variant: str, child: Mapping[str, Any], namespace: str | None) -> CategoryStatus:
    nodes = wf.nodes(child)
    outputs = wf.record_outputs(nodes)
    phase = wf.phase(child)
    status: CategoryPhase = "InProgress"
    entrypoint = (child.get("spec") or {}).get("entrypoint")
    diagnosing = entrypoint in {TEMPLATE_DIAGNOSE, shared_runner_entrypoint(TEMPLATE_DIAGNOSE)}
    # While a diagnose loop runs, its last plan-round says where it stands (round, groups, stages). Any other
    # category's plan-round is confirmation's (`steps.confirming`): it ran when a group failed.
    progress = wf.latest_output(nodes, TEMPLATE_PLAN_ROUND, OUTPUT_PROGRESS)
    message: str | None = progress if diagnosing else None
    if phase in wf.FAILED_PHASES:
        status = "Failed"
        message = wf.message(child) or f"Workflow {wf.name(child)} ended {phase}"
    elif phase == "Succeeded":
        # A diagnose loop learns from failed groups (a transient failure is cleared later), so there the
        # record step's verdict alone decides.
        # A group is a step pod (`run-group`) or, with a shared runner, a suspend node (`group`).
        groups = (
            [] if diagnosing else wf.failed_steps(nodes, TEMPLATE_RUN_GROUP) + wf.failed_steps(nodes, TEMPLATE_GROUP)
        )
        if groups and progress is not None:
            # Confirmation ran and the record step passed: it cleared every node of the failed groups (each
            # passed again with known-healthy partners), so the record step's verdict stands, as for diagnose.
            status = "Succeeded"
            message = f"{len(groups)} group(s) failed and were cleared by confirmation: {progress}"
        elif groups:
            status = "Failed"
            message = "; ".join(f"group {group} failed" + (f": {text}" if text else "") for group, text in groups)
        else:
            status = "Succeeded"
            message = None
    return CategoryStatus(
        domain=domain,
        variant=variant,
        status=status,
        workflow_ref=WorkflowReference(name=wf.name(child), namespace=wf.namespace(child) or namespace),
        failed_nodes_ref=_config_map(outputs.get(OUTPUT_FAILED_NODES_REF)),
        succeeded_nodes_ref=_config_map(outputs.get(OUTPUT_SUCCEEDED_NODES_REF)),
        message=message,
    )


def _unfollowed(category: CategoryStatus, workflow: str, step_failure: str | None) -> CategoryStatus:
    """A Succeeded category whose step in the certification Workflow failed is Failed, saying both.

    The step (its pod lost for good: Argo reads `Failed`, exit code 143, and does not retry it) leaves its
    category Workflow running unfollowed; when that Workflow then passes, the Argo UI still shows the step and
    the certification red. Calling the category Succeeded would make `kubectl get certifications` green where
    Argo is red, so the category fails too, with a message that says its tests passed and what failed."""
    if category.status != "Succeeded" or step_failure is None:
        return category
    message = (
        f"the certification Workflow's step for this category failed: {step_failure} (Workflow {workflow} Succeeded)"
    )
    return category.model_copy(update={"status": "Failed", "message": message})


def parent_seen(previous: CertificationStatus | None) -> bool:
    """Whether a parent Workflow existed at the last computation (its name is not kept in the status)."""
    if previous is None:
        return False
    if any(category.workflow_ref for category in previous.category_statuses or []):
        return True
    active = active_condition(previous.conditions)
    return active is not None and active.reason in (REASON_CREATED, REASON_RUNNING)


def category_status(
    index: int,
    domain: str,
    variant: str,
    *,
    parent: Mapping[str, Any] | None,
    parent_nodes: Mapping[str, wf.Node],
    child: Mapping[str, Any] | None,
    names: set[str],
    before: CategoryStatus | None,
    parent_seen: bool,
    namespace: str | None,
) -> CategoryStatus:
    """One category's status; see the table in the module docstring."""
    step_failure = wf.step_failure(parent_nodes, category_step_template(index))
    if child is not None:
        return _unfollowed(_from_workflow(domain, variant, child, namespace), wf.name(child), step_failure)
    ref = before.workflow_ref if before else None
    # What was seen last time still describes this run unless a parent exists that did not create it.
    ours = parent is None or (ref is not None and ref.name == f"{wf.name(parent)}-{index}")
    if before is not None and before.status in TERMINAL and ours:
        return before
    if before is not None and ref is not None and ours and ref.name not in names:
        message = f"Workflow {ref.name} was deleted before it finished"
        return before.model_copy(update={"status": "Failed", "message": message})
    pending = CategoryStatus(domain=domain, variant=variant, status="Pending")
    if parent is None:
        if parent_seen:
            return pending.model_copy(update={"status": "Failed", "message": MESSAGE_NOT_RUN_DELETED})
        return pending
    if step_failure is not None:
        return pending.model_copy(update={"status": "Failed", "message": f"Workflow not created: {step_failure}"})
    if wf.phase(parent) in wf.TERMINAL_PHASES:
        message = f"Not run: the certification Workflow {wf.name(parent)} ended {wf.phase(parent)}"
        return pending.model_copy(update={"status": "Failed", "message": message})
    return pending


def mark_threshold(category: CategoryStatus) -> CategoryStatus:
    """A failed category whose failed-nodes ConfigMap lists ThresholdViolation says so in its message, once.

    The note is for people only: the verdict (ValidationFailed) comes from the ConfigMap's reasons, never
    from this text. Looking for the note keeps the function idempotent, as a kept status passes through it
    again on every reconcile."""
    if category.status != "Failed" or THRESHOLD_NOTE in (category.message or ""):
        return category
    note = THRESHOLD_NOTE
    if category.failed_nodes_ref:
        note += f" (ConfigMap {category.failed_nodes_ref.name})"
    return category.model_copy(update={"message": f"{category.message}; {note}" if category.message else note})
