"""Generate the Certification CustomResourceDefinition from the pydantic models.

Why generate: the models are what the offline loader enforces, so deriving the CRD's structural schema from
them (types, minimums, patterns, enums, CEL rules with their messages) means the two cannot drift; a test
compares this function's output with the committed `crds/` file. The conversion rewrites pydantic's JSON
Schema into the Kubernetes structural dialect: references inlined, `null` branches dropped, `int-or-string`
kept as the one allowed `anyOf`, titles and null defaults removed. Each CEL rule's name (its identity, see
`api/ruleset.py`) is kept only in the loader's copy of the schema: the API server knows no such field.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo.api.certification import GROUP, KIND, PLURAL, VERSION, Certification
from nvcre_argo.api.options import INT32_MAX
from nvcre_argo.api.rules import RULE_NAME_KEY

SHORT_NAMES = ["nvcert"]
CATEGORIES = ["nvcre"]
CRD_FILE_NAME = f"{GROUP}_{PLURAL}.yaml"

_DROPPED_KEYS = {"title", "default", "$defs"}
_LIST_MAP_FIELDS = {"conditions": ["type"]}

PRINTER_COLUMNS = [
    {"name": "Result", "type": "string", "jsonPath": ".status.result", "description": "PASSED, FAILED, ..."},
    {
        "name": "Passed",
        "type": "string",
        "jsonPath": ".status.passed",
        "description": "Categories passed/total.",
    },
    {
        "name": "Failed Nodes",
        "type": "integer",
        "jsonPath": ".status.failedNodes",
        "description": "Distinct nodes that failed in any category.",
    },
    {
        "name": "Excluded",
        "type": "integer",
        "jsonPath": ".status.excludedNodes",
        "description": "Target nodes left out of the run.",
        "priority": 1,
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _resolve(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """Inline a `$ref`, keeping the referring node's own keys (its description wins)."""
    if "$ref" not in schema:
        return schema
    target = definitions[schema["$ref"].rsplit("/", 1)[-1]]
    merged = {**_resolve(target, definitions), **{k: v for k, v in schema.items() if k != "$ref"}}
    return merged


def _drop_null_branch(schema: dict[str, Any]) -> dict[str, Any]:
    """`X | None` becomes X: absence, not null, is how Kubernetes says "unset"."""
    branches = schema.get("anyOf")
    if not branches or schema.get("x-kubernetes-int-or-string"):
        return schema
    kept = [branch for branch in branches if branch.get("type") != "null"]
    if len(kept) != 1:
        return schema
    outer = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **outer}


def to_structural(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """One pydantic JSON Schema node as a Kubernetes structural schema node."""
    node = _drop_null_branch(_resolve(schema, definitions))
    node = _resolve(node, definitions)
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "properties":
            result["properties"] = {
                name: _with_list_semantics(name, to_structural(child, definitions)) for name, child in value.items()
            }
        elif key == "items":
            result["items"] = to_structural(value, definitions)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                result["additionalProperties"] = to_structural(value, definitions)
        elif key == "anyOf":
            result["anyOf"] = [{"type": branch["type"]} for branch in value]
        elif key == "required":
            result["required"] = sorted(value)
        else:
            result[key] = value
    if "properties" in result or "additionalProperties" in result:
        result["type"] = "object"
    if result.get("type") == "integer" and result.get("maximum") == INT32_MAX:
        result["format"] = "int32"
    return dict(sorted(result.items()))


def _with_list_semantics(name: str, node: dict[str, Any]) -> dict[str, Any]:
    if name in _LIST_MAP_FIELDS and node.get("type") == "array":
        return {**node, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": _LIST_MAP_FIELDS[name]}
    return node


def _without_rule_names(node: Any) -> Any:
    """The schema as the API server takes it: every `x-kubernetes-validations` entry without its rule name."""
    if isinstance(node, list):
        return [_without_rule_names(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: [{k: v for k, v in rule.items() if k != RULE_NAME_KEY} for rule in value]
        if key == "x-kubernetes-validations"
        else _without_rule_names(value)
        for key, value in node.items()
    }


def certification_schema(*, rule_names: bool = False) -> dict[str, Any]:
    """The openAPIV3Schema of the Certification CRD; with `rule_names`, the loader's copy, in which each CEL
    rule also names its Python twin."""
    raw = Certification.model_json_schema(by_alias=True)
    definitions = raw.get("$defs", {})
    properties = raw["properties"]
    schema = {
        "description": "Certification is a suite of certification categories to run against a GPU node pool.",
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "Versioned schema of this object."},
            "kind": {"type": "string", "description": "REST resource this object represents."},
            "metadata": {"type": "object"},
            "spec": to_structural(properties["spec"], definitions),
            "status": to_structural(properties["status"], definitions),
        },
    }
    return schema if rule_names else _without_rule_names(schema)


def build_crd() -> dict[str, Any]:
    """The complete CustomResourceDefinition, as committed in `crds/`."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": SHORT_NAMES,
                "categories": CATEGORIES,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": certification_schema()},
                }
            ],
        },
    }
