"""Every CEL rule of the Certification CRD, found by its name (its identity), never by its CEL text.

The loader walks a raw document along the CRD schema and applies the Python twin of each rule it meets,
exactly where the API server would evaluate the CEL, so a document with several problems gets all of them.
Why by name: two rules may share CEL text and differ in their message (the cpu and memory quantity rules
do), so a lookup by text would apply the wrong twin, or both. A schema rule without a twin is a bug in the
models, so `twin_of` raises instead of skipping it (a skipped rule would let `validate` accept what the API
server refuses); a test checks every rule of the generated CRD has exactly one twin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from nvcre_argo.api.labels import (
    QUEUE_LABEL_KEY_PREFIX_RULE,
    QUEUE_LABEL_KEY_RESERVED_RULE,
    WORKLOAD_LABEL_RULES,
)
from nvcre_argo.api.options import NIC_DOMAIN_RULE, QUANTITY_RULES, RESOURCE_RULES
from nvcre_argo.api.rules import RULE_NAME_KEY, Rule
from nvcre_argo.api.spec import SPEC_IMMUTABLE_RULE


class RuleTwinError(LookupError):
    """A CEL rule in the schema has no Python twin (or a twin that says something else): a bug, not bad input."""


def _by_name(rules: Iterable[Rule]) -> Mapping[str, Rule]:
    named: dict[str, Rule] = {}
    for rule in rules:
        if rule.name in named:
            raise RuleTwinError(f"two CEL rules are named {rule.name!r}; each rule needs its own name")
        named[rule.name] = rule
    return MappingProxyType(named)


RULES_BY_NAME: Mapping[str, Rule] = _by_name(
    (
        *WORKLOAD_LABEL_RULES,
        QUEUE_LABEL_KEY_PREFIX_RULE,
        QUEUE_LABEL_KEY_RESERVED_RULE,
        NIC_DOMAIN_RULE,
        *RESOURCE_RULES,
        *QUANTITY_RULES,
        SPEC_IMMUTABLE_RULE,
    )
)


def twin_of(validation: Mapping[str, Any]) -> Rule:
    """The Python twin of one `x-kubernetes-validations` entry of the loader's schema; raises RuleTwinError
    when the entry names no registered rule or its rule's CEL or message differs from the entry's."""
    name = validation.get(RULE_NAME_KEY)
    rule = RULES_BY_NAME.get(name) if isinstance(name, str) else None
    if rule is None:
        raise RuleTwinError(
            f"the CRD rule {validation.get('rule')!r} ({validation.get('message')!r}) has no Python twin: "
            f"build it with nvcre_argo.api.rules.cel_schema and register it in {__name__}"
        )
    if (rule.cel, rule.message) != (validation.get("rule"), validation.get("message")):
        raise RuleTwinError(f"the CRD rule named {name!r} is not the registered rule of that name")
    return rule
