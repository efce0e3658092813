"""Certification → Argo Workflow: the compiler's one entry point (pure and deterministic).

The output is a pure function of the Certification, the catalog and the package version: no clock, no
randomness, no environment, no cluster. A Certification that cannot be compiled (unknown category, label
conflict, a name too long for the Workflows it names) yields every error and no output at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nvcre_argo import contract
from nvcre_argo.api.certification import Certification
from nvcre_argo.catalog.loader import Catalog
from nvcre_argo.errors import CompileError, FieldError
from nvcre_argo.loading import LoadedCertification
from nvcre_argo.names import DNS_LABEL_LIMIT
from nvcre_argo.render.certification_workflow import WorkflowTarget, build_certification_workflow, category_arguments
from nvcre_argo.resolve.category import ResolvedCategory, resolve_certification


@dataclass(frozen=True)
class CompileOptions:
    step_image: str = contract.DEFAULT_STEP_IMAGE
    namespace: str | None = None
    name: str | None = None
    gpu_architecture: str | None = None
    owner_references: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True)
class CompiledCertification:
    source: str
    certification: str
    workflow: dict[str, Any]


def compile_certifications(
    loaded: Sequence[LoadedCertification], *, catalog: Catalog, options: CompileOptions
) -> list[CompiledCertification]:
    """Compile every Certification, or raise one CompileError listing every problem of every document."""
    compiled: list[CompiledCertification] = []
    errors: list[FieldError] = []
    for item in loaded:
        try:
            compiled.append(compile_certification(item, catalog=catalog, options=options))
        except CompileError as error:
            errors.extend(error.errors)
    if errors:
        raise CompileError(errors)
    return compiled


def compile_certification(
    loaded: LoadedCertification, *, catalog: Catalog, options: CompileOptions
) -> CompiledCertification:
    certification = loaded.certification
    errors = _name_errors(certification)
    resolved, resolve_errors = resolve_certification(certification.spec, catalog)
    errors += resolve_errors
    if options.gpu_architecture:
        resolved = [category.model_copy(update={"gpu_architecture": options.gpu_architecture}) for category in resolved]
    arguments = [category_arguments(category) for category in resolved]
    errors += _template_syntax_errors(resolved, arguments)
    if errors:
        raise CompileError(error.at(loaded.source) for error in errors)
    name = certification.metadata.name or ""
    target = WorkflowTarget(
        certification=name,
        namespace=options.namespace or certification.metadata.namespace,
        name=options.name,
        step_image=options.step_image,
        owner_references=options.owner_references,
    )
    return CompiledCertification(loaded.source, name, build_certification_workflow(target, resolved, arguments))


def _name_errors(certification: Certification) -> list[FieldError]:
    """The name labels every object and prefixes every Workflow, so it must fit a label value."""
    name = certification.metadata.name
    if not name:
        return [FieldError(("metadata", "name"), "required", "required to compile: it names and labels the Workflows")]
    if len(name) > DNS_LABEL_LIMIT:
        return [
            FieldError(
                ("metadata", "name"),
                "max-length",
                f"must be at most {DNS_LABEL_LIMIT} characters to compile, got {len(name)}",
            )
        ]
    return []


def _template_syntax_errors(categories: Sequence[ResolvedCategory], arguments: Sequence[str]) -> list[FieldError]:
    """Argo would try to resolve `{{` inside the category argument and has no escape for it."""
    return [
        FieldError(
            ("spec", "categories", category.index),
            "argo-syntax",
            "values must not contain '{{' (Argo would treat it as a template expression)",
        )
        for category, argument in zip(categories, arguments, strict=True)
        if "{{" in argument
    ]
