"""pydantic's validation errors in the project's words: a stable kind and a message a person can act on.

Raw pydantic text never reaches a user (CONVENTIONS); this is the one translation, shared by the
Certification loader and the catalog loader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import ErrorDetails

_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}


def describe_pydantic_error(detail: ErrorDetails, schema: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, message) in the project's words for one pydantic error; `schema` is the structural schema node
    of the value (for enum values and the expected type), or empty."""
    kind = detail["type"]
    ctx: dict[str, Any] = dict(detail.get("ctx") or {})
    value = detail.get("input")
    if kind == "missing":
        return "required", "required field is missing"
    if kind == "extra_forbidden":
        return "unknown-field", "unknown field"
    if kind in ("greater_than_equal", "greater_than"):
        return "minimum", f"must be >= {ctx.get('ge', ctx.get('gt'))}, got {describe_value(value)}"
    if kind in ("less_than_equal", "less_than"):
        return "maximum", f"must be <= {ctx.get('le', ctx.get('lt'))}, got {describe_value(value)}"
    if kind == "string_pattern_mismatch":
        return "pattern", f"must match {ctx['pattern']}, got {describe_value(value)}"
    if kind == "string_too_long":
        return "max-length", f"must be at most {ctx['max_length']} characters, got {len(str(value))}"
    if kind == "string_too_short":
        return "min-length", f"must be at least {ctx['min_length']} character(s) long, got {describe_value(value)}"
    if kind == "too_short":
        return "min-items", f"must have at least {ctx['min_length']} item(s), got {ctx.get('actual_length')}"
    if kind == "too_long":
        noun = "entries" if isinstance(value, dict) else "items"
        return "max-items", f"must have at most {ctx['max_length']} {noun}, got {len(value)}"
    if kind == "literal_error":
        allowed = ", ".join(json.dumps(item) for item in schema.get("enum", [])) or ctx.get("expected", "")
        return "enum", f"must be one of {allowed}, got {describe_value(value)}"
    if kind == "rule":
        return "rule", detail["msg"]
    if kind == "invalid_key":
        return "type", f"map keys must be strings, got {describe_value(value)}"
    if kind in _TYPE_NAMES:
        expected = _expected_type(schema) or _TYPE_NAMES[kind]
        return "type", f"must be {expected}, got {describe_value(value)}"
    return "invalid", detail["msg"]


def _expected_type(schema: Mapping[str, Any]) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        return "an integer or a string"
    names = {
        "integer": "an integer",
        "string": "a string",
        "boolean": "a boolean",
        "object": "a mapping",
        "array": "a list",
    }
    return names.get(schema.get("type", ""))


def describe_value(value: Any) -> str:
    """A short, safe rendering of a user value for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:77] + "..."
        return f"string {json.dumps(shown)}"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
