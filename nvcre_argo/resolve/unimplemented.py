"""Options the API accepts (the reference's schema) but nvcre-argo does not implement yet: refused when set.

Why refuse: an option that is accepted and then ignored makes a Certification say something its run does not
do (`enableCheckpoint: true` would checkpoint onto the pod's memory-backed workspace, with no PVC and no
restart). The CRD keeps every reference field, so a Certification written for the reference still passes
admission (`validate --admission-only`); compiling it fails here, with the option's field path, until the
option is implemented. Only what the user wrote counts: catalog defaults (nemotron's maxRestarts 3) are not
options the user set, and a value that asks for exactly what happens
anyway (`enableCheckpoint: false`) is honoured, so accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from nvcre_argo.api.options import CategoryOptions
from nvcre_argo.api.spec import CertificationSpec
from nvcre_argo.errors import FieldError, Path
from nvcre_argo.resolve.options import GLOBAL_PATH, category_path, option_alias

_CHECKPOINT_PVC = "it configures the checkpoint PVC, which is never created; remove it"


@dataclass(frozen=True)
class _Unimplemented:
    why: str
    refused: Callable[[Any], bool] = lambda _value: True


UNIMPLEMENTED_OPTIONS: Mapping[str, _Unimplemented] = MappingProxyType(
    {
        "enable_checkpoint": _Unimplemented(
            "no checkpoint PVC is created, so checkpoints would be written to the pod's memory-backed workspace "
            "and lost; remove it or set false",
            refused=lambda value: value is True,
        ),
        "storage_class_name": _Unimplemented(_CHECKPOINT_PVC),
        "storage_size": _Unimplemented(_CHECKPOINT_PVC),
        "save_top_k": _Unimplemented("checkpoints are not kept (no checkpoint PVC is created); remove it"),
        "max_restarts": _Unimplemented("a failed job is never restarted from a checkpoint; remove it"),
    }
)


def unimplemented_option_errors(spec: CertificationSpec) -> list[FieldError]:
    """One error per unimplemented option the user set, globally or in a category, at its own path."""
    levels: list[tuple[Path, CategoryOptions | None]] = [(GLOBAL_PATH, spec)]
    levels += [(category_path(index), category.options) for index, category in enumerate(spec.categories)]
    return [
        FieldError((*path, option_alias(name)), "not-implemented", f"not implemented yet: {option.why}")
        for path, options in levels
        if options is not None
        for name, option in UNIMPLEMENTED_OPTIONS.items()
        if (value := getattr(options, name)) is not None and option.refused(value)
    ]
