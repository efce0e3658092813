"""The thresholds one category checks: registry keys, CEL that compiles, and only what its measurement gives.

A category takes its own `options.thresholds` or, when it sets none, `spec.thresholds`. It can only check the
keys its measurement produces (NCCL entries: bandwidth; training: goodput, TFLOPS, step time; DCGM: none, its
verdict is the exit code). A threshold it cannot measure would be "missing" after every run and fail every
node of the category with ThresholdViolation, so:

- inherited from `spec.thresholds`, where it was meant for the categories that measure it (the natural way to
  set NCCL thresholds for a mix of categories): dropped for this category, with a warning;
- set in the category's own options, where it was asked of this category alone: an error at its path.

Pure: warnings are returned like errors, and the CLI prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvcre_argo.api.options import THRESHOLD_KEYS
from nvcre_argo.catalog.model import CatalogEntry
from nvcre_argo.cel import threshold_problem
from nvcre_argo.errors import FieldError, MapKey
from nvcre_argo.resolve.options import GLOBAL_PATH, EffectiveOptions

INAPPLICABLE = "inapplicable-threshold"


@dataclass(frozen=True)
class CategoryThresholds:
    """What the category checks (key order), what is wrong with what it was given, and what was dropped."""

    thresholds: dict[str, str]
    errors: list[FieldError]
    warnings: list[FieldError]


def resolve_thresholds(effective: EffectiveOptions, entry: CatalogEntry, index: int) -> CategoryThresholds:
    """Category `index`'s thresholds, checked against the registry, CEL and what `entry` measures."""
    given = effective.options.thresholds or {}
    path = effective.origin("thresholds")
    inherited = path == (*GLOBAL_PATH, "thresholds")
    errors: list[FieldError] = []
    unknown = sorted(key for key in given if key not in THRESHOLD_KEYS)
    if unknown:
        errors.append(
            FieldError(
                path,
                "unknown-threshold",
                f"unknown threshold key(s) [{', '.join(unknown)}]; valid keys: [{', '.join(THRESHOLD_KEYS)}]",
            )
        )
    for key, expression in given.items():
        if key in THRESHOLD_KEYS and (problem := threshold_problem(expression)):
            errors.append(FieldError((*path, MapKey(key)), "invalid-threshold", f'Threshold "{key}": {problem}'))
    warnings: list[FieldError] = []
    for key in sorted(given):
        if key not in THRESHOLD_KEYS or key in entry.threshold_keys:
            continue
        where = (*path, MapKey(key))
        if inherited:
            message = (
                f"not applied to spec.categories[{index}] ({entry.key}), which cannot measure it; {_measures(entry)}"
            )
            warnings.append(FieldError(where, INAPPLICABLE, message))
        else:
            errors.append(FieldError(where, INAPPLICABLE, f"{entry.key} cannot measure {key}; {_measures(entry)}"))
    kept = {key: given[key] for key in sorted(given) if key in entry.threshold_keys}
    return CategoryThresholds(kept, errors, warnings)


def _measures(entry: CatalogEntry) -> str:
    if not entry.threshold_keys:
        return "it has no measurement a threshold can check (its verdict is the workload's exit code)"
    return f"it measures {', '.join(entry.threshold_keys)}"
