"""Certification → Argo Workflow: the compiler's one entry point (pure and deterministic).

The output is a pure function of the Certification, the catalog and the package version: no clock, no
randomness, no environment, no cluster. A Certification that cannot be compiled (unknown category, label
conflict, a name too long for the Workflows it names) yields every error and no output at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo import contract
from nvcre_argo.api.certification import Certification
from nvcre_argo.api.labels import dns1123_subdomain_problems, label_value_problems, qualified_name_problems
from nvcre_argo.api.spec import CertificationSpec
from nvcre_argo.catalog.loader import Catalog
from nvcre_argo.errors import CompileError, FieldError, MapKey, Path
from nvcre_argo.loading import LoadedCertification, document_order
from nvcre_argo.names import DNS_LABEL_LIMIT
from nvcre_argo.platform.arms import PlatformArm
from nvcre_argo.render.certification_workflow import (
    DEFAULT_LOCK,
    DEFAULT_TTL_SECONDS,
    WorkflowTarget,
    build_certification_workflow,
    category_arguments,
)
from nvcre_argo.render.step_placement import StepPlacement, placement_spec
from nvcre_argo.render.template_ref import build_template_ref_workflow
from nvcre_argo.resolve.category import ResolvedCategory, resolution_warnings, resolve_certification


@dataclass(frozen=True)
class CompileOptions:
    step_image: str = contract.DEFAULT_STEP_IMAGE
    namespace: str | None = None
    name: str | None = None
    gpu_architecture: str | None = None
    # `--platform`: pins the platform the plan step would otherwise detect; `--catalog DIR/_platform/` arms go
    # into the categories so the plan step (which ships only the built-in arms) applies them too.
    platform: str | None = None
    platform_arms: tuple[PlatformArm, ...] = ()
    owner_references: Sequence[dict[str, Any]] = ()
    # The Argo mutex the certification Workflow holds (None: none); see render.certification_workflow.
    lock: str | None = DEFAULT_LOCK
    # Where step pods run (never on the target unless told); see render.step_placement.
    placement: StepPlacement = field(default_factory=StepPlacement)
    ttl_seconds: int | None = DEFAULT_TTL_SECONDS
    deadline_seconds: int | None = None
    category_deadline_seconds: int | None = None
    # Compile for Argo's `templateReferencing: Strict`: reference the installed templates (render.template_ref).
    template_ref: bool = False
    # Run each category's groups in one shared runner pod (steps.shared_runner); False: a step pod per group.
    shared_runner: bool = True


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


def check_certifications(
    loaded: Sequence[LoadedCertification], *, catalog: Catalog, options: CompileOptions
) -> list[FieldError]:
    """Every error compiling these Certifications would raise, without building anything: what `validate` and
    `nvcre-compile --validate-only` report (one function, so they cannot disagree with compile)."""
    return [error for item in loaded for error in _prepare(item, catalog=catalog, options=options)[2]]


def resolve_for_run(
    loaded: LoadedCertification, *, catalog: Catalog, options: CompileOptions
) -> list[ResolvedCategory]:
    """The categories exactly as the compiled Workflow hands them to its steps (`--gpu-arch` included), or the
    CompileError compiling would raise: what `nvcre-argo plan` plans, so a preview never plans a document
    compile refuses, nor plans it differently."""
    resolved, _, errors = _prepare(loaded, catalog=catalog, options=options)
    if errors:
        raise CompileError(errors)
    return resolved


def certification_warnings(loaded: Sequence[LoadedCertification], *, catalog: Catalog) -> list[FieldError]:
    """What compiling these Certifications leaves out without failing (spec-level thresholds a category cannot
    measure), each with its source: the CLI prints them as warnings on stderr, next to the output."""
    warnings: list[FieldError] = []
    for item in loaded:
        document = item.document or item.certification.model_dump(by_alias=True, exclude_none=True, mode="json")
        found = resolution_warnings(item.certification.spec, catalog)
        found.sort(key=lambda warning: document_order(warning.path, document))
        warnings += [warning.at(item.source) for warning in found]
    return warnings


def _prepare(
    loaded: LoadedCertification, *, catalog: Catalog, options: CompileOptions
) -> tuple[list[ResolvedCategory], list[str], list[FieldError]]:
    """Resolve and check one Certification: (categories, their Workflow arguments, every error in document
    order, each with its source)."""
    certification = loaded.certification
    errors = _name_errors(certification) + _reference_errors(certification.spec)
    resolved, resolve_errors = resolve_certification(certification.spec, catalog)
    errors += resolve_errors
    if options.gpu_architecture:
        resolved = [category.model_copy(update={"gpu_architecture": options.gpu_architecture}) for category in resolved]
    if options.platform:
        resolved = [category.model_copy(update={"platform": options.platform}) for category in resolved]
    if options.platform_arms:
        resolved = [category.model_copy(update={"platform_arms": options.platform_arms}) for category in resolved]
    arguments = [category_arguments(category) for category in resolved]
    syntax_errors = _field_syntax_errors(certification.spec)
    errors += syntax_errors or _template_syntax_errors(resolved, arguments)
    document = loaded.document or certification.model_dump(by_alias=True, exclude_none=True, mode="json")
    errors.sort(key=lambda error: document_order(error.path, document))
    return resolved, arguments, [error.at(loaded.source) for error in errors]


def compile_certification(
    loaded: LoadedCertification, *, catalog: Catalog, options: CompileOptions
) -> CompiledCertification:
    certification = loaded.certification
    resolved, arguments, errors = _prepare(loaded, catalog=catalog, options=options)
    if errors:
        raise CompileError(errors)
    name = certification.metadata.name or ""
    target = WorkflowTarget(
        certification=name,
        namespace=options.namespace or certification.metadata.namespace,
        name=options.name,
        step_image=options.step_image,
        owner_references=options.owner_references,
        lock=options.lock,
        placement=placement_spec(options.placement, certification.spec.target),
        ttl_seconds=options.ttl_seconds,
        deadline_seconds=options.deadline_seconds,
        category_deadline_seconds=options.category_deadline_seconds,
        shared_runner=options.shared_runner,
    )
    build = build_template_ref_workflow if options.template_ref else build_certification_workflow
    return CompiledCertification(loaded.source, name, build(target, resolved, arguments))


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


def _reference_errors(spec: CertificationSpec) -> list[FieldError]:
    """Names the CRD accepts as plain strings but Kubernetes would refuse (or could never match) once the
    Workflows run: node-selector and taint keys and values, node names, image pull Secret names."""
    errors: list[FieldError] = []
    target: Path = ("spec", "target")
    for key, value in (spec.target.node_selector or {}).items():
        path = (*target, "nodeSelector", MapKey(key))
        errors += _problems(path, "label-key", qualified_name_problems(key), key)
        errors += _problems(path, "label-value", label_value_problems(value), value)
    for index, requirement in enumerate(spec.target.match_expressions or []):
        path = (*target, "matchExpressions", index)
        errors += _problems((*path, "key"), "label-key", qualified_name_problems(requirement.key), requirement.key)
        for position, value in enumerate(requirement.values or []):
            errors += _problems((*path, "values", position), "label-value", label_value_problems(value), value)
    for index, node in enumerate(spec.target.node_names or []):
        errors += _problems((*target, "nodeNames", index), "name", dns1123_subdomain_problems(node), node)
    for index, taint in enumerate(spec.target.taint_selectors or []):
        path = (*target, "taintSelectors", index)
        errors += _problems((*path, "key"), "label-key", qualified_name_problems(taint.key), taint.key)
        if taint.value:
            errors += _problems((*path, "value"), "label-value", label_value_problems(taint.value), taint.value)
    sources: list[tuple[Path, list[str]]] = [
        (("spec", "imagePullSecrets"), [secret.name for secret in spec.image_pull_secrets or []])
    ]
    for index, category in enumerate(spec.categories):
        secrets = category.options.image_pull_secrets if category.options else None
        sources.append((("spec", "categories", index, "options", "imagePullSecrets"), [s.name for s in secrets or []]))
    for path, names in sources:
        for index, secret in enumerate(names):
            problems = dns1123_subdomain_problems(secret) if secret else ["a Secret name is required"]
            errors += _problems((*path, index, "name"), "name", problems, secret)
    return errors


def _problems(path: Path, kind: str, problems: list[str], value: str) -> list[FieldError]:
    shown = json.dumps(value, ensure_ascii=False)
    return [FieldError(path, kind, f"{problem}, got {shown}") for problem in problems]


def _field_syntax_errors(spec: CertificationSpec) -> list[FieldError]:
    """Each value (or map key) of the spec holding `{{`, at its own path."""
    errors: list[FieldError] = []

    def visit(node: Any, path: Path) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                element = MapKey(key) if path and path[-1] in _USER_MAPS else key
                if "{{" in key:
                    errors.append(_syntax_error((*path, element)))
                visit(value, (*path, element))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                visit(value, (*path, index))
        elif isinstance(node, str) and "{{" in node:
            errors.append(_syntax_error(path))

    visit(spec.model_dump(by_alias=True, exclude_none=True, mode="json"), ("spec",))
    return errors


# Maps whose keys are the user's (printed as ["key"]), not field names.
_USER_MAPS = frozenset({"nodeSelector", "labels", "thresholds"})


def _syntax_error(path: Path) -> FieldError:
    return FieldError(path, "argo-syntax", "must not contain '{{' (Argo would treat it as a template expression)")
