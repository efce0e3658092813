"""The failed-node and succeeded-node ConfigMaps: their keys, codecs and manifests.

Why they are byte for byte in the reference's layout (docs/nvcre-contract.md §3.7): tools that consume NVCRE
results (node-quarantine controllers such as NVSentinel's certification monitor) read these ConfigMaps, so
ours must decode the same way:
- `binaryData["failed-nodes.json.gz"]`: gzip of a compact JSON array (as Go's `json.Marshal` writes it) of
  `{"name", "reason", "message"}` objects in that key order,
  reason `HardwareFailureDetected` | `ThresholdViolation` | `WorkloadFailed`; a (node, reason) pair appears
  once (the first message is kept), sorted by (name, reason);
- `binaryData["succeeded-nodes.csv.gz"]`: gzip of one comma-joined line of node names (sorted, unique; node
  names never contain commas).
The gzip is deterministic (`codec.gzip_bytes`), so the same nodes always give the same bytes.

A diagnose category's failed-nodes ConfigMap also carries its isolation summary under a key of its own
(`diagnose`), which readers of the reference's key never see.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre_argo.results.codec import ResultsError, base64_text, configmap_binary, gunzip_bytes, gzip_bytes
from nvcre_argo.results.diagnose import DiagnoseRecord, diagnose_binary_data

HARDWARE_FAILURE_DETECTED: Final = "HardwareFailureDetected"
THRESHOLD_VIOLATION: Final = "ThresholdViolation"
WORKLOAD_FAILED: Final = "WorkloadFailed"
FAILURE_REASONS = (HARDWARE_FAILURE_DETECTED, THRESHOLD_VIOLATION, WORKLOAD_FAILED)
FAILED_NODES_KEY: Final = "failed-nodes.json.gz"
SUCCEEDED_NODES_KEY: Final = "succeeded-nodes.csv.gz"


@dataclass(frozen=True)
class FailedNode:
    """One (node, reason) failure. `reason` is checked on construction, so a FailedNode built from any source
    (a step's constant, a decoded JSON document) always encodes to a reason consumers know."""

    name: str
    reason: str
    message: str

    def __post_init__(self) -> None:
        if self.reason not in FAILURE_REASONS:
            raise ResultsError(f"unknown failure reason {self.reason!r}; known: {', '.join(FAILURE_REASONS)}")


def encode_failed_nodes(nodes: Iterable[FailedNode]) -> bytes:
    """Gzip of the JSON array, deduplicated by (name, reason) keeping the first message, sorted."""
    document = [_as_json(node) for node in unique_failed_nodes(nodes)]
    return gzip_bytes(json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode())


def unique_failed_nodes(nodes: Iterable[FailedNode]) -> list[FailedNode]:
    """One entry per (name, reason), the first message seen, sorted by (name, reason)."""
    first: dict[tuple[str, str], FailedNode] = {}
    for node in nodes:
        first.setdefault((node.name, node.reason), node)
    return [first[key] for key in sorted(first)]


def decode_failed_nodes(data: bytes) -> list[FailedNode]:
    """The inverse of `encode_failed_nodes`; ResultsError when the data is not that layout."""
    try:
        document = json.loads(gunzip_bytes(data, FAILED_NODES_KEY).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{FAILED_NODES_KEY}: not a JSON document: {error}") from None
    if not isinstance(document, list):
        raise ResultsError(f"{FAILED_NODES_KEY}: expected a JSON array, got {type(document).__name__}")
    return [_read_failed_node(index, item) for index, item in enumerate(document)]


def encode_succeeded_nodes(names: Iterable[str]) -> bytes:
    """Gzip of one comma-joined line of the sorted, unique node names (no trailing newline)."""
    unique = sorted(set(names))
    for name in unique:
        if "," in name or "\n" in name:
            raise ResultsError(f"{SUCCEEDED_NODES_KEY}: node name {name!r} cannot be written to a CSV line")
    return gzip_bytes(",".join(unique).encode())


def decode_succeeded_nodes(data: bytes) -> list[str]:
    """The inverse of `encode_succeeded_nodes` (a trailing newline and empty fields are tolerated)."""
    try:
        text = gunzip_bytes(data, SUCCEEDED_NODES_KEY).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultsError(f"{SUCCEEDED_NODES_KEY}: not UTF-8 text: {error}") from None
    return [name for name in (part.strip() for part in text.strip().split(",")) if name]


def failed_nodes_configmap_manifest(
    name: str,
    namespace: str,
    nodes: Iterable[FailedNode],
    owner_references: Sequence[Mapping[str, Any]] = (),
    labels: Mapping[str, str] | None = None,
    *,
    diagnose: DiagnoseRecord | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The failed-nodes ConfigMap manifest (`failed-nodes-<uid8>` in the reference's naming); a diagnose
    category's also carries its isolation summary under a key of its own (readers of the reference's key are
    unaffected)."""
    manifest = _configmap(
        name,
        namespace,
        FAILED_NODES_KEY,
        encode_failed_nodes(nodes),
        owner_references=owner_references,
        labels=labels,
        annotations=annotations,
    )
    if diagnose is not None:
        manifest["binaryData"] |= diagnose_binary_data(diagnose)
    return manifest


def succeeded_nodes_configmap_manifest(
    name: str,
    namespace: str,
    names: Iterable[str],
    owner_references: Sequence[Mapping[str, Any]] = (),
    labels: Mapping[str, str] | None = None,
    *,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The succeeded-nodes ConfigMap manifest (`succeeded-nodes-<uid8>` in the reference's naming)."""
    return _configmap(
        name,
        namespace,
        SUCCEEDED_NODES_KEY,
        encode_succeeded_nodes(names),
        owner_references=owner_references,
        labels=labels,
        annotations=annotations,
    )


def read_failed_nodes(configmap: Mapping[str, Any]) -> list[FailedNode]:
    """The failed nodes of a failed-nodes ConfigMap (none when the key is absent: nothing failed)."""
    data = configmap_binary(configmap, FAILED_NODES_KEY)
    return decode_failed_nodes(data) if data is not None else []


def read_succeeded_nodes(configmap: Mapping[str, Any]) -> list[str]:
    """The node names of a succeeded-nodes ConfigMap (none when the key is absent)."""
    data = configmap_binary(configmap, SUCCEEDED_NODES_KEY)
    return decode_succeeded_nodes(data) if data is not None else []


def _as_json(node: FailedNode) -> dict[str, str]:
    return {"name": node.name, "reason": node.reason, "message": node.message}


def _read_failed_node(index: int, item: Any) -> FailedNode:
    where = f"{FAILED_NODES_KEY}[{index}]"
    if not isinstance(item, dict):
        raise ResultsError(f"{where}: expected an object, got {type(item).__name__}")
    for field in ("name", "reason", "message"):
        if not isinstance(item.get(field), str):
            raise ResultsError(f"{where}.{field}: expected a string")
    if item["reason"] not in FAILURE_REASONS:
        raise ResultsError(f"{where}.reason: unknown reason {item['reason']!r}; known: {', '.join(FAILURE_REASONS)}")
    return FailedNode(item["name"], item["reason"], item["message"])


def _configmap(
    name: str,
    namespace: str,
    key: str,
    payload: bytes,
    *,
    owner_references: Sequence[Mapping[str, Any]],
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(sorted(labels.items()))
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    if owner_references:
        metadata["ownerReferences"] = [dict(reference) for reference in owner_references]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "binaryData": {key: base64_text(payload)},
    }
