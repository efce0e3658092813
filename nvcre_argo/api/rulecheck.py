"""Apply the CRD's CEL rules (their Python twins) to a raw document, where the API server would.

pydantic stops checking a value once one of its constraints fails, but the API server evaluates every CEL
rule whose value has the right type, regardless of pattern or minimum failures elsewhere. Walking the raw
document along the structural schema reproduces that, so a document with several problems reports them all.
The schema must be the loader's copy, whose rules carry their names (`certification_schema(rule_names=True)`):
each rule's twin is found by name, and a rule without one is an error, never skipped.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo.api.ruleset import twin_of
from nvcre_argo.errors import FieldError, MapKey, Path, PathElement

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
}


def _has_schema_type(value: Any, schema: dict[str, Any]) -> bool:
    """CEL only runs on a value the schema's type check accepts (booleans are not integers)."""
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    expected = _TYPES.get(schema.get("type", ""))
    if expected is None:
        return True
    if expected == (int,) and isinstance(value, bool):
        return False
    return isinstance(value, expected)


def rule_errors(value: Any, schema: dict[str, Any], path: Path = ()) -> list[FieldError]:
    """Every CEL-rule violation in `value` (a raw JSON/YAML value) under `schema`, in document order."""
    if not _has_schema_type(value, schema):
        return []
    errors: list[FieldError] = []
    for validation in schema.get("x-kubernetes-validations", []):
        rule = twin_of(validation)
        for keys in rule.violations(value):
            where: tuple[PathElement, ...] = (*path, MapKey(keys[0])) if keys else path
            errors.append(FieldError(where, "rule", rule.message))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if not isinstance(key, str):
                continue
            if key in properties:
                errors += rule_errors(child, properties[key], (*path, key))
            elif isinstance(extra, dict):
                errors += rule_errors(child, extra, (*path, MapKey(key)))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, child in enumerate(value):
            errors += rule_errors(child, schema["items"], (*path, index))
    return errors
