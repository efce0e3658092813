"""The vocabulary of a Certification's conditions and Events: types, reasons and the exact messages.

One module so the status mapping, the Event rules and their tests spell every reason the same way. Reasons
and messages the reference defines are kept verbatim (docs/nvcre-contract.md §3.6); the others are ours, named in
the same style, for states the reference controller never shows because it creates its Workflows itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from nvcre_argo.api.status import Condition

ConditionStatus = Literal["True", "False"]

IN_PROGRESS = "InProgress"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
VALIDATION_FAILED = "ValidationFailed"
EXCLUSIVE_TYPES = (IN_PROGRESS, SUCCEEDED, FAILED)
"""Exactly one of these is True at any time."""
TERMINAL = frozenset({SUCCEEDED, FAILED})
"""Terminal category phases (CategoryStatus.status), and terminal exclusive condition types."""

# From the reference (§3.6).
REASON_CREATED = "WorkflowCreated"
REASON_RUNNING = "WorkflowRunning"
REASON_SUCCEEDED = "AllWorkflowsSucceeded"
REASON_FAILED = "WorkflowFailed"
REASON_DELETED = "WorkflowDeleted"
REASON_THRESHOLD = "ThresholdViolation"
MESSAGE_SUCCEEDED = "All certification categories completed successfully"
MESSAGE_FAILED = "One or more certification categories failed"

# Ours: the Certification exists but no Workflow for it does yet (submitted by `argo submit`, GitOps or the
# watcher's `--submit`), and ValidationFailed=False, for which the reference names no reason.
REASON_WAITING = "WaitingForWorkflow"
REASON_NO_THRESHOLD = "NoThresholdViolation"
MESSAGE_WAITING = "Waiting for the certification Workflow to be created"
MESSAGE_NO_CATEGORIES = "The Certification has no categories"
MESSAGE_DELETED = "The certification Workflow was deleted before all categories finished"
MESSAGE_NO_THRESHOLD = "No category reported a threshold violation"
MESSAGE_NOT_RUN_DELETED = "Not run: the certification Workflow was deleted"

# Events about categories (the certification's own Events reuse its condition reasons, §7.14).
REASON_CATEGORY_STARTED = "CategoryStarted"
REASON_CATEGORY_SUCCEEDED = "CategorySucceeded"
REASON_CATEGORY_FAILED = "CategoryFailed"
# Events about what `--submit` compiled: a spec-level threshold dropped for a category that cannot measure it,
# and any other compile warning.
REASON_THRESHOLD_NOT_APPLIED = "ThresholdNotApplied"
REASON_COMPILE_WARNING = "CompileWarning"
NORMAL = "Normal"
WARNING = "Warning"


def active_condition(conditions: Sequence[Condition] | None) -> Condition | None:
    """The True one among InProgress, Succeeded and Failed, if any."""
    return next(
        (item for item in conditions or [] if item.type in EXCLUSIVE_TYPES and item.status == "True"),
        None,
    )


def find_condition(conditions: Sequence[Condition] | None, kind: str) -> Condition | None:
    return next((item for item in conditions or [] if item.type == kind), None)
