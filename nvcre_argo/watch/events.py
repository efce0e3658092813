"""Which Kubernetes Events a status change deserves: a pure function of (old status, new status).

Why from the two statuses and nothing else: the watcher emits Events only after a successful status write
(docs/nvcre-contract.md §7.14: best-effort, at most once per transition), so the write it just made is the whole
record of what happened. A category emits one Event when it starts and one when it ends; the certification
emits one when its True condition among InProgress/Succeeded/Failed changes type (a reason- or message-only
change emits nothing), with the condition's reason and message, and one Warning when ValidationFailed turns
True. Normal for progress and success, Warning for failure.

`compile_warning_events` is the other source: what compiling a Certification left out without failing, one
Warning per problem, so a Certification applied with kubectl shows what `nvcre-compile` would have printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from nvcre_argo.api.status import CategoryStatus, CertificationStatus
from nvcre_argo.errors import FieldError
from nvcre_argo.resolve.thresholds import INAPPLICABLE
from nvcre_argo.watch.conditions import (
    FAILED,
    NORMAL,
    REASON_CATEGORY_FAILED,
    REASON_CATEGORY_STARTED,
    REASON_CATEGORY_SUCCEEDED,
    REASON_COMPILE_WARNING,
    REASON_THRESHOLD_NOT_APPLIED,
    VALIDATION_FAILED,
    WARNING,
    active_condition,
    find_condition,
)


class Event(NamedTuple):
    """A core/v1 Event's `type` (Normal or Warning), `reason` and `message`."""

    type: str
    reason: str
    message: str


def _category_event(old: CategoryStatus | None, new: CategoryStatus) -> Event | None:
    before = old.status if old is not None else "Pending"
    if before == new.status:
        return None
    what = f"Category {new.domain}/{new.variant}"
    workflow = f" (Workflow {new.workflow_ref.name})" if new.workflow_ref else ""
    if new.status == "InProgress" and before == "Pending":
        return Event(NORMAL, REASON_CATEGORY_STARTED, f"{what} started{workflow}")
    if new.status == "Succeeded":
        return Event(NORMAL, REASON_CATEGORY_SUCCEEDED, f"{what} succeeded{workflow}")
    if new.status == "Failed":
        detail = f": {new.message}" if new.message else ""
        return Event(WARNING, REASON_CATEGORY_FAILED, f"{what} failed{workflow}{detail}")
    return None


def events_for_transition(old: CertificationStatus | None, new: CertificationStatus) -> list[Event]:
    """The Events for going from `old` (None: nothing written yet) to `new`: categories in spec order, then
    the certification's condition flip, then ValidationFailed."""
    events = []
    old_categories = list(old.category_statuses or []) if old else []
    for index, category in enumerate(new.category_statuses or []):
        previous = old_categories[index] if index < len(old_categories) else None
        if previous is not None and (previous.domain, previous.variant) != (category.domain, category.variant):
            previous = None
        event = _category_event(previous, category)
        if event is not None:
            events.append(event)
    was = active_condition(old.conditions) if old else None
    now = active_condition(new.conditions)
    if now is not None and (was is None or was.type != now.type):
        events.append(Event(WARNING if now.type == FAILED else NORMAL, now.reason, now.message))
    was_violated = find_condition(old.conditions if old else None, VALIDATION_FAILED)
    violated = find_condition(new.conditions, VALIDATION_FAILED)
    if violated is not None and violated.status == "True" and (was_violated is None or was_violated.status != "True"):
        events.append(Event(WARNING, violated.reason, violated.message))
    return events


def compile_warning_events(warnings: Sequence[FieldError]) -> list[Event]:
    """One Warning per compile warning, in the order given, its message the warning's `path: message` (the
    Event is already about the Certification, so the source is left out)."""
    return [
        Event(
            WARNING,
            REASON_THRESHOLD_NOT_APPLIED if warning.kind == INAPPLICABLE else REASON_COMPILE_WARNING,
            warning.at("").render(),
        )
        for warning in warnings
    ]
