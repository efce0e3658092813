"""The status of a Certification the watcher (`--submit`) could not compile: Failed, with every error.

The message carries each problem with its field path (`spec.categories[1]: no catalog entry ...`), so
`kubectl describe certification` says exactly what to fix. The reason follows the reference:
`CategoryNotFound` when an unknown category is among the errors, else `BuildFailed`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from nvcre_argo.api.status import CategoryStatus, CertificationStatus, Condition
from nvcre_argo.errors import FieldError
from nvcre_argo.watch.categories import spec_categories
from nvcre_argo.watch.conditions import EXCLUSIVE_TYPES, FAILED, find_condition
from nvcre_argo.watch.status import format_time

REASON_BUILD_FAILED = "BuildFailed"
REASON_CATEGORY_NOT_FOUND = "CategoryNotFound"
MAX_MESSAGE = 4000


def build_failure_status(
    certification: Mapping[str, Any],
    errors: Sequence[FieldError],
    previous: CertificationStatus | None,
    now: datetime,
) -> CertificationStatus:
    reason = REASON_CATEGORY_NOT_FOUND if any(e.kind == "unknown-category" for e in errors) else REASON_BUILD_FAILED
    message = "; ".join(error.render() for error in errors)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    generation = (certification.get("metadata") or {}).get("generation")
    generation = generation if isinstance(generation, int) else None
    stamp = format_time(now)
    conditions = []
    for kind in EXCLUSIVE_TYPES:
        status = "True" if kind == FAILED else "False"
        before = find_condition(previous.conditions if previous else None, kind)
        unchanged = before is not None and before.status == status
        conditions.append(
            Condition(
                type=kind,
                status=status,
                observed_generation=generation,
                last_transition_time=before.last_transition_time if unchanged and before else stamp,
                reason=reason,
                message=message if kind == FAILED else "",
            )
        )
    categories = [
        CategoryStatus(
            domain=domain, variant=variant, status="Failed", message="Not run: the Certification did not compile"
        )
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
