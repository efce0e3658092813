"""Options the API accepts (the reference's schema) but nvcre-argo does not implement yet: refused when set.

Why refuse: an option that is accepted and then ignored makes a Certification say something its run does not
do. The CRD keeps every reference field, so a Certification written for the reference still passes
admission (`validate --admission-only`); compiling it fails here, with the option's field path, until the
option is implemented. Only what the user wrote counts: catalog defaults are not options the user set.

`saveTopK` is NeMo 2's `save_top_k`, read only by NeMo recipes; the built-in training entries run
Megatron-LM's `pretrain_gpt.py`, which has no such setting (it keeps checkpoints by `saveRetainInterval`).
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


@dataclass(frozen=True)
class _Unimplemented:
    why: str
    refused: Callable[[Any], bool] = lambda _value: True


UNIMPLEMENTED_OPTIONS: Mapping[str, _Unimplemented] = MappingProxyType(
    {
        "save_top_k": _Unimplemented(
            "only NeMo recipes read save_top_k; Megatron-LM keeps checkpoints by saveRetainInterval; remove it"
        ),
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
