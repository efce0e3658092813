"""The generated CRD: committed as generated, in step with the models, structural, and agreeing with the loader.

The last group validates the whole corpus against the CRD's openAPIV3Schema with jsonschema: apart from CEL
rules (not evaluated here) and unknown fields (pruned by the API server, rejected by the loader), the schema
and the Python validation must accept and reject the same documents at the same paths.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from nvcre_argo.api.certification import Certification
from nvcre_argo.api.crd import CRD_FILE_NAME, build_crd, certification_schema
from nvcre_argo.api.options import QUANTITY_RULES
from nvcre_argo.api.rulecheck import rule_errors
from nvcre_argo.api.rules import RULE_NAME_KEY
from nvcre_argo.api.ruleset import RULES_BY_NAME, RuleTwinError, _by_name, twin_of
from nvcre_argo.api.spec import CertificationSpec
from nvcre_argo.api.status import CertificationStatus
from nvcre_argo.cli.main import cli
from nvcre_argo.errors import MapKey, PathElement, format_path
from nvcre_argo.yamlio import dump_yaml
from tests.unit.corpus import INVALID, SCHEMA_KINDS, VALID, Case

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "crds" / CRD_FILE_NAME

REFERENCE_MESSAGES = {
    # nvcre-contract.md §3.5, the rules that apply to a Certification.
    "spec is immutable after creation",
    "requests.cpu must not exceed limits.cpu",
    "requests.memory must not exceed limits.memory",
    "cpu must be a non-negative quantity",
    "memory must be a non-negative quantity",
    "nicResourceName must not use the reserved kubernetes.io or k8s.io domains",
    "queueLabelKey prefix must be at most 253 characters",
    "queueLabelKey must not use the controller-owned key app.kubernetes.io/managed-by or any key under the "
    "nvcre.nvidia.com/ prefix",
    "labels must not set the controller-owned keys app.kubernetes.io/managed-by or any key under the "
    "nvcre.nvidia.com/ prefix",
    "each label key must be a valid Kubernetes label key: an optional DNS-subdomain prefix followed by '/', then "
    "a name of at most 63 characters beginning and ending with an alphanumeric character",
    "each label key prefix must be at most 253 characters",
}
STRUCTURAL_TYPES = {"object", "array", "string", "integer", "number", "boolean"}


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return build_crd()


@pytest.fixture(scope="module")
def schema(crd: dict[str, Any]) -> dict[str, Any]:
    [version] = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with a readable location (`[]` for list items, `{}` for map values)."""
    yield path or "<root>", node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")


# --- Committed file ---------------------------------------------------------------------------------------------


def test_the_committed_crd_is_what_the_generator_builds(crd: dict[str, Any]) -> None:
    assert yaml.safe_load(CRD_PATH.read_text()) == crd


def test_the_committed_crd_bytes_are_the_yaml_writers_output(crd: dict[str, Any]) -> None:
    assert CRD_PATH.read_text() == dump_yaml(crd)


# --- Models and CRD in step, both directions --------------------------------------------------------------------


def _nested_models(annotation: Any, suffix: str = "") -> Iterator[tuple[type[BaseModel], str]]:
    """The models inside a field's type, with `[]`/`{}` for each list/map level on the way."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, suffix
    elif origin is typing.Annotated:
        yield from _nested_models(typing.get_args(annotation)[0], suffix)
    elif origin in (typing.Union, types.UnionType):
        for member in typing.get_args(annotation):
            yield from _nested_models(member, suffix)
    elif origin is list:
        yield from _nested_models(typing.get_args(annotation)[0], f"{suffix}[]")
    elif origin is dict:
        yield from _nested_models(typing.get_args(annotation)[1], f"{suffix}{{}}")


def _model_fields(model: type[BaseModel], prefix: str) -> tuple[set[str], set[str]]:
    """(every field path, every required field path) of a model, recursively, by alias."""
    fields: set[str] = set()
    required: set[str] = set()
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}"
        fields.add(path)
        if info.is_required():
            required.add(path)
        for nested, suffix in _nested_models(info.annotation):
            more_fields, more_required = _model_fields(nested, f"{path}{suffix}")
            fields |= more_fields
            required |= more_required
    return fields, required


def _schema_fields(node: dict[str, Any], prefix: str) -> tuple[set[str], set[str]]:
    fields: set[str] = set()
    required: set[str] = set()
    for path, child in _nodes(node, prefix):
        fields |= {f"{path}.{name}" for name in child.get("properties", {})}
        required |= {f"{path}.{name}" for name in child.get("required", [])}
    return fields, required


@pytest.mark.parametrize(
    ("top", "model"),
    [pytest.param("spec", CertificationSpec, id="spec"), pytest.param("status", CertificationStatus, id="status")],
)
def test_every_model_field_is_in_the_crd_and_every_crd_field_is_in_the_model(
    schema: dict[str, Any], top: str, model: type[BaseModel]
) -> None:
    model_fields, _ = _model_fields(model, top)
    schema_fields, _ = _schema_fields(schema["properties"][top], top)

    assert sorted(model_fields - schema_fields) == [], "model fields missing from the CRD"
    assert sorted(schema_fields - model_fields) == [], "CRD fields missing from the models"


@pytest.mark.parametrize(
    ("top", "model"),
    [pytest.param("spec", CertificationSpec, id="spec"), pytest.param("status", CertificationStatus, id="status")],
)
def test_required_fields_are_the_same_in_the_models_and_the_crd(
    schema: dict[str, Any], top: str, model: type[BaseModel]
) -> None:
    _, model_required = _model_fields(model, top)
    _, schema_required = _schema_fields(schema["properties"][top], top)

    assert sorted(model_required) == sorted(schema_required)


def test_the_parity_walk_sees_options_at_both_levels_and_deep_fields(schema: dict[str, Any]) -> None:
    """Guard the walker itself: an empty walk would make the parity tests pass vacuously."""
    model_fields, _ = _model_fields(CertificationSpec, "spec")

    assert {
        "spec.nodesPerJob",
        "spec.categories[].options.nodesPerJob",
        "spec.categories[].options.resources.limits.cpu",
        "spec.workloadMetadata.labels",
        "spec.target.taintSelectors[].effect",
        "spec.gangScheduler.queueLabelKey",
        "spec.enableMNNVL",
    } <= model_fields


def test_the_top_level_properties_are_the_documents_fields(schema: dict[str, Any]) -> None:
    aliases = {info.alias or name for name, info in Certification.model_fields.items()}

    assert set(schema["properties"]) == aliases == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert schema["required"] == ["spec"]


# --- CEL messages -----------------------------------------------------------------------------------------------


def _validations(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(path, rule) for path, node in _nodes(schema) for rule in node.get("x-kubernetes-validations", [])]


def test_every_cel_message_is_a_reference_message(schema: dict[str, Any]) -> None:
    unknown = {
        (path, rule["message"]) for path, rule in _validations(schema) if rule["message"] not in REFERENCE_MESSAGES
    }

    assert unknown == set()


def test_every_reference_message_is_used_by_the_crd(schema: dict[str, Any]) -> None:
    used = {rule["message"] for _, rule in _validations(schema)}

    assert sorted(REFERENCE_MESSAGES - used) == []


def test_every_cel_rule_has_a_rule_and_a_message(schema: dict[str, Any]) -> None:
    incomplete = [path for path, rule in _validations(schema) if set(rule) != {"rule", "message"} or not rule["rule"]]

    assert incomplete == []


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("spec", "spec is immutable after creation", id="spec-immutable"),
        pytest.param("spec.resources", "requests.cpu must not exceed limits.cpu", id="resources-cpu"),
        pytest.param(
            "spec.categories[].options.resources", "requests.memory must not exceed limits.memory", id="options-memory"
        ),
        pytest.param(
            "spec.categories[].options.resources.requests.cpu",
            "cpu must be a non-negative quantity",
            id="options-quantity",
        ),
        pytest.param(
            "spec.workloadMetadata.labels", "each label key prefix must be at most 253 characters", id="labels"
        ),
        pytest.param(
            "spec.categories[].options.nicResourceName",
            "nicResourceName must not use the reserved kubernetes.io or k8s.io domains",
            id="options-nic",
        ),
        pytest.param(
            "spec.gangScheduler.queueLabelKey", "queueLabelKey prefix must be at most 253 characters", id="queue-key"
        ),
    ],
)
def test_cel_rules_sit_on_the_field_they_check(schema: dict[str, Any], path: str, message: str) -> None:
    assert (path, message) in {(where, rule["message"]) for where, rule in _validations(schema)}


# --- Python twins of the CEL rules (issue 12 item 4a) ------------------------------------------------------------


@pytest.fixture(scope="module")
def printed_schema() -> dict[str, Any]:
    """The openAPIV3Schema exactly as `nvcre-argo crd` prints it."""
    result = CliRunner().invoke(cli, ["crd"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    [version] = yaml.safe_load(result.stdout)["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def test_the_loaders_schema_is_the_printed_crd_schema_plus_rule_names(printed_schema: dict[str, Any]) -> None:
    named = certification_schema(rule_names=True)
    stripped = [(path, {k: v for k, v in rule.items() if k != RULE_NAME_KEY}) for path, rule in _validations(named)]

    assert stripped == _validations(printed_schema)
    assert [path for path, rule in _validations(named) if RULE_NAME_KEY not in rule] == []


def test_every_cel_rule_of_the_printed_crd_has_exactly_one_python_twin(printed_schema: dict[str, Any]) -> None:
    # The rules sit at the same places in both schemas (previous test): the n-th printed rule is named by the n-th
    # rule of the loader's copy. Its twin is the registered rule of that name, and no other registered rule says
    # the same thing (same CEL and message), so no rule is ever checked twice or with another rule's message.
    named = _validations(certification_schema(rule_names=True))
    problems = []
    for (path, printed), (_, with_name) in zip(_validations(printed_schema), named, strict=True):
        same = [
            twin for twin in RULES_BY_NAME.values() if (twin.cel, twin.message) == (printed["rule"], printed["message"])
        ]
        if len(same) != 1 or twin_of(with_name) is not same[0]:
            problems.append((path, printed["message"], [twin.name for twin in same]))

    assert problems == []


def test_rules_sharing_cel_text_keep_their_own_twins() -> None:
    # cpu and memory share their CEL text: looked up by text, one of them answered for both (issue 12 item 4a).
    cpu, memory = QUANTITY_RULES
    assert cpu.cel == memory.cel
    assert (RULES_BY_NAME[cpu.name].message, RULES_BY_NAME[memory.name].message) == (
        "cpu must be a non-negative quantity",
        "memory must be a non-negative quantity",
    )


def test_every_registered_twin_is_used_by_the_crd(printed_schema: dict[str, Any]) -> None:
    named = certification_schema(rule_names=True)
    used = {rule[RULE_NAME_KEY] for _, rule in _validations(named)}

    assert sorted(set(RULES_BY_NAME) - used) == []


@pytest.mark.parametrize(
    "validation",
    [
        pytest.param({"rule": "self.size() > 0", "message": "must not be empty"}, id="no-name"),
        pytest.param({"rule": "self.size() > 0", "message": "must not be empty", RULE_NAME_KEY: "nope"}, id="unknown"),
        pytest.param(
            {
                "rule": "self.size() > 0",
                "message": "cpu must be a non-negative quantity",
                RULE_NAME_KEY: "cpu-non-negative-quantity",
            },
            id="other-cel",
        ),
    ],
)
def test_a_schema_rule_without_a_python_twin_is_a_loud_error(validation: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "x-kubernetes-validations": [validation]}}}

    with pytest.raises(RuleTwinError):
        rule_errors({"x": "value"}, schema)


def test_two_rules_of_the_same_name_are_refused_when_the_registry_is_built() -> None:
    cpu, _ = QUANTITY_RULES
    with pytest.raises(RuleTwinError, match="cpu-non-negative-quantity"):
        _by_name([cpu, cpu])


# --- Structural schema ------------------------------------------------------------------------------------------


def test_every_schema_node_has_a_type_or_is_int_or_string(schema: dict[str, Any]) -> None:
    untyped = []
    for path, node in _nodes(schema):
        if node.get("x-kubernetes-int-or-string"):
            if "type" in node or node.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
                untyped.append((path, "int-or-string must have no type and anyOf integer|string"))
        elif node.get("type") not in STRUCTURAL_TYPES:
            untyped.append((path, node.get("type")))

    assert untyped == []


def _all_keys_and_values(node: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from _all_keys_and_values(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _all_keys_and_values(value, f"{path}/{index}")


def test_the_schema_has_no_refs_nulls_or_unions_beyond_int_or_string(schema: dict[str, Any]) -> None:
    problems = []
    for path, key, value in _all_keys_and_values(schema):
        if key in {"$ref", "$defs", "definitions", "oneOf", "allOf", "not", "nullable"} or value is None:
            problems.append((path, key))
        if key == "type" and value == "null":
            problems.append((path, "type: null"))
    problems += [
        (path, "anyOf")
        for path, node in _nodes(schema)
        if "anyOf" in node and not node.get("x-kubernetes-int-or-string")
    ]

    assert problems == []


def test_list_map_keys_are_required_in_their_items(schema: dict[str, Any]) -> None:
    list_maps = [(path, node) for path, node in _nodes(schema) if node.get("x-kubernetes-list-type") == "map"]

    assert list_maps, "status.conditions is a list-map keyed by type"
    for path, node in list_maps:
        assert set(node["x-kubernetes-list-map-keys"]) <= set(node["items"].get("required", [])), path


def test_integer_options_are_int32(schema: dict[str, Any]) -> None:
    options = schema["properties"]["spec"]["properties"]["categories"]["items"]["properties"]["options"]["properties"]
    integers = {name: node for name, node in options.items() if node.get("type") == "integer"}

    assert len(integers) == 15
    assert all(node.get("format") == "int32" and node.get("maximum") == 2**31 - 1 for node in integers.values())


# --- Names and columns ------------------------------------------------------------------------------------------


def test_the_short_names_do_not_clash_with_cert_manager(crd: dict[str, Any]) -> None:
    names = crd["spec"]["names"]

    assert names["shortNames"]
    assert not {"cert", "certs"} & set(names["shortNames"])
    assert {names["plural"], names["singular"]}.isdisjoint({"certificates", "certificate"})


@pytest.mark.parametrize(
    ("name", "json_path", "column_type"),
    [
        pytest.param("Result", ".status.result", "string", id="result"),
        pytest.param("Passed", ".status.passed", "string", id="passed"),
        pytest.param("Failed Nodes", ".status.failedNodes", "integer", id="failed-nodes"),
        pytest.param("Age", ".metadata.creationTimestamp", "date", id="age"),
    ],
)
def test_a_printer_column_shows_a_status_field(
    crd: dict[str, Any], schema: dict[str, Any], name: str, json_path: str, column_type: str
) -> None:
    [version] = crd["spec"]["versions"]
    columns = {column["name"]: column for column in version["additionalPrinterColumns"]}

    assert (columns[name]["jsonPath"], columns[name]["type"]) == (json_path, column_type)
    if json_path.startswith(".status."):
        field = schema["properties"]["status"]["properties"][json_path.removeprefix(".status.")]
        assert field["type"] == column_type


def test_the_status_is_a_subresource(crd: dict[str, Any]) -> None:
    [version] = crd["spec"]["versions"]

    assert version["subresources"] == {"status": {}}


# --- The corpus against the OpenAPI schema ----------------------------------------------------------------------

KEYWORD_KINDS = {
    "minimum": "minimum",
    "maximum": "maximum",
    "pattern": "pattern",
    "maxLength": "max-length",
    "minLength": "min-length",
    "minItems": "min-items",
    "maxItems": "max-items",
    "maxProperties": "max-items",
    "enum": "enum",
    "type": "type",
    "anyOf": "type",  # int-or-string: neither an integer nor a string
    "required": "required",
}


def _without_kubernetes_extensions(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _without_kubernetes_extensions(value)
            for key, value in node.items()
            if not key.startswith("x-kubernetes-")
        }
    if isinstance(node, list):
        return [_without_kubernetes_extensions(value) for value in node]
    return node


def _go_pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """`pattern` as the API server's Go regexp reads it: `$` is the end of the text, not "before a final newline"."""
    del schema
    if validator.is_type(instance, "string") and not re.search(re.sub(r"(?<!\\)\$", r"\\Z", pattern), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


GoDraft7Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": _go_pattern})


@pytest.fixture(scope="module")
def validator(schema: dict[str, Any]) -> Any:
    plain = _without_kubernetes_extensions(schema)
    jsonschema.Draft7Validator.check_schema(plain)
    return GoDraft7Validator(plain)


def _format_instance_path(schema: dict[str, Any], elements: list[str | int]) -> str:
    """jsonschema's instance path in the loader's spelling: map keys (additionalProperties) in brackets."""
    path: list[PathElement] = []
    node = schema
    for element in elements:
        if isinstance(element, int):
            path.append(element)
            node = node.get("items", {})
        elif element in node.get("properties", {}):
            path.append(element)
            node = node["properties"][element]
        elif isinstance(node.get("additionalProperties"), dict):
            path.append(MapKey(element))
            node = node["additionalProperties"]
        else:
            path.append(element)
            node = {}
    return format_path(path)


def _schema_errors(validator: Any, schema: dict[str, Any], document: dict[str, Any]) -> set[tuple[str, str]]:
    """The `(path, kind)` pairs the OpenAPI schema reports, with the API server's (go-openapi) precedence."""
    found: set[tuple[str, str]] = set()
    for error in validator.iter_errors(document):
        elements = list(error.absolute_path)
        if error.validator == "required":
            missing = [name for name in error.validator_value if name not in error.instance]
            found |= {(_format_instance_path(schema, [*elements, name]), "required") for name in missing}
        else:
            found.add((_format_instance_path(schema, elements), KEYWORD_KINDS[str(error.validator)]))
    # go-openapi checks a string's length before its pattern and stops at the first failure; a wrong type
    # makes every other check on that value moot.
    for path, kind in list(found):
        if kind in {"max-length", "min-length"}:
            found.discard((path, "pattern"))
        if kind == "type":
            found -= {(other, other_kind) for other, other_kind in found if other == path and other_kind != "type"}
    return found


def _crd_enforced(expected: frozenset[tuple[str, str]]) -> set[tuple[str, str]]:
    """The expected pairs the CRD schema itself enforces (metadata is validated by the API server, not the CRD)."""
    return {(path, kind) for path, kind in expected if kind in SCHEMA_KINDS and not path.startswith("metadata")}


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in VALID])
def test_a_valid_corpus_document_passes_the_openapi_schema(validator: Any, schema: dict[str, Any], case: Case) -> None:
    assert _schema_errors(validator, schema, case.document) == set()


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in INVALID])
def test_the_openapi_schema_reports_the_schema_errors_of_an_invalid_document(
    validator: Any, schema: dict[str, Any], case: Case
) -> None:
    assert _schema_errors(validator, schema, case.document) == _crd_enforced(case.expected)


def test_the_schema_cross_check_covers_most_invalid_documents() -> None:
    """Guard against a vacuous cross-check: most invalid cases must be schema errors, not only rules."""
    schema_only = [case for case in INVALID if case.expected and case.expected == _crd_enforced(case.expected)]

    assert len(schema_only) > len(INVALID) // 2
