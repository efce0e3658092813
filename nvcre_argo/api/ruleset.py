"""Every CEL rule of the Certification CRD, found by its CEL text.

The loader walks a raw document along the CRD schema and applies the Python twin of each rule it meets,
exactly where the API server would evaluate the CEL, so a document with several problems gets all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from nvcre_argo.api.labels import (
    QUEUE_LABEL_KEY_PREFIX_RULE,
    QUEUE_LABEL_KEY_RESERVED_RULE,
    WORKLOAD_LABEL_RULES,
)
from nvcre_argo.api.options import NIC_DOMAIN_RULE, QUANTITY_RULES, RESOURCE_RULES
from nvcre_argo.api.rules import Rule

RULES_BY_CEL: Mapping[str, Rule] = MappingProxyType(
    {
        rule.cel: rule
        for rule in (
            *WORKLOAD_LABEL_RULES,
            QUEUE_LABEL_KEY_PREFIX_RULE,
            QUEUE_LABEL_KEY_RESERVED_RULE,
            NIC_DOMAIN_RULE,
            *RESOURCE_RULES,
            *QUANTITY_RULES,
        )
    }
)
