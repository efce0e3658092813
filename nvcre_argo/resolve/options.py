"""Option inheritance: a per-category option, when set, replaces the global one wholesale.

Maps, lists and objects (thresholds, resources, imagePullSecrets) are replaced, not merged; only
`workloadMetadata.labels` merges per key, and that is the labels module's job. Each effective value remembers
the field path it came from, so a later error (a label conflict, request > limit after defaults) can name
the place the user has to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nvcre_argo.api.options import OPTION_FIELDS, CategoryOptions
from nvcre_argo.api.spec import CertificationSpec
from nvcre_argo.errors import Path

GLOBAL_PATH: Path = ("spec",)


def category_path(index: int) -> Path:
    return ("spec", "categories", index, "options")


def option_alias(name: str) -> str:
    return CategoryOptions.model_fields[name].alias or name


@dataclass(frozen=True)
class EffectiveOptions:
    """The merged options of one category, and where each set value came from."""

    options: CategoryOptions
    origins: Mapping[str, Path]

    def origin(self, name: str) -> Path:
        """Field path of an option's effective value (the global one when neither level set it)."""
        return self.origins.get(name, (*GLOBAL_PATH, option_alias(name)))


def merge_options(spec: CertificationSpec, index: int) -> EffectiveOptions:
    """Global options overlaid by category `index`'s options (per-category wins when set)."""
    category = spec.categories[index].options
    merged: dict[str, Any] = {}
    origins: dict[str, Path] = {}
    for name in OPTION_FIELDS:
        category_value = getattr(category, name) if category else None
        if category_value is not None:
            merged[name] = category_value
            origins[name] = (*category_path(index), option_alias(name))
        elif (global_value := getattr(spec, name)) is not None:
            merged[name] = global_value
            origins[name] = (*GLOBAL_PATH, option_alias(name))
    return EffectiveOptions(CategoryOptions.model_construct(**merged), origins)
