"""The Certification document corpus: valid and invalid documents with the `(path, kind)` pairs they must produce.

Pure data, so the same documents can be checked by the offline loader (tests/unit), by the CRD's OpenAPI schema
(jsonschema), and by a real API server (tests/integration). Every document is a small valid base with one
mutation applied, and every expected pair is written from the reference's rules (nvcre-contract.md §3.2-§3.5,
§4), not copied from the loader's output.

Kinds: required, unknown-field, minimum, maximum, pattern, max-length, min-length, min-items, max-items, enum,
type (schema-level, also enforced by the CRD's OpenAPI schema); rule (a CEL rule in the CRD);
api-version, kind (the document header).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

INT32_MAX = 2**31 - 1
SPEC = "spec"
OPTIONS = "spec.categories[1].options"
LEVELS = ((SPEC, "spec"), (OPTIONS, "options"))
"""Where an option can be set: globally, and per category (index 1 on purpose, so indices show in paths)."""

SCHEMA_KINDS = frozenset(
    {"required", "minimum", "maximum", "pattern", "max-length", "min-length", "min-items", "max-items", "enum", "type"}
)
"""Kinds the CRD's OpenAPI schema itself enforces (as opposed to CEL rules, pruning and the header)."""
KINDS = SCHEMA_KINDS | {"unknown-field", "rule", "syntax", "empty", "api-version", "kind"}
"""Every kind the loader documents; anything else (such as a fallback for an unforeseen pydantic error) is a bug."""

BASE: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "corpus", "namespace": "nvcre"},
    "spec": {
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "categories": [
            {"domain": "communication", "variant": "nccl-all-reduce"},
            {"domain": "training", "variant": "nemotron5-8b", "options": {"maxSteps": 50}},
        ],
    },
}
"""The smallest interesting valid document: two categories, the second with an options block."""

SEED_EXAMPLE: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "gpu-cluster-cert", "namespace": "nvcre"},
    "spec": {
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "enableMNNVL": False,
        "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "high-priority"},
        "categories": [
            {"domain": "communication", "variant": "nccl-all-reduce"},
            {
                "domain": "training",
                "variant": "nemotron5-8b",
                "options": {
                    "maxSteps": 50,
                    "nodesPerJob": 8,
                    "resources": {
                        "limits": {"cpu": "6", "memory": "48Gi"},
                        "requests": {"cpu": "4", "memory": "32Gi"},
                    },
                },
            },
        ],
    },
}
"""The reference's documented example (seed-certification-page.txt), as data."""

EVERY_OPTION: dict[str, Any] = {
    "nodesPerJob": 2,
    "enableCheckpoint": True,
    "maxSteps": -1,
    "exitDurationMins": 30,
    "startupStallTimeoutSeconds": 1200,
    "gpusPerNode": 8,
    "mlnxPerNode": 0,
    "nicResourceName": "nvidia.com/mlnxnics",
    "resources": {"limits": {"cpu": 128, "memory": "800Gi"}, "requests": {"cpu": "64", "memory": "500Gi"}},
    "enableMNNVL": True,
    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
    "imagePullSecrets": [{"name": "regcred"}],
    "storageClassName": "fast-rwx",
    "saveInterval": 250,
    "saveRetainInterval": 1000,
    "saveTopK": 1,
    "storageSize": "10Ti",
    "maxRestarts": 3,
    "repeatCount": 2,
    "testScale": "diagnose",
    "maxBytes": "32G",
    "numIterations": 100,
    "numCycles": 10,
    "thresholds": {"busBandwidthGBps": "value >= 300"},
    "maxConcurrent": 0,
    "minGroupSize": 2,
    "timeoutPerJob": "1h30m",
    "measurementTimeout": "5m",
    "sourceRepo": "https://git.example.com/mirrors/Megatron-LM.git",
    "workloadMetadata": {"labels": {"kueue.x-k8s.io/queue-name": "gpu-team-a", "environment": ""}},
    "placement": "Unpinned",
    "rdmaDeviceAccess": "hostPath",
}
"""A legal value for every CategoryOptions field."""


@dataclass(frozen=True)
class Case:
    """One document and the exact `(path, kind)` pairs validating it must report (none for a valid one)."""

    id: str
    document: dict[str, Any] = field(repr=False)
    expected: frozenset[tuple[str, str]] = frozenset()


Mutation = Callable[[dict[str, Any]], None]
_TOKEN = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\["([^"]*)"\]')


def parse_path(path: str) -> list[str | int]:
    """`spec.categories[1].options` / `labels["a/b"]` (the spelling errors use) → keys and indices."""
    elements: list[str | int] = []
    position = 0
    while position < len(path):
        match = _TOKEN.match(path, position)
        if not match:
            raise ValueError(f"bad path {path!r} at {position}")
        name, index, key = match.groups()
        elements.append(int(index) if index is not None else (name if name is not None else key))
        position = match.end()
    return elements


def _parent(document: dict[str, Any], elements: list[str | int]) -> Any:
    node: Any = document
    for element in elements[:-1]:
        if isinstance(element, str) and element not in node:
            node[element] = {}
        node = node[element]
    return node


def mutate(path: str, value: Any) -> Mutation:
    """Set the value at `path`, creating missing mappings on the way."""

    def apply(document: dict[str, Any]) -> None:
        elements = parse_path(path)
        _parent(document, elements)[elements[-1]] = copy.deepcopy(value)

    return apply


def delete(path: str) -> Mutation:
    """Remove the field at `path`."""

    def apply(document: dict[str, Any]) -> None:
        elements = parse_path(path)
        del _parent(document, elements)[elements[-1]]

    return apply


def build(*mutations: Mutation, base: dict[str, Any] | None = None) -> dict[str, Any]:
    document = copy.deepcopy(BASE if base is None else base)
    for apply in mutations:
        apply(document)
    return document


def valid(case_id: str, *mutations: Mutation, base: dict[str, Any] | None = None) -> Case:
    return Case(case_id, build(*mutations, base=base))


def invalid(case_id: str, *mutations: Mutation, expected: Iterable[tuple[str, str]]) -> Case:
    pairs = frozenset(expected)
    assert pairs, f"{case_id}: an invalid case must expect at least one error"
    return Case(case_id, build(*mutations), pairs)


def _labels(count: int) -> dict[str, str]:
    return {f"label-{index:02d}": "v" for index in range(count)}


def _categories(count: int) -> list[dict[str, str]]:
    return [{"domain": "communication", "variant": f"variant-{index}"} for index in range(count)]


# --- Integer options: every minimum, its boundary, and int32 overflow, at both levels ---------------------------

INT_MINIMUMS = {
    "nodesPerJob": 1,
    "maxSteps": -1,
    "exitDurationMins": 1,
    "startupStallTimeoutSeconds": 1,
    "gpusPerNode": 1,
    "mlnxPerNode": 0,
    "saveInterval": 1,
    "saveRetainInterval": 1,
    "saveTopK": 1,
    "maxRestarts": 0,
    "repeatCount": 1,
    "numIterations": 1,
    "numCycles": 1,
    "maxConcurrent": 0,
    "minGroupSize": 1,
}


def _integer_cases() -> tuple[list[Case], list[Case]]:
    good, bad = [], []
    for prefix, level in LEVELS:
        for name, minimum in INT_MINIMUMS.items():
            path = f"{prefix}.{name}"
            good.append(valid(f"{level}-{name}-at-minimum-{minimum}", mutate(path, minimum)))
            good.append(valid(f"{level}-{name}-at-int32-max", mutate(path, INT32_MAX)))
            bad.append(
                invalid(
                    f"{level}-{name}-below-minimum-{minimum - 1}",
                    mutate(path, minimum - 1),
                    expected=[(path, "minimum")],
                )
            )
            bad.append(
                invalid(f"{level}-{name}-overflows-int32", mutate(path, INT32_MAX + 1), expected=[(path, "maximum")])
            )
    return good, bad


# --- Patterns, enums and lengths of string options, at both levels ---------------------------------------------

STRING_OPTIONS: dict[str, tuple[dict[str, str], dict[str, tuple[str, str]]]] = {
    # field: ({case suffix: valid value}, {case suffix: (invalid value, kind)})
    "storageSize": (
        {"10Ti": "10Ti", "decimal-1.5Gi": "1.5Gi", "plain-bytes": "500"},
        {
            "decimal-unit-TB": ("10TB", "pattern"),
            "lowercase-ti": ("10ti", "pattern"),
            "dot-without-fraction": ("1.Gi", "pattern"),
            "negative": ("-1Gi", "pattern"),
            "space-before-unit": ("10 Gi", "pattern"),
            "trailing-newline": ("10Ti\n", "pattern"),
            "empty": ("", "pattern"),
        },
    ),
    "maxBytes": (
        {"16G": "16G", "plain-bytes": "1024"},
        {
            "GB-suffix": ("16GB", "pattern"),
            "lowercase-g": ("16g", "pattern"),
            "binary-Gi": ("16Gi", "pattern"),
            "empty": ("", "pattern"),
        },
    ),
    "timeoutPerJob": (
        {"1h": "1h", "1h30m": "1h30m", "250ms": "250ms", "90s": "90s"},
        {
            "days": ("1d", "pattern"),
            "fractional-hours": ("1.5h", "pattern"),
            "unit-without-number": ("h", "pattern"),
            "number-without-unit": ("90", "pattern"),
            "negative": ("-1h", "pattern"),
            "uppercase-H": ("1H", "pattern"),
            "space-inside": ("1h 30m", "pattern"),
            "empty": ("", "pattern"),
        },
    ),
    "measurementTimeout": (
        {"5m": "5m", "2m30s": "2m30s"},
        {"words": ("5 minutes", "pattern"), "number-without-unit": ("5", "pattern"), "empty": ("", "pattern")},
    ),
    "sourceRepo": (
        {
            "https": "https://git.example.com/mirrors/Megatron-LM.git",
            "ssh-with-user": "ssh://git@git.example.com/mirrors/Megatron-LM.git",
            "https-port-and-escape": "https://git.example.com:8443/mirrors/Megatron%2BLM.git",
        },
        {
            "http": ("http://git.example.com/mirrors/Megatron-LM.git", "pattern"),
            "git-protocol": ("git://git.example.com/mirrors/Megatron-LM.git", "pattern"),
            "scp-style-git-at-host-colon-path": ("git@github.com:NVIDIA/Megatron-LM.git", "pattern"),
            "file-url": ("file:///srv/Megatron-LM", "pattern"),
            "semicolon": ("https://git.example.com/x;rm", "pattern"),
            "command-substitution": ("https://git.example.com/$(id)", "pattern"),
            "backticks": ("https://git.example.com/`id`", "pattern"),
            "pipe": ("https://git.example.com/x|sh", "pattern"),
            "ampersand": ("https://git.example.com/x&y", "pattern"),
            "single-quote": ("https://git.example.com/x'y", "pattern"),
            "redirect": ("https://git.example.com/x>y", "pattern"),
            "space": ("https://git.example.com/a b", "pattern"),
            "tab": ("https://git.example.com/a\tb", "pattern"),
            "trailing-newline": ("https://git.example.com/a\n", "pattern"),
            "over-2048-characters": ("https://git.example.com/" + "a" * (2049 - 24), "max-length"),
        },
    ),
    "nicResourceName": (
        {
            "rdma-ib": "rdma/ib",
            "nvidia-mlnxnics": "nvidia.com/mlnxnics",
            "domain-merely-ending-in-k8s.io": "notk8s.io/rdma",
            "k8s.io-not-the-last-labels": "k8s.io.example.com/rdma",
            "253-characters": "a" * 249 + "/bcd",
        },
        {
            "no-slash": ("rdma", "pattern"),
            "uppercase-domain": ("RDMA/ib", "pattern"),
            "empty-name": ("rdma/", "pattern"),
            "two-slashes": ("rdma/ib/x", "pattern"),
            "name-starts-with-dash": ("rdma/-ib", "pattern"),
            "kubernetes.io-domain": ("kubernetes.io/ib", "rule"),
            "k8s.io-domain": ("k8s.io/ib", "rule"),
            "subdomain-of-k8s.io": ("foo.k8s.io/x", "rule"),
            "subdomain-of-kubernetes.io": ("sub.kubernetes.io/x", "rule"),
            "254-characters": ("a" * 250 + "/bcd", "max-length"),
        },
    ),
    "image": (
        {"512-characters": "a" * 512, "registry-path": "nvcr.io/nvidia/pytorch:25.01-py3"},
        {"empty": ("", "min-length"), "513-characters": ("a" * 513, "max-length")},
    ),
    "testScale": (
        {"intra-node": "intra-node", "intra-rack": "intra-rack", "diagnose": "diagnose", "full-scale": "full-scale"},
        {"full": ("full", "enum"), "wrong-case": ("Full-Scale", "enum"), "underscore": ("intra_node", "enum")},
    ),
    "placement": (
        {"Pinned": "Pinned", "Unpinned": "Unpinned"},
        {"lowercase": ("pinned", "enum"), "unknown": ("Floating", "enum")},
    ),
    "rdmaDeviceAccess": (
        {"hostPath": "hostPath", "devicePlugin": "devicePlugin"},
        {"wrong-case": ("HostPath", "enum"), "unknown": ("privileged", "enum")},
    ),
}


def _string_cases() -> tuple[list[Case], list[Case]]:
    good, bad = [], []
    for prefix, level in LEVELS:
        for name, (accepted, rejected) in STRING_OPTIONS.items():
            path = f"{prefix}.{name}"
            good.extend(valid(f"{level}-{name}-{suffix}", mutate(path, value)) for suffix, value in accepted.items())
            bad.extend(
                invalid(f"{level}-{name}-{suffix}", mutate(path, value), expected=[(path, kind)])
                for suffix, (value, kind) in rejected.items()
            )
    return good, bad


# --- Types, resources and workload labels, at both levels --------------------------------------------------------


def _option_cases() -> tuple[list[Case], list[Case]]:
    good, bad = [], []
    for prefix, level in LEVELS:
        resources = f"{prefix}.resources"
        labels = f"{prefix}.workloadMetadata.labels"
        good += [
            valid(f"{level}-imagePullSecrets-list", mutate(f"{prefix}.imagePullSecrets", [{"name": "regcred"}])),
            valid(f"{level}-thresholds-map", mutate(f"{prefix}.thresholds", {"busBandwidthGBps": "value >= 300"})),
            valid(
                f"{level}-booleans", mutate(f"{prefix}.enableCheckpoint", True), mutate(f"{prefix}.enableMNNVL", False)
            ),
            # resources
            valid(f"{level}-resources-as-strings", mutate(resources, {"limits": {"cpu": "6", "memory": "48Gi"}})),
            valid(
                f"{level}-resources-cpu-as-integers", mutate(resources, {"limits": {"cpu": 6}, "requests": {"cpu": 4}})
            ),
            valid(f"{level}-resources-zero", mutate(resources, {"limits": {"cpu": 0, "memory": "0"}})),
            valid(
                f"{level}-resources-request-equals-limit-across-forms",
                mutate(
                    resources, {"limits": {"cpu": 1, "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}}
                ),
            ),
            valid(f"{level}-resources-request-without-limit", mutate(resources, {"requests": {"cpu": "999"}})),
            valid(f"{level}-resources-32-characters", mutate(f"{resources}.limits.memory", "0" * 28 + "64Gi")),
            # workload labels
            valid(f"{level}-labels-32", mutate(labels, _labels(32))),
            valid(f"{level}-labels-empty-value", mutate(labels, {"environment": ""})),
            valid(f"{level}-labels-63-character-value", mutate(labels, {"environment": "v" * 63})),
            valid(
                f"{level}-labels-longest-key",
                mutate(labels, {"a" * 253 + "/" + "b" * 63: "x"}),
            ),
            valid(
                f"{level}-labels-kueue-and-kai-queues",
                mutate(labels, {"kueue.x-k8s.io/queue-name": "q", "kai.scheduler/queue": "burn-in"}),
            ),
        ]
        bad += [
            # wrong types
            invalid(
                f"{level}-nodesPerJob-string",
                mutate(f"{prefix}.nodesPerJob", "8"),
                expected=[(f"{prefix}.nodesPerJob", "type")],
            ),
            invalid(
                f"{level}-nodesPerJob-fraction",
                mutate(f"{prefix}.nodesPerJob", 1.5),
                expected=[(f"{prefix}.nodesPerJob", "type")],
            ),
            invalid(
                f"{level}-nodesPerJob-boolean",
                mutate(f"{prefix}.nodesPerJob", True),
                expected=[(f"{prefix}.nodesPerJob", "type")],
            ),
            invalid(f"{level}-image-integer", mutate(f"{prefix}.image", 5), expected=[(f"{prefix}.image", "type")]),
            invalid(
                f"{level}-storageClassName-integer",
                mutate(f"{prefix}.storageClassName", 5),
                expected=[(f"{prefix}.storageClassName", "type")],
            ),
            invalid(
                f"{level}-enableCheckpoint-string",
                mutate(f"{prefix}.enableCheckpoint", "true"),
                expected=[(f"{prefix}.enableCheckpoint", "type")],
            ),
            invalid(
                f"{level}-enableMNNVL-string",
                mutate(f"{prefix}.enableMNNVL", "false"),
                expected=[(f"{prefix}.enableMNNVL", "type")],
            ),
            invalid(
                f"{level}-imagePullSecrets-map-for-list",
                mutate(f"{prefix}.imagePullSecrets", {"name": "regcred"}),
                expected=[(f"{prefix}.imagePullSecrets", "type")],
            ),
            invalid(
                f"{level}-imagePullSecrets-unknown-field",
                mutate(f"{prefix}.imagePullSecrets", [{"nmae": "regcred"}]),
                expected=[(f"{prefix}.imagePullSecrets[0].nmae", "unknown-field")],
            ),
            invalid(
                f"{level}-thresholds-list-for-map",
                mutate(f"{prefix}.thresholds", ["busBandwidthGBps"]),
                expected=[(f"{prefix}.thresholds", "type")],
            ),
            invalid(
                f"{level}-thresholds-number-for-expression",
                mutate(f"{prefix}.thresholds", {"busBandwidthGBps": 300}),
                expected=[(f'{prefix}.thresholds["busBandwidthGBps"]', "type")],
            ),
            invalid(
                f"{level}-workloadMetadata-list-for-map",
                mutate(labels, ["environment=burn-in"]),
                expected=[(labels, "type")],
            ),
            invalid(
                f"{level}-workloadMetadata-unknown-field",
                mutate(f"{prefix}.workloadMetadata.annotations", {"a": "b"}),
                expected=[(f"{prefix}.workloadMetadata.annotations", "unknown-field")],
            ),
            # resources: non-negative quantities
            invalid(
                f"{level}-resources-negative-cpu-string",
                mutate(f"{resources}.limits.cpu", "-1"),
                expected=[(f"{resources}.limits.cpu", "rule")],
            ),
            invalid(
                f"{level}-resources-negative-cpu-integer",
                mutate(f"{resources}.requests.cpu", -1),
                expected=[(f"{resources}.requests.cpu", "rule")],
            ),
            invalid(
                f"{level}-resources-negative-memory",
                mutate(f"{resources}.limits.memory", "-1Gi"),
                expected=[(f"{resources}.limits.memory", "rule")],
            ),
            invalid(
                f"{level}-resources-memory-not-a-quantity",
                mutate(f"{resources}.requests.memory", "lots"),
                expected=[(f"{resources}.requests.memory", "rule")],
            ),
            invalid(
                f"{level}-resources-memory-GB-is-not-a-quantity",
                mutate(f"{resources}.limits.memory", "1GB"),
                expected=[(f"{resources}.limits.memory", "rule")],
            ),
            invalid(
                # Go's regexp (CEL's isQuantity) has no "$ matches before a final newline" rule, unlike Python's re.
                f"{level}-resources-memory-trailing-newline",
                mutate(f"{resources}.limits.memory", "1Gi\n"),
                expected=[(f"{resources}.limits.memory", "rule")],
            ),
            invalid(
                f"{level}-resources-cpu-fraction-number",
                mutate(f"{resources}.limits.cpu", 1.5),
                expected=[(f"{resources}.limits.cpu", "type")],
            ),
            invalid(
                f"{level}-resources-33-characters",
                mutate(f"{resources}.limits.memory", "0" * 29 + "64Gi"),
                expected=[(f"{resources}.limits.memory", "max-length")],
            ),
            invalid(
                f"{level}-resources-unknown-gpu",
                mutate(f"{resources}.limits.gpu", 8),
                expected=[(f"{resources}.limits.gpu", "unknown-field")],
            ),
            invalid(
                f"{level}-resources-misspelt-limits",
                mutate(f"{resources}.limit", {"cpu": "6"}),
                expected=[(f"{resources}.limit", "unknown-field")],
            ),
            # resources: request <= limit
            invalid(
                f"{level}-resources-cpu-request-above-limit-strings",
                mutate(resources, {"limits": {"cpu": "6"}, "requests": {"cpu": "8"}}),
                expected=[(resources, "rule")],
            ),
            invalid(
                f"{level}-resources-cpu-request-above-limit-integers",
                mutate(resources, {"limits": {"cpu": 6}, "requests": {"cpu": 8}}),
                expected=[(resources, "rule")],
            ),
            invalid(
                f"{level}-resources-cpu-request-above-limit-millicores",
                mutate(resources, {"limits": {"cpu": 1}, "requests": {"cpu": "1001m"}}),
                expected=[(resources, "rule")],
            ),
            invalid(
                f"{level}-resources-memory-request-above-limit",
                mutate(resources, {"limits": {"memory": "48Gi"}, "requests": {"memory": "64Gi"}}),
                expected=[(resources, "rule")],
            ),
            invalid(
                f"{level}-resources-memory-request-above-limit-across-units",
                mutate(resources, {"limits": {"memory": "1Gi"}, "requests": {"memory": "1025Mi"}}),
                expected=[(resources, "rule")],
            ),
            # workload labels
            invalid(
                f"{level}-labels-reserved-managed-by",
                mutate(labels, {"app.kubernetes.io/managed-by": "me"}),
                expected=[(f'{labels}["app.kubernetes.io/managed-by"]', "rule")],
            ),
            invalid(
                f"{level}-labels-reserved-nvcre-prefix",
                mutate(labels, {"nvcre.nvidia.com/anything": "x"}),
                expected=[(f'{labels}["nvcre.nvidia.com/anything"]', "rule")],
            ),
            invalid(
                f"{level}-labels-key-with-space",
                mutate(labels, {"bad key": "x"}),
                expected=[(f'{labels}["bad key"]', "rule")],
            ),
            invalid(
                f"{level}-labels-key-starts-with-dash",
                mutate(labels, {"-env": "x"}),
                expected=[(f'{labels}["-env"]', "rule")],
            ),
            invalid(
                f"{level}-labels-key-name-64-characters",
                mutate(labels, {"n" * 64: "x"}),
                expected=[(f'{labels}["{"n" * 64}"]', "rule")],
            ),
            invalid(
                f"{level}-labels-key-two-slashes",
                mutate(labels, {"a/b/c": "x"}),
                expected=[(f'{labels}["a/b/c"]', "rule")],
            ),
            invalid(
                f"{level}-labels-key-trailing-newline",
                mutate(labels, {"env\n": "x"}),
                expected=[(f"{labels}[{json.dumps('env' + chr(10))}]", "rule")],
            ),
            invalid(
                f"{level}-labels-key-uppercase-prefix",
                mutate(labels, {"Example.com/env": "x"}),
                expected=[(f'{labels}["Example.com/env"]', "rule")],
            ),
            invalid(
                f"{level}-labels-key-prefix-254-characters",
                mutate(labels, {"a" * 254 + "/env": "x"}),
                expected=[(f'{labels}["{"a" * 254}/env"]', "rule")],
            ),
            invalid(
                f"{level}-labels-value-with-space",
                mutate(labels, {"environment": "burn in"}),
                expected=[(f'{labels}["environment"]', "pattern")],
            ),
            invalid(
                f"{level}-labels-value-ends-with-dash",
                mutate(labels, {"environment": "burn-"}),
                expected=[(f'{labels}["environment"]', "pattern")],
            ),
            invalid(
                f"{level}-labels-value-64-characters",
                mutate(labels, {"environment": "v" * 64}),
                expected=[(f'{labels}["environment"]', "max-length")],
            ),
            invalid(
                f"{level}-labels-value-number",
                mutate(labels, {"environment": 1}),
                expected=[(f'{labels}["environment"]', "type")],
            ),
            invalid(f"{level}-labels-33", mutate(labels, _labels(33)), expected=[(labels, "max-items")]),
            # options that exist only at spec level
            *(
                [
                    invalid(
                        f"{level}-{name}-is-spec-only",
                        mutate(f"{prefix}.{name}", value),
                        expected=[(f"{prefix}.{name}", "unknown-field")],
                    )
                    for name, value in (
                        ("target", {}),
                        ("gangScheduler", {"schedulerName": "kai-scheduler"}),
                        ("categories", []),
                    )
                ]
                if prefix == OPTIONS
                else []
            ),
        ]
    return good, bad


# --- Spec-only fields: categories, target, gangScheduler ---------------------------------------------------------

_SPEC_VALID = [
    valid("base-document"),
    valid("seed-example", base=SEED_EXAMPLE),
    valid(
        "every-option-at-both-levels", mutate("spec", {**BASE["spec"], **EVERY_OPTION}), mutate(OPTIONS, EVERY_OPTION)
    ),
    valid("categories-1", mutate("spec.categories", _categories(1))),
    valid("categories-64", mutate("spec.categories", _categories(64))),
    valid("categories-options-empty", mutate(OPTIONS, {})),
    valid("target-empty", mutate("spec.target", {})),
    valid(
        "target-every-filter",
        mutate(
            "spec.target",
            {
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "matchExpressions": [
                    {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]},
                    {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"},
                ],
                "nodeNames": ["gpu-node-1", "gpu-node-2"],
                "taintSelectors": [
                    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {"key": "dedicated", "value": "", "effect": ""},
                    {"key": "node.kubernetes.io/unschedulable"},
                ],
            },
        ),
    ),
    valid(
        "taintSelectors-every-effect",
        mutate(
            "spec.target.taintSelectors",
            [{"key": "k", "effect": effect} for effect in ("NoSchedule", "PreferNoSchedule", "NoExecute")],
        ),
    ),
    valid(
        "matchExpressions-every-operator",
        mutate(
            "spec.target.matchExpressions",
            [
                {"key": "k", "operator": "In", "values": ["a"]},
                {"key": "k", "operator": "NotIn", "values": ["b"]},
                {"key": "k", "operator": "Exists"},
                {"key": "k", "operator": "DoesNotExist"},
            ],
        ),
    ),
    valid("gangScheduler-name-only", mutate("spec.gangScheduler", {"schedulerName": "kai-scheduler"})),
    valid(
        "gangScheduler-runai",
        mutate(
            "spec.gangScheduler",
            {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue", "queue": "team-a"},
        ),
    ),
    valid("gangScheduler-queue-empty", mutate("spec.gangScheduler", {"schedulerName": "k", "queue": ""})),
    valid("gangScheduler-queue-63-characters", mutate("spec.gangScheduler", {"schedulerName": "k", "queue": "q" * 63})),
    valid(
        "gangScheduler-queue-dots-underscores",
        mutate("spec.gangScheduler", {"schedulerName": "k", "queue": "team.a_b-1"}),
    ),
    valid(
        "gangScheduler-queueLabelKey-empty", mutate("spec.gangScheduler", {"schedulerName": "k", "queueLabelKey": ""})
    ),
    valid(
        "gangScheduler-queueLabelKey-no-prefix",
        mutate("spec.gangScheduler", {"schedulerName": "k", "queueLabelKey": "queue"}),
    ),
    valid(
        "gangScheduler-queueLabelKey-317-characters",
        mutate("spec.gangScheduler", {"schedulerName": "k", "queueLabelKey": "a" * 253 + "/" + "b" * 63}),
    ),
    valid(
        "metadata-carries-server-fields",
        mutate("metadata", {"name": "c", "labels": {"team": "a"}, "annotations": {"a": "b"}, "finalizers": ["x"]}),
    ),
]

_GANG = "spec.gangScheduler"
_SPEC_INVALID = [
    # header
    invalid(
        "apiVersion-wrong-version",
        mutate("apiVersion", "nvcre.nvidia.com/v1"),
        expected=[("apiVersion", "api-version")],
    ),
    invalid("apiVersion-missing", delete("apiVersion"), expected=[("apiVersion", "api-version")]),
    invalid("kind-wrong", mutate("kind", "Certificate"), expected=[("kind", "kind")]),
    invalid(
        "apiVersion-and-kind-wrong",
        mutate("apiVersion", "v1"),
        mutate("kind", "ConfigMap"),
        expected=[("apiVersion", "api-version"), ("kind", "kind")],
    ),
    # required fields and document shape
    invalid("spec-missing", delete("spec"), expected=[("spec", "required")]),
    invalid("spec-list-for-map", mutate("spec", []), expected=[("spec", "type")]),
    invalid("target-missing", delete("spec.target"), expected=[("spec.target", "required")]),
    invalid("target-list-for-map", mutate("spec.target", []), expected=[("spec.target", "type")]),
    invalid("categories-missing", delete("spec.categories"), expected=[("spec.categories", "required")]),
    invalid("categories-0", mutate("spec.categories", []), expected=[("spec.categories", "min-items")]),
    invalid("categories-65", mutate("spec.categories", _categories(65)), expected=[("spec.categories", "max-items")]),
    invalid(
        "categories-map-for-list",
        mutate("spec.categories", {"communication": "nccl-all-reduce"}),
        expected=[("spec.categories", "type")],
    ),
    invalid(
        "categories-string-item",
        mutate("spec.categories[0]", "communication"),
        expected=[("spec.categories[0]", "type")],
    ),
    invalid(
        "category-domain-missing",
        delete("spec.categories[0].domain"),
        expected=[("spec.categories[0].domain", "required")],
    ),
    invalid(
        "category-variant-missing",
        delete("spec.categories[1].variant"),
        expected=[("spec.categories[1].variant", "required")],
    ),
    invalid(
        "category-domain-integer",
        mutate("spec.categories[0].domain", 5),
        expected=[("spec.categories[0].domain", "type")],
    ),
    invalid("category-options-list", mutate(OPTIONS, [{"maxSteps": 5}]), expected=[(OPTIONS, "type")]),
    # target
    invalid(
        "nodeSelector-unquoted-boolean-value",
        mutate("spec.target.nodeSelector", {"nvidia.com/gpu.present": True}),
        expected=[('spec.target.nodeSelector["nvidia.com/gpu.present"]', "type")],
    ),
    invalid(
        "nodeSelector-list-for-map",
        mutate("spec.target.nodeSelector", ["a=b"]),
        expected=[("spec.target.nodeSelector", "type")],
    ),
    invalid(
        "nodeNames-string-for-list",
        mutate("spec.target.nodeNames", "gpu-node-1"),
        expected=[("spec.target.nodeNames", "type")],
    ),
    invalid(
        "nodeNames-integer-item",
        mutate("spec.target.nodeNames", ["a", 7]),
        expected=[("spec.target.nodeNames[1]", "type")],
    ),
    invalid(
        "matchExpressions-operator-Gt",
        mutate("spec.target.matchExpressions", [{"key": "k", "operator": "Gt", "values": ["1"]}]),
        expected=[("spec.target.matchExpressions[0].operator", "enum")],
    ),
    invalid(
        "matchExpressions-operator-lowercase",
        mutate("spec.target.matchExpressions", [{"key": "k", "operator": "in", "values": ["a"]}]),
        expected=[("spec.target.matchExpressions[0].operator", "enum")],
    ),
    invalid(
        "matchExpressions-operator-missing",
        mutate("spec.target.matchExpressions", [{"key": "k"}]),
        expected=[("spec.target.matchExpressions[0].operator", "required")],
    ),
    invalid(
        "matchExpressions-unknown-field",
        mutate("spec.target.matchExpressions", [{"key": "k", "operator": "In", "value": "a"}]),
        expected=[("spec.target.matchExpressions[0].value", "unknown-field")],
    ),
    invalid(
        "taintSelectors-effect-unknown",
        mutate("spec.target.taintSelectors", [{"key": "k"}, {"key": "k", "effect": "NoSchedul"}]),
        expected=[("spec.target.taintSelectors[1].effect", "enum")],
    ),
    invalid(
        "taintSelectors-key-empty",
        mutate("spec.target.taintSelectors", [{"key": ""}]),
        expected=[("spec.target.taintSelectors[0].key", "min-length")],
    ),
    invalid(
        "taintSelectors-key-missing",
        mutate("spec.target.taintSelectors", [{"effect": "NoSchedule"}]),
        expected=[("spec.target.taintSelectors[0].key", "required")],
    ),
    invalid(
        "taintSelectors-unknown-field",
        mutate("spec.target.taintSelectors", [{"key": "k", "operator": "Exists"}]),
        expected=[("spec.target.taintSelectors[0].operator", "unknown-field")],
    ),
    # gangScheduler
    invalid(
        "gangScheduler-schedulerName-missing",
        mutate(_GANG, {"queue": "q"}),
        expected=[(f"{_GANG}.schedulerName", "required")],
    ),
    invalid(
        "gangScheduler-schedulerName-empty",
        mutate(_GANG, {"schedulerName": ""}),
        expected=[(f"{_GANG}.schedulerName", "min-length")],
    ),
    invalid(
        "gangScheduler-schedulerName-list",
        mutate(_GANG, {"schedulerName": ["kai"]}),
        expected=[(f"{_GANG}.schedulerName", "type")],
    ),
    invalid("gangScheduler-string-for-map", mutate(_GANG, "kai-scheduler"), expected=[(_GANG, "type")]),
    invalid(
        "gangScheduler-unknown-field",
        mutate(_GANG, {"schedulerName": "k", "queueName": "q"}),
        expected=[(f"{_GANG}.queueName", "unknown-field")],
    ),
    invalid(
        "gangScheduler-queue-64-characters",
        mutate(_GANG, {"schedulerName": "k", "queue": "q" * 64}),
        expected=[(f"{_GANG}.queue", "max-length")],
    ),
    invalid(
        "gangScheduler-queue-with-space",
        mutate(_GANG, {"schedulerName": "k", "queue": "high priority"}),
        expected=[(f"{_GANG}.queue", "pattern")],
    ),
    invalid(
        "gangScheduler-queue-starts-with-dash",
        mutate(_GANG, {"schedulerName": "k", "queue": "-team"}),
        expected=[(f"{_GANG}.queue", "pattern")],
    ),
    invalid(
        "gangScheduler-queue-slash",
        mutate(_GANG, {"schedulerName": "k", "queue": "team/a"}),
        expected=[(f"{_GANG}.queue", "pattern")],
    ),
    invalid(
        "gangScheduler-queueLabelKey-with-space",
        mutate(_GANG, {"schedulerName": "k", "queueLabelKey": "Not A Key"}),
        expected=[(f"{_GANG}.queueLabelKey", "pattern")],
    ),
    invalid(
        "gangScheduler-queueLabelKey-empty-name",
        mutate(_GANG, {"schedulerName": "k", "queueLabelKey": "example.com/"}),
        expected=[(f"{_GANG}.queueLabelKey", "pattern")],
    ),
    invalid(
        "gangScheduler-queueLabelKey-reserved-managed-by",
        mutate(_GANG, {"schedulerName": "k", "queueLabelKey": "app.kubernetes.io/managed-by"}),
        expected=[(f"{_GANG}.queueLabelKey", "rule")],
    ),
    invalid(
        "gangScheduler-queueLabelKey-reserved-nvcre-prefix",
        mutate(_GANG, {"schedulerName": "k", "queueLabelKey": "nvcre.nvidia.com/queue"}),
        expected=[(f"{_GANG}.queueLabelKey", "rule")],
    ),
    invalid(
        "gangScheduler-queueLabelKey-prefix-254-characters",
        mutate(_GANG, {"schedulerName": "k", "queueLabelKey": "a" * 254 + "/queue"}),
        expected=[(f"{_GANG}.queueLabelKey", "rule")],
    ),
    invalid(
        "gangScheduler-queueLabelKey-318-characters",
        mutate(_GANG, {"schedulerName": "k", "queueLabelKey": "a" * 254 + "/" + "b" * 63}),
        # The prefix (254) also breaks the prefix rule; the API server evaluates CEL despite maxLength.
        expected=[(f"{_GANG}.queueLabelKey", "max-length"), (f"{_GANG}.queueLabelKey", "rule")],
    ),
    # unknown fields at several depths
    invalid("unknown-top-level-field", mutate("specification", {}), expected=[("specification", "unknown-field")]),
    invalid("unknown-spec-field", mutate("spec.nodesperjob", 2), expected=[("spec.nodesperjob", "unknown-field")]),
    invalid(
        "unknown-target-field",
        mutate("spec.target.nodeSelectors", {"a": "b"}),
        expected=[("spec.target.nodeSelectors", "unknown-field")],
    ),
    invalid(
        "unknown-category-field",
        mutate("spec.categories[0].optoins", {"maxSteps": 5}),
        expected=[("spec.categories[0].optoins", "unknown-field")],
    ),
    invalid(
        "unknown-option-field",
        mutate(f"{OPTIONS}.nodesPerjob", 2),
        expected=[(f"{OPTIONS}.nodesPerjob", "unknown-field")],
    ),
    invalid("metadata-name-integer", mutate("metadata.name", 5), expected=[("metadata.name", "type")]),
    # Several independent problems in one document: every one is reported. Only kinds that do not stop the API
    # server from evaluating CEL rules (minimum, pattern, rule), so a real API server reports all of them too.
    invalid(
        "several-problems-at-once",
        mutate("spec.nodesPerJob", 0),
        mutate("spec.storageSize", "10TB"),
        mutate(f"{OPTIONS}.workloadMetadata.labels", {"nvcre.nvidia.com/job": "x"}),
        mutate(f"{OPTIONS}.resources", {"limits": {"memory": "48Gi"}, "requests": {"memory": "64Gi"}}),
        mutate(_GANG, {"schedulerName": "kai-scheduler", "queue": "high priority"}),
        expected=[
            ("spec.nodesPerJob", "minimum"),
            ("spec.storageSize", "pattern"),
            (f'{OPTIONS}.workloadMetadata.labels["nvcre.nvidia.com/job"]', "rule"),
            (f"{OPTIONS}.resources", "rule"),
            (f"{_GANG}.queue", "pattern"),
        ],
    ),
]


def _collect() -> tuple[list[Case], list[Case]]:
    good, bad = list(_SPEC_VALID), list(_SPEC_INVALID)
    for more_good, more_bad in (_integer_cases(), _string_cases(), _option_cases()):
        good += more_good
        bad += more_bad
    for cases in (good, bad):
        ids = [case.id for case in cases]
        duplicates = sorted({case_id for case_id in ids if ids.count(case_id) > 1})
        assert not duplicates, f"duplicate corpus ids: {duplicates}"
    return good, bad


VALID, INVALID = _collect()
