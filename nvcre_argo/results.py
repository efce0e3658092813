"""Every result ConfigMap's keys and layout, in one place: the failed/succeeded-node ConfigMaps and the
per-group `result.json`.

Why one module: the steps write these ConfigMaps and the watcher and `report` read them; with the keys and
the parsing here, a writer and its readers cannot drift apart.

The failed-node and succeeded-node ConfigMaps are byte for byte in the reference's layout
(docs/nvcre-contract.md §3.7). Tools that consume NVCRE results (node-quarantine controllers such as
NVSentinel's certification monitor) read these ConfigMaps, so ours must decode the same way:
- `binaryData["failed-nodes.json.gz"]`: gzip of a compact JSON array (as Go's `json.Marshal` writes it) of
  `{"name", "reason", "message"}` objects in that key order,
  reason `HardwareFailureDetected` | `ThresholdViolation` | `WorkloadFailed`; a (node, reason) pair appears
  once (the first message is kept), sorted by (name, reason);
- `binaryData["succeeded-nodes.csv.gz"]`: gzip of one comma-joined line of node names (sorted, unique; node
  names never contain commas).
Gzip is at best compression with a zero timestamp and no file name, so the same nodes always give the same
bytes (a re-run of the record step writes an identical object and the update is a no-op).

A diagnose category's failed-nodes ConfigMap also holds `binaryData["diagnose.json.gz"]`, its isolation
summary (`DiagnoseRecord`: rounds, jobs, faults between domains, untested nodes, each round's groups).

Each node group's result is `binaryData["result.json.gz"]` of a ConfigMap labelled
`nvcre.nvidia.com/record=group-result` (one per group, rewritten after every iteration): gzip (deterministic)
of compact JSON `{"group", "nodes", "attempt", "iterations": [{"iteration", "trainjob", "succeeded",
"message", "failed_nodes": [{"name", "reason"[, "message"]}], "measurements": {key: number}, "restarts": [...]}]}`
(`restarts`, the checkpoint restarts of the iteration, is absent in results written before it existed). A failed
node's `message` is left out when it is its iteration's `message` (the usual case: a whole-group failure, or a
log tail shared by every rank that failed first), and read back as that message, so a group that blames all
of its 10,000 nodes writes one copy of a 4 KiB log tail, not 10,000: stored plain with one message per node,
a 4,096-node group passed the 1 MiB object limit and the API server refused it, losing the result. Readers
still accept the older form, `data["result.json"]` in plain JSON with every message written out.
`read_group_result` checks the shape, so a reader sees a typed record or a ResultsError, never a KeyError.

`sanitize_log_tail` makes the end of a pod log safe to carry in a message: bounded in bytes, cut on a
character boundary, with control characters (ANSI colour codes, carriage returns) escaped.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict

from nvcre_argo.errors import NvcreError

HARDWARE_FAILURE_DETECTED: Final = "HardwareFailureDetected"
THRESHOLD_VIOLATION: Final = "ThresholdViolation"
WORKLOAD_FAILED: Final = "WorkloadFailed"
FAILURE_REASONS = (HARDWARE_FAILURE_DETECTED, THRESHOLD_VIOLATION, WORKLOAD_FAILED)
FAILED_NODES_KEY: Final = "failed-nodes.json.gz"
SUCCEEDED_NODES_KEY: Final = "succeeded-nodes.csv.gz"
GROUP_RESULT_KEY: Final = "result.json.gz"
LEGACY_GROUP_RESULT_KEY: Final = "result.json"  # plain JSON in `data`, as written before compression
DIAGNOSE_KEY: Final = "diagnose.json.gz"
# Values of the `nvcre.nvidia.com/record` label: which kind of record a step's ConfigMap holds.
RECORD_PLAN: Final = "plan"
RECORD_GROUP_RESULT: Final = "group-result"
DEFAULT_LOG_LIMIT_BYTES = 4096
_KEEP = frozenset("\n\t")


class ResultsError(NvcreError):
    """ConfigMap data that is not in the documented layout."""


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
        document = json.loads(_gunzip(data, FAILED_NODES_KEY).decode("utf-8"))
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
        text = _gunzip(data, SUCCEEDED_NODES_KEY).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultsError(f"{SUCCEEDED_NODES_KEY}: not UTF-8 text: {error}") from None
    return [name for name in (part.strip() for part in text.strip().split(",")) if name]


PLATFORM_ANNOTATION: Final = "nvcre.nvidia.com/platform"
PLATFORM_ARMS_ANNOTATION: Final = "nvcre.nvidia.com/platform-arms"
GPU_ARCHITECTURE_ANNOTATION: Final = "nvcre.nvidia.com/gpu-architecture"


@dataclass(frozen=True)
class PlatformRecord:
    """What the plan found and applied, carried by both result ConfigMaps as annotations (the plan's own
    ConfigMap goes with its Workflow; these outlive it, so `nvcre-argo report` can still say which fabric
    settings the measurements were taken with). Annotations, so the reference's data keys stay as they are."""

    platform: str | None
    arms: tuple[str, ...]
    gpu_architecture: str | None

    def annotations(self) -> dict[str, str]:
        found = {
            PLATFORM_ANNOTATION: self.platform,
            PLATFORM_ARMS_ANNOTATION: ",".join(self.arms) if self.platform else None,
            GPU_ARCHITECTURE_ANNOTATION: self.gpu_architecture,
        }
        return {key: value for key, value in found.items() if value is not None}


def read_platform(configmap: Mapping[str, Any]) -> PlatformRecord | None:
    """The platform record of a result ConfigMap; None when it carries none (written before it existed)."""
    annotations = (configmap.get("metadata") or {}).get("annotations") or {}
    if PLATFORM_ANNOTATION not in annotations and GPU_ARCHITECTURE_ANNOTATION not in annotations:
        return None
    arms = str(annotations.get(PLATFORM_ARMS_ANNOTATION) or "")
    return PlatformRecord(
        platform=annotations.get(PLATFORM_ANNOTATION),
        arms=tuple(name for name in arms.split(",") if name),
        gpu_architecture=annotations.get(GPU_ARCHITECTURE_ANNOTATION),
    )


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


def diagnose_binary_data(record: DiagnoseRecord) -> dict[str, str]:
    """The extra `binaryData` a diagnose category's failed-nodes ConfigMap carries (see `DiagnoseRecord`)."""
    payload = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    return {DIAGNOSE_KEY: base64_text(gzip_bytes(payload))}


def read_diagnose(configmap: Mapping[str, Any]) -> DiagnoseRecord | None:
    """The isolation summary of a diagnose category's failed-nodes ConfigMap; None for any other category."""
    data = configmap_binary(configmap, DIAGNOSE_KEY)
    if data is None:
        return None
    try:
        document = json.loads(_gunzip(data, DIAGNOSE_KEY).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{DIAGNOSE_KEY}: not a JSON document: {error}") from None
    document = _expect(document, dict, DIAGNOSE_KEY)
    for key, kind in _DIAGNOSE_FIELDS.items():
        _expect(document.get(key), kind, f"{DIAGNOSE_KEY}.{key}")
    for index, fault in enumerate(document["infrastructureFaults"]):
        where = f"{DIAGNOSE_KEY}.infrastructureFaults[{index}]"
        for key, kind in (("domain", str), ("groupA", list), ("groupB", list), ("stage", str)):
            _expect(_expect(fault, dict, where).get(key), kind, f"{where}.{key}")
    for index, item in enumerate(document["untested"]):
        where = f"{DIAGNOSE_KEY}.untested[{index}]"
        for key in ("node", "reason"):
            _expect(_expect(item, dict, where).get(key), str, f"{where}.{key}")
    record: DiagnoseRecord = document  # checked field by field above
    return record


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


def configmap_binary(configmap: Mapping[str, Any], key: str) -> bytes | None:
    """`binaryData[key]` decoded from base64; None when the ConfigMap has no such key."""
    encoded = (configmap.get("binaryData") or {}).get(key)
    if not encoded:
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError as error:
        raise ResultsError(f"{key}: not base64 data: {error}") from None


def read_failed_nodes(configmap: Mapping[str, Any]) -> list[FailedNode]:
    """The failed nodes of a failed-nodes ConfigMap (none when the key is absent: nothing failed)."""
    data = configmap_binary(configmap, FAILED_NODES_KEY)
    return decode_failed_nodes(data) if data is not None else []


def read_succeeded_nodes(configmap: Mapping[str, Any]) -> list[str]:
    """The node names of a succeeded-nodes ConfigMap (none when the key is absent)."""
    data = configmap_binary(configmap, SUCCEEDED_NODES_KEY)
    return decode_succeeded_nodes(data) if data is not None else []


class InfrastructureFaultRecord(TypedDict):
    domain: str  # a domain, or "<a>|<b>" for the link between two domains
    groupA: list[str]
    groupB: list[str]
    stage: str


class UntestedRecord(TypedDict):
    node: str
    reason: str


class RoundGroupRecord(TypedDict):
    name: str
    stage: str
    nodes: int
    outcome: str  # passed | failed | below-threshold


class RoundRecord(TypedDict):
    round: int
    groups: list[RoundGroupRecord]


class DiagnoseRecord(TypedDict):
    """A diagnose category's isolation summary (`diagnose.json.gz` in its failed-nodes ConfigMap): what no
    failed-node list can say (faults between domains, nodes left untested) and how the rounds went."""

    rounds: int
    jobs: int
    nodeJobs: int
    faulty: list[str]
    healthy: int
    infrastructureFaults: list[InfrastructureFaultRecord]
    untested: list[UntestedRecord]
    history: list[RoundRecord]


_DIAGNOSE_FIELDS: Final[Mapping[str, type]] = {
    "rounds": int,
    "jobs": int,
    "nodeJobs": int,
    "faulty": list,
    "healthy": int,
    "infrastructureFaults": list,
    "untested": list,
    "history": list,
}


class FailedNodeRecord(TypedDict):
    name: str
    reason: str
    message: str


class RestartRecord(TypedDict):
    """A checkpoint restart within an iteration (`steps.restarts.Restart`)."""

    trainjob: str
    failure: str
    checkpoint_iteration: int
    lost_work_seconds: float
    reschedule_seconds: float | None
    resume_seconds: float | None
    resumed_from: int | None


class IterationRecord(TypedDict):
    iteration: int
    trainjob: str  # the workload that decided the iteration (the last restart's, when it was restarted)
    succeeded: bool
    message: str
    failed_nodes: list[FailedNodeRecord]
    measurements: dict[str, float]
    restarts: list[RestartRecord]  # empty unless a checkpointing workload was restarted


class GroupResultRecord(TypedDict):
    """One group's `result.json`, as the run step writes it (see the module docstring)."""

    group: str
    nodes: list[str]
    iterations: list[IterationRecord]
    attempt: int  # 1 unless the group was tested again (`argo retry`) after a finished run


def group_result_binary_data(record: Mapping[str, Any]) -> dict[str, str]:
    """A group-result ConfigMap's `binaryData` for `record` (a GroupResultRecord, or the same shape with
    failed-node messages written out): each message equal to its iteration's is left out (see the module
    docstring); `read_group_result` restores it."""
    document = {key: record[key] for key in sorted(record) if key != "iterations"}
    document["iterations"] = [_elide_messages(iteration) for iteration in record["iterations"]]
    payload = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    return {GROUP_RESULT_KEY: base64_text(gzip_bytes(payload))}


def _elide_messages(iteration: Mapping[str, Any]) -> dict[str, Any]:
    shared = iteration.get("message")
    failed = [
        {key: value for key, value in node.items() if key != "message" or value != shared}
        for node in iteration.get("failed_nodes") or []
    ]
    return {**iteration, "failed_nodes": failed}


def read_group_result(configmap: Mapping[str, Any]) -> GroupResultRecord:
    """The result of a group-result ConfigMap (compressed, or the older plain `data["result.json"]`),
    checked; ResultsError when it is missing or malformed."""
    data = configmap_binary(configmap, GROUP_RESULT_KEY)
    if data is not None:
        try:
            text = _gunzip(data, GROUP_RESULT_KEY).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ResultsError(f"{GROUP_RESULT_KEY}: not UTF-8 text: {error}") from None
        return parse_group_result(text, GROUP_RESULT_KEY)
    legacy = (configmap.get("data") or {}).get(LEGACY_GROUP_RESULT_KEY)
    if not isinstance(legacy, str):
        raise ResultsError(f"{GROUP_RESULT_KEY}: missing (and no {LEGACY_GROUP_RESULT_KEY} either)")
    return parse_group_result(legacy, LEGACY_GROUP_RESULT_KEY)


def parse_group_result(text: str, where: str = LEGACY_GROUP_RESULT_KEY) -> GroupResultRecord:
    """Result JSON text → a checked record (measurements become floats, elided messages restored); `where`
    names the key it came from in errors."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ResultsError(f"{where}: not a JSON document: {error}") from None
    document = _expect(document, dict, where)
    iterations = _expect(document.get("iterations"), list, f"{where}.iterations")
    return {
        "group": _expect(document.get("group"), str, f"{where}.group"),
        "nodes": [_expect(node, str, f"{where}.nodes[{i}]") for i, node in enumerate(_nodes(document, where))],
        "iterations": [_read_iteration(item, f"{where}.iterations[{i}]") for i, item in enumerate(iterations)],
        "attempt": _expect(document.get("attempt", 1), int, f"{where}.attempt"),
    }


def _nodes(document: Mapping[str, Any], where: str) -> list[Any]:
    nodes: list[Any] = _expect(document.get("nodes"), list, f"{where}.nodes")
    return nodes


def _read_iteration(item: Any, where: str) -> IterationRecord:
    item = _expect(item, dict, where)
    failed = _expect(item.get("failed_nodes", []), list, f"{where}.failed_nodes")
    measurements = _expect(item.get("measurements", {}), dict, f"{where}.measurements")
    message: str = _expect(item.get("message"), str, f"{where}.message")
    return {
        "iteration": _expect(item.get("iteration"), int, f"{where}.iteration"),
        "trainjob": _expect(item.get("trainjob"), str, f"{where}.trainjob"),
        "succeeded": _expect(item.get("succeeded"), bool, f"{where}.succeeded"),
        "message": message,
        "failed_nodes": [
            _read_failed_record(node, f"{where}.failed_nodes[{i}]", message) for i, node in enumerate(failed)
        ],
        "measurements": {
            str(key): float(_expect(value, (int, float), f"{where}.measurements[{key!r}]"))
            for key, value in measurements.items()
        },
        "restarts": [
            _read_restart(restart, f"{where}.restarts[{i}]")
            for i, restart in enumerate(_expect(item.get("restarts", []), list, f"{where}.restarts"))
        ],
    }


def _read_restart(item: Any, where: str) -> RestartRecord:
    item = _expect(item, dict, where)

    def optional(key: str, kind: type | tuple[type, ...]) -> Any:
        value = item.get(key)
        return None if value is None else _expect(value, kind, f"{where}.{key}")

    return {
        "trainjob": _expect(item.get("trainjob"), str, f"{where}.trainjob"),
        "failure": _expect(item.get("failure"), str, f"{where}.failure"),
        "checkpoint_iteration": _expect(item.get("checkpoint_iteration"), int, f"{where}.checkpoint_iteration"),
        "lost_work_seconds": float(_expect(item.get("lost_work_seconds"), (int, float), f"{where}.lost_work_seconds")),
        "reschedule_seconds": optional("reschedule_seconds", (int, float)),
        "resume_seconds": optional("resume_seconds", (int, float)),
        "resumed_from": optional("resumed_from", int),
    }


def _read_failed_record(item: Any, where: str, shared_message: str) -> FailedNodeRecord:
    """One failed node; an absent `message` is its iteration's (an explicit null is still an error)."""
    item = _expect(item, dict, where)
    if "message" not in item:
        item = {**item, "message": shared_message}
    node = FailedNode(*(_expect(item.get(key), str, f"{where}.{key}") for key in _FIELDS))
    return {"name": node.name, "reason": node.reason, "message": node.message}


_FIELDS = ("name", "reason", "message")


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """`value` when it is of `kind` (a bool is not a number here), else a ResultsError naming `where`."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(item.__name__ for item in kinds)
        raise ResultsError(f"{where}: expected {expected}, got {type(value).__name__}")
    return value


def sanitize_log_tail(text: str, limit_bytes: int = DEFAULT_LOG_LIMIT_BYTES) -> str:
    """The end of `text`, at most `limit_bytes` UTF-8 bytes once escaped, never cutting a character or an
    escape in half. Control characters other than newline and tab become `\\xNN` (C0, DEL, C1), and lone
    surrogates `\\udNNN`, so terminal escapes and carriage returns cannot garble what a person reads."""
    if limit_bytes < 0:
        raise ValueError(f"limit_bytes must be >= 0, got {limit_bytes}")
    pieces: list[str] = []
    budget = limit_bytes
    for character in reversed(text):
        piece = _escape(character)
        size = len(piece.encode("utf-8"))
        if size > budget:
            break
        pieces.append(piece)
        budget -= size
    return "".join(reversed(pieces))


def _escape(character: str) -> str:
    code = ord(character)
    if character in _KEEP:
        return character
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return character


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


def base64_text(data: bytes) -> str:
    """`binaryData` values are base64 text."""
    return base64.b64encode(data).decode("ascii")


def gzip_bytes(payload: bytes) -> bytes:
    """Deterministic gzip: level 9, mtime 0, no file name (GzipFile writes OS byte 255 on every platform)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buffer, mtime=0) as stream:
        stream.write(payload)
    return buffer.getvalue()


def _gunzip(data: bytes, key: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError) as error:
        raise ResultsError(f"{key}: not gzip data: {error}") from None


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
