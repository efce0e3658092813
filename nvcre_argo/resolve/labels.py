"""Workload-label precedence (the seed page's "Precedence" section), exactly.

1. labels in the resolved catalog job spec,
2. global `spec.workloadMetadata.labels`,
3. per-category `options.workloadMetadata.labels`,
4. the resolved gang-scheduler queue label.

Steps 2 and 3 replace earlier values by key; step 4 only inserts: a missing key is added, the same value is
accepted, a different value fails naming the key, both values and the field path of the offending value.
There is no deletion: a category can change or add a key, never remove a global one. At most 32 labels
after merging, queue label included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nvcre_argo.api.labels import MAX_WORKLOAD_LABELS
from nvcre_argo.api.spec import DEFAULT_QUEUE, DEFAULT_QUEUE_LABEL_KEY, CertificationSpec
from nvcre_argo.errors import FieldError, MapKey, Path
from nvcre_argo.resolve.options import GLOBAL_PATH, category_path


@dataclass(frozen=True)
class GangScheduling:
    """The certification-wide scheduler and queue, defaults applied."""

    scheduler_name: str
    queue: str
    queue_label_key: str


def resolve_gang(spec: CertificationSpec) -> GangScheduling | None:
    gang = spec.gang_scheduler
    if gang is None:
        return None
    return GangScheduling(
        scheduler_name=gang.scheduler_name,
        queue=gang.queue or DEFAULT_QUEUE,
        queue_label_key=gang.queue_label_key or DEFAULT_QUEUE_LABEL_KEY,
    )


def _labels_path(level: Path) -> Path:
    return (*level, "workloadMetadata", "labels")


@dataclass(frozen=True)
class LabelResolution:
    labels: dict[str, str]
    errors: list[FieldError]


def merge_workload_labels(
    *,
    catalog_labels: Mapping[str, str],
    spec: CertificationSpec,
    index: int,
    gang: GangScheduling | None,
) -> LabelResolution:
    """The TrainJob labels of category `index`, in sorted key order, or the errors that forbid them."""
    merged: dict[str, str] = dict(catalog_labels)
    origin: dict[str, Path] = {}
    category_options = spec.categories[index].options
    levels: list[tuple[Path, Mapping[str, str] | None]] = [
        (_labels_path(GLOBAL_PATH), spec.workload_metadata.labels if spec.workload_metadata else None),
        (
            _labels_path(category_path(index)),
            category_options.workload_metadata.labels
            if category_options and category_options.workload_metadata
            else None,
        ),
    ]
    for path, labels in levels:
        for key, value in (labels or {}).items():
            merged[key] = value
            origin[key] = path
    errors: list[FieldError] = []
    if gang is not None:
        key, expected = gang.queue_label_key, gang.queue
        if key not in merged:
            merged[key] = expected
        elif merged[key] != expected:
            message = f'conflicting label value "{merged[key]}", expected "{expected}"'
            if key in origin:
                errors.append(FieldError((*origin[key], MapKey(key)), "queue-conflict", message))
            else:
                errors.append(
                    FieldError(("spec", "categories", index), "queue-conflict", f'catalog label "{key}": {message}')
                )
    if len(merged) > MAX_WORKLOAD_LABELS:
        counted = " (including the gang-scheduler queue label)" if gang else ""
        where = next((path for path, labels in reversed(levels) if labels), levels[0][0])
        errors.append(
            FieldError(
                where,
                "too-many-labels",
                f"at most {MAX_WORKLOAD_LABELS} workload labels are allowed after merging{counted}, got {len(merged)}",
            )
        )
    return LabelResolution(dict(sorted(merged.items())), errors)
