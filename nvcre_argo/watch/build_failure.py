"""The status of a Certification the watcher (`--submit`) could not start: Failed, saying exactly why.

A compile failure carries each problem with its field path (`spec.categories[1]: no catalog entry ...`), so
`kubectl describe certification` says what to fix; the reason follows the reference: `CategoryNotFound` when
an unknown category is among the errors, else `BuildFailed`. A Workflow name owned by someone else is
`WorkflowNameCollision`, as in the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nvcre_argo.api.status import CategoryStatus, CertificationStatus, Condition
from nvcre_argo.errors import FieldError
from nvcre_argo.watch.categories import spec_categories
from nvcre_argo.watch.conditions import (
    EXCLUSIVE_TYPES,
    FAILED,
    MESSAGE_NO_THRESHOLD,
    REASON_NO_THRESHOLD,
    VALIDATION_FAILED,
    find_condition,
)
from nvcre_argo.watch.status import format_time

REASON_BUILD_FAILED = "BuildFailed"
REASON_CATEGORY_NOT_FOUND = "CategoryNotFound"
REASON_NAME_COLLISION = "WorkflowNameCollision"
MAX_MESSAGE = 4000


@dataclass(frozen=True)
class SubmitProblem:
    """Why `--submit` could not start a Certification: a condition reason and a message."""

    reason: str
    message: str


def compile_problem(errors: Sequence[FieldError]) -> SubmitProblem:
    """Every compile error with its field path; CategoryNotFound when an unknown category is among them."""
    reason = REASON_CATEGORY_NOT_FOUND if any(e.kind == "unknown-category" for e in errors) else REASON_BUILD_FAILED
    message = "; ".join(error.render() for error in errors)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return SubmitProblem(reason, message)


def name_collision_problem(workflow: str) -> SubmitProblem:
    """The Workflow name the watcher would create belongs to someone else: never adopted, never deleted."""
    return SubmitProblem(
        REASON_NAME_COLLISION, f"Workflow {workflow} already exists and is not owned by this Certification; left alone"
    )


def not_started_status(
    certification: Mapping[str, Any],
    problem: SubmitProblem,
    previous: CertificationStatus | None,
    now: datetime,
) -> CertificationStatus:
    """Failed before anything ran: every category Failed (not run), ValidationFailed False."""
    generation = (certification.get("metadata") or {}).get("generation")
    generation = generation if isinstance(generation, int) else None
    stamp = format_time(now)
    wanted = [
        (kind, "True" if kind == FAILED else "False", problem.reason, problem.message if kind == FAILED else "")
        for kind in EXCLUSIVE_TYPES
    ] + [(VALIDATION_FAILED, "False", REASON_NO_THRESHOLD, MESSAGE_NO_THRESHOLD)]
    conditions = []
    for kind, status, reason, message in wanted:
        before = find_condition(previous.conditions if previous else None, kind)
        unchanged = before is not None and before.status == status
        conditions.append(
            Condition(
                type=kind,
                status=status,
                observed_generation=generation,
                last_transition_time=before.last_transition_time if unchanged and before else stamp,
                reason=reason,
                message=message,
            )
        )
    categories = [
        CategoryStatus(domain=domain, variant=variant, status="Failed", message=f"Not run: {problem.reason}")
        for domain, variant in spec_categories(certification)
    ]
    return CertificationStatus(
        observed_generation=generation,
        result="FAILED",
        passed=f"0/{len(categories)}",
        failed_nodes=0,
        excluded_nodes=0,
        conditions=conditions,
        category_statuses=categories,
    )
