"""YAML text → validated `Certification` objects; the only place pydantic errors become user errors.

Every problem in a document is reported at once, each with the YAML spelling of its path and a message a
person can act on (`must be >= 1, got 0`, `unknown field; did you mean "options"?`). Paths are walked through
the CRD's structural schema, the same schema the API server uses, so map keys print as `["key"]`, list
indices as `[i]`, and pydantic's internal union tags never show.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from nvcre_argo.api.certification import API_VERSION, KIND, Certification
from nvcre_argo.api.crd import certification_schema
from nvcre_argo.api.labels import (
    dns1123_label_problems,
    dns1123_subdomain_problems,
    label_value_problems,
    qualified_name_problems,
)
from nvcre_argo.api.rulecheck import rule_errors
from nvcre_argo.errors import FieldError, InvalidDocumentError, MapKey, Path, PathElement
from nvcre_argo.messages import describe_pydantic_error, describe_value
from nvcre_argo.yamlio import YamlSyntaxError, load_yaml_documents


@dataclass(frozen=True)
class LoadedCertification:
    """A valid Certification and where it came from (for error messages in later stages)."""

    source: str
    certification: Certification
    # The document as written, so later stages can report their errors in the user's order too.
    document: Any = field(default=None, compare=False, repr=False)


@functools.cache
def _schema() -> dict[str, Any]:
    # With rule names: the rule check finds each CEL rule's Python twin by name.
    return certification_schema(rule_names=True)


def load_certifications(text: str, source: str) -> list[LoadedCertification]:
    """Every Certification in a YAML stream; raises InvalidDocumentError listing every problem found.

    Empty documents are skipped (as kubectl does); a stream with no Certification at all is an error.
    """
    try:
        documents = [document for document in load_yaml_documents(text) if document is not None]
    except YamlSyntaxError as error:
        raise InvalidDocumentError([FieldError((), "syntax", f"invalid YAML: {error}", source)]) from None
    if not documents:
        raise InvalidDocumentError([FieldError((), "empty", "no Certification document found", source)])
    loaded: list[LoadedCertification] = []
    problems: list[FieldError] = []
    for index, document in enumerate(documents, start=1):
        document_source = source if len(documents) == 1 else f"{source} (document {index})"
        try:
            certification = parse_certification(document, document_source)
            loaded.append(LoadedCertification(document_source, certification, document))
        except InvalidDocumentError as error:
            problems.extend(error.errors)
    if problems:
        raise InvalidDocumentError(problems)
    return loaded


def parse_certification(document: Any, source: str) -> Certification:
    """One parsed YAML document → a Certification, or InvalidDocumentError with every problem."""
    if not isinstance(document, dict):
        message = f"must be a mapping (a Certification), got {describe_value(document)}"
        raise InvalidDocumentError([FieldError((), "type", message, source)])
    header = _header_errors(document)
    if header:
        raise InvalidDocumentError(error.at(source) for error in header)
    metadata_problems = metadata_errors(document.get("metadata"))
    try:
        certification = Certification.model_validate(document, by_alias=True, by_name=False)
    except ValidationError as error:
        violations = [*rule_errors(document, _schema()), *metadata_problems]
        problems = convert_errors(error.errors(), document, violations)
        raise InvalidDocumentError(problem.at(source) for problem in problems) from None
    if metadata_problems:
        problems = convert_errors((), document, metadata_problems)
        raise InvalidDocumentError(problem.at(source) for problem in problems)
    return certification


def metadata_errors(metadata: Any) -> list[FieldError]:
    """What the API server's ObjectMeta validation would refuse: a custom resource's name (or generateName) is a
    DNS-1123 subdomain, its namespace a DNS-1123 label, its labels and annotations Kubernetes keys and values."""
    if not isinstance(metadata, dict):
        return []  # a type error, reported by the model
    errors: list[FieldError] = []
    name, generate_name = metadata.get("name"), metadata.get("generateName")
    if not name and not generate_name:
        errors.append(FieldError(("metadata", "name"), "required", "name or generateName is required"))
    checks = (
        ("name", name, dns1123_subdomain_problems),
        # A generateName is a prefix: the server appends random characters, so a trailing '-' is fine.
        (
            "generateName",
            generate_name[:-1] if isinstance(generate_name, str) and generate_name.endswith("-") else generate_name,
            dns1123_subdomain_problems,
        ),
        ("namespace", metadata.get("namespace"), dns1123_label_problems),
    )
    for field_name, value, problems_of in checks:
        if isinstance(value, str) and value:
            errors.extend(
                FieldError(("metadata", field_name), "name", f"{problem}, got {_quoted(value)}")
                for problem in problems_of(value)
            )
    for field_name in ("labels", "annotations"):
        entries = metadata.get(field_name)
        for key, value in entries.items() if isinstance(entries, dict) else ():
            path: Path = ("metadata", field_name, MapKey(str(key)))
            errors.extend(FieldError(path, "label-key", problem) for problem in qualified_name_problems(str(key)))
            if field_name == "labels" and isinstance(value, str):
                errors.extend(
                    FieldError(path, "label-value", f"{problem}, got {_quoted(value)}")
                    for problem in label_value_problems(value)
                )
    return errors


def _quoted(value: str) -> str:
    """A name as the user wrote it (non-ASCII letters shown, not escaped: they are often the problem)."""
    return json.dumps(value, ensure_ascii=False)


def _header_errors(document: dict[Any, Any]) -> list[FieldError]:
    """apiVersion and kind first: for another kind, field errors would only confuse."""
    errors = []
    if document.get("apiVersion") != API_VERSION:
        errors.append(
            FieldError(
                ("apiVersion",),
                "api-version",
                f"must be {API_VERSION}, got {describe_value(document.get('apiVersion'))}",
            )
        )
    if document.get("kind") != KIND:
        errors.append(FieldError(("kind",), "kind", f"must be {KIND}, got {describe_value(document.get('kind'))}"))
    return errors


def convert_errors(
    details: Iterable[ErrorDetails], document: Any, rule_violations: Iterable[FieldError] = ()
) -> list[FieldError]:
    """pydantic error details (plus the raw document's rule violations) → FieldErrors in document order,
    one per problem."""
    converted: dict[tuple[Path, str], FieldError] = {}
    pydantic_errors = (error for detail in details for error in _field_errors(detail))
    for error in (*pydantic_errors, *rule_violations):
        # A union reports one type error per member, and a rule may be found by both passes: one line each.
        key = (error.path, error.kind if error.kind == "type" else error.message)
        converted.setdefault(key, error)
    return sorted(converted.values(), key=lambda error: document_order(error.path, document))


def _field_errors(detail: ErrorDetails) -> list[FieldError]:
    path, schema = _walk(detail["loc"])
    kind, message = describe_pydantic_error(detail, schema)
    if kind == "rule":
        violations = (detail.get("ctx") or {}).get("violations") or [(detail["msg"], [])]
        return [
            FieldError((*path, MapKey(key)) if key else path, "rule", rule_message)
            for rule_message, keys in violations
            for key in (keys or [""])
        ]
    if kind == "unknown-field":
        return [FieldError(path, kind, message + _did_you_mean(str(path[-1]), _parent_fields(path)))]
    return [FieldError(path, kind, message)]


def _walk(loc: Sequence[int | str]) -> tuple[Path, dict[str, Any]]:
    """Follow pydantic's location through the structural schema; drop union tags it cannot place."""
    schema: dict[str, Any] = _schema()
    path: list[PathElement] = []
    for element in loc:
        if isinstance(element, int) and schema.get("type") == "array":
            path.append(element)
            schema = schema.get("items", {})
        elif "properties" in schema and str(element) in schema["properties"]:
            path.append(str(element))
            schema = schema["properties"][str(element)]
        elif "additionalProperties" in schema:
            path.append(MapKey(str(element)))
            schema = schema["additionalProperties"]
        elif schema.get("type") == "object" or not path:
            path.append(element if isinstance(element, int) else str(element))  # an unknown field
            schema = {}
        else:
            break  # a union member tag such as 'int' or 'str'
    return tuple(path), schema


def _parent_fields(path: Path) -> list[str]:
    _, parent = _walk([str(element) if not isinstance(element, int) else element for element in path[:-1]])
    return sorted(parent.get("properties", {}))


def _did_you_mean(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    lowered = [candidate for candidate in candidates if candidate.lower() == name.lower()]
    suggestion = next(iter(lowered or close), None)
    return f'; did you mean "{suggestion}"?' if suggestion else ""


def document_order(path: Path, document: Any) -> tuple[int, ...]:
    """Position of a path in the document, so errors print top to bottom as the user wrote them."""
    order: list[int] = []
    node = document
    for element in path:
        if isinstance(node, dict):
            keys = list(node)
            order.append(keys.index(element) if element in keys else len(keys))
            node = node.get(element)
        elif isinstance(node, list) and isinstance(element, int):
            order.append(element)
            node = node[element] if element < len(node) else None
        else:
            order.append(0)
            node = None
    return tuple(order)
