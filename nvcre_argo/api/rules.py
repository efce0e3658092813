"""Validation rules written once and enforced twice: as CEL in the CRD and in Python by the loader.

Why: the API server is the judge of what a cluster accepts, but users compile offline. Each rule carries its
CEL text (placed in the CRD's `x-kubernetes-validations`) and a Python predicate with the same meaning and the
reference's exact message, so `nvcre-argo validate` and `kubectl apply` accept and reject the same documents.
Predicates take the JSON form of the value (what CEL sees), so the loader can also apply them to the raw
document, as the API server does, even where another check of the same value failed. A test compares both on
the whole corpus against a real API server.

Each rule has a `name`, unique among the CRD's rules, that the generated schema carries next to the CEL (under
`RULE_NAME_KEY`, stripped from the CRD itself) so the loader finds a rule's Python twin by identity. CEL text
is not an identity: the cpu and memory quantity rules share theirs and differ only in their message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

RULE_ERROR = "rule"
RULE_NAME_KEY = "x-nvcre-rule-name"
"""Where a schema's `x-kubernetes-validations` entry names its rule; only in the loader's copy of the schema."""


@dataclass(frozen=True)
class ValueRule:
    """A rule over a whole value: CEL `cel` must hold, Python `holds(value)` says the same."""

    name: str
    cel: str
    message: str
    holds: Callable[[Any], bool]

    def violations(self, value: Any) -> list[tuple[str, ...]]:
        return [] if self.holds(value) else [()]


@dataclass(frozen=True)
class KeyRule:
    """A rule every key of a map must satisfy: CEL `self.all(k, predicate)`; errors point at the key."""

    name: str
    predicate: str
    message: str
    holds: Callable[[str], bool]

    @property
    def cel(self) -> str:
        return f"self.all(k, {self.predicate})"

    def violations(self, value: Mapping[str, Any]) -> list[tuple[str, ...]]:
        return [(key,) for key in value if not self.holds(key)]


Rule = ValueRule | KeyRule


def cel_schema(*rules: Rule) -> dict[str, Any]:
    """The CRD fragment for these rules, each entry naming its rule (the CRD generator drops the name)."""
    return {
        "x-kubernetes-validations": [
            {"rule": rule.cel, "message": rule.message, RULE_NAME_KEY: rule.name} for rule in rules
        ]
    }


def check_rules(value: Any, rules: tuple[Rule, ...]) -> Any:
    """Apply every rule; all broken ones are raised together so the user sees each problem at once.

    The error's context carries `violations`: one `(message, offending map keys)` pair per broken rule, which
    the loader expands into one FieldError per key (or one for the whole value when no key is named).
    """
    violations = []
    for rule in rules:
        offending = rule.violations(value)
        if offending:
            violations.append((rule.message, [path[0] for path in offending if path]))
    if violations:
        raise PydanticCustomError(RULE_ERROR, violations[0][0], {"violations": violations})
    return value


def enforced(*rules: Rule) -> tuple[Any, ...]:
    """Annotations for `Annotated[T, *enforced(...)]`: the Python check plus the CRD's CEL."""
    return (
        AfterValidator(lambda value: check_rules(value, rules)),
        Field(json_schema_extra=cel_schema(*rules)),
    )
