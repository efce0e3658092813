"""Kubernetes name and label syntax, and the workload-label rules of the Certification API.

One module so the CRD, the offline loader, the compiler and the resolver (which re-checks the merged label set,
queue label included) share the same patterns, limits and messages. The `*_problems` functions are the offline
twins of apimachinery's `IsDNS1123Subdomain`, `IsDNS1123Label`, `IsQualifiedName` and `IsValidLabelValue`: they
return Kubernetes' own wording (without the regular expression), so an invalid name fails here, with a field
path, rather than on the cluster hours later.
"""

from __future__ import annotations

import re

from nvcre_argo.api.rules import KeyRule, ValueRule

MANAGED_BY_KEY = "app.kubernetes.io/managed-by"
RESERVED_PREFIX = "nvcre.nvidia.com/"
MAX_WORKLOAD_LABELS = 32

LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^$|^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
LABEL_VALUE_MAX_LENGTH = 63
LABEL_KEY_PREFIX_MAX_LENGTH = 253

_LABEL_KEY = re.compile(LABEL_KEY_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN_FORMAT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_FORMAT = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_NAME_PART_FORMAT = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FORMAT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def dns1123_subdomain_problems(value: str) -> list[str]:
    """Why `value` is not a DNS-1123 subdomain (object names, Secret names, node names); empty when it is."""
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        problems.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        problems.append(_SUBDOMAIN_FORMAT)
    return problems


def dns1123_label_problems(value: str) -> list[str]:
    """Why `value` is not a DNS-1123 label (namespaces); empty when it is."""
    problems = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        problems.append(f"must be no more than {DNS1123_LABEL_MAX_LENGTH} characters")
    if not _DNS1123_LABEL.fullmatch(value):
        problems.append(_LABEL_FORMAT)
    return problems


def qualified_name_problems(value: str) -> list[str]:
    """Why `value` is not a qualified name (label, annotation and taint keys); empty when it is."""
    prefix, slash, name = value.rpartition("/")
    if value.count("/") > 1:
        return [
            f"a qualified name must be a name part with an optional DNS-subdomain prefix and '/' ({_NAME_PART_FORMAT})"
        ]
    problems = []
    if not name:
        problems.append("name part must be non-empty")
    else:
        if len(name) > DNS1123_LABEL_MAX_LENGTH:
            problems.append(f"name part must be no more than {DNS1123_LABEL_MAX_LENGTH} characters")
        if not _QUALIFIED_NAME_PART.fullmatch(name):
            problems.append(_NAME_PART_FORMAT)
    if slash and not prefix:
        problems.append("prefix part must be non-empty")
    elif slash:
        problems.extend(f"prefix part {problem}" for problem in dns1123_subdomain_problems(prefix))
    return problems


def label_value_problems(value: str) -> list[str]:
    """Why `value` is not a label value (label values, taint values); empty when it is."""
    problems = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        problems.append(f"must be no more than {LABEL_VALUE_MAX_LENGTH} characters")
    if value and not _QUALIFIED_NAME_PART.fullmatch(value):
        problems.append(_LABEL_VALUE_FORMAT)
    return problems


def is_reserved_label_key(key: str) -> bool:
    """Keys the controller owns on the workload object; users may not set them."""
    return key == MANAGED_BY_KEY or key.startswith(RESERVED_PREFIX)


def label_key_prefix_fits(key: str) -> bool:
    return "/" not in key or len(key.split("/", 1)[0]) <= LABEL_KEY_PREFIX_MAX_LENGTH


def is_label_key(key: str) -> bool:
    return bool(_LABEL_KEY.fullmatch(key))


def is_label_value(value: str) -> bool:
    return len(value) <= LABEL_VALUE_MAX_LENGTH and bool(_LABEL_VALUE.fullmatch(value))


def _cel_string(text: str) -> str:
    """A CEL single-quoted string literal (backslashes doubled) for a regular expression."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


RESERVED_LABELS_RULE = KeyRule(
    name="workload-label-key-reserved",
    predicate=f"k != '{MANAGED_BY_KEY}' && !k.startsWith('{RESERVED_PREFIX}')",
    message=(
        "labels must not set the controller-owned keys app.kubernetes.io/managed-by "
        "or any key under the nvcre.nvidia.com/ prefix"
    ),
    holds=lambda key: not is_reserved_label_key(key),
)
LABEL_KEY_SYNTAX_RULE = KeyRule(
    name="workload-label-key-syntax",
    predicate=f"k.matches({_cel_string(LABEL_KEY_PATTERN)})",
    message=(
        "each label key must be a valid Kubernetes label key: an optional DNS-subdomain prefix followed by "
        "'/', then a name of at most 63 characters beginning and ending with an alphanumeric character"
    ),
    holds=is_label_key,
)
LABEL_KEY_PREFIX_RULE = KeyRule(
    name="workload-label-key-prefix",
    predicate=f"!k.contains('/') || k.split('/')[0].size() <= {LABEL_KEY_PREFIX_MAX_LENGTH}",
    message="each label key prefix must be at most 253 characters",
    holds=label_key_prefix_fits,
)
WORKLOAD_LABEL_RULES = (RESERVED_LABELS_RULE, LABEL_KEY_SYNTAX_RULE, LABEL_KEY_PREFIX_RULE)

QUEUE_LABEL_KEY_PREFIX_RULE = ValueRule(
    name="queue-label-key-prefix",
    cel=f"!self.contains('/') || self.split('/')[0].size() <= {LABEL_KEY_PREFIX_MAX_LENGTH}",
    message="queueLabelKey prefix must be at most 253 characters",
    holds=label_key_prefix_fits,
)
QUEUE_LABEL_KEY_RESERVED_RULE = ValueRule(
    name="queue-label-key-reserved",
    cel=f"self != '{MANAGED_BY_KEY}' && !self.startsWith('{RESERVED_PREFIX}')",
    message=(
        "queueLabelKey must not use the controller-owned key app.kubernetes.io/managed-by "
        "or any key under the nvcre.nvidia.com/ prefix"
    ),
    holds=lambda key: not is_reserved_label_key(key),
)
