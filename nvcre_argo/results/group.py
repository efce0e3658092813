"""The group-result record: one node group's iterations, `binaryData["result.json.gz"]` of a ConfigMap
labelled `nvcre.nvidia.com/record=group-result` (one per group, rewritten after every iteration).

The payload is gzip (deterministic, `codec.gzip_bytes`) of compact JSON `{"group", "nodes", "attempt",
"iterations": [{"iteration", "trainjob", "succeeded", "message", "failed_nodes": [{"name", "reason"[,
"message"]}], "measurements": {key: number}, "restarts": [...], "never_ran": bool}]}` (`restarts`, the
checkpoint restarts of the iteration, and `never_ran`, whether the controllers never created its pods, are
absent in results written before they existed).

Why a failed node's `message` is left out when it is its iteration's `message` (the usual case: a whole-group
failure, or a log tail shared by every rank that failed first), and read back as that message: a group that
blames all of its 10,000 nodes then writes one copy of a 4 KiB log tail, not 10,000. Stored plain with one
message per node, a 4,096-node group passed the 1 MiB object limit and the API server refused it, losing the
result. Readers still accept the older form, `data["result.json"]` in plain JSON with every message written
out. `read_group_result` checks the shape, so a reader sees a typed record or a ResultsError, never a KeyError.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, TypedDict

from nvcre_argo.results.codec import (
    ResultsError,
    base64_text,
    configmap_binary,
    expect_type,
    gunzip_bytes,
    gzip_bytes,
)
from nvcre_argo.results.nodes import FailedNode

GROUP_RESULT_KEY: Final = "result.json.gz"
LEGACY_GROUP_RESULT_KEY: Final = "result.json"  # plain JSON in `data`, as written before compression


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
    never_ran: bool  # the controllers created none of its pods in time: no evidence about the nodes


class GroupResultRecord(TypedDict):
    """One group's `result.json`, as the run step writes it (see the module docstring)."""

    group: str
    nodes: list[str]
    iterations: list[IterationRecord]
    attempt: int  # 1 unless the group was tested again (`argo retry`) after a finished run


def reasons_for(node: str, record: GroupResultRecord) -> list[str]:
    """The reasons a group's result gives `node`, in iteration order (empty when it never blamed it)."""
    return [item["reason"] for it in record["iterations"] for item in it["failed_nodes"] if item["name"] == node]


def last_failure_message(record: GroupResultRecord) -> str:
    """The message of the group's last failed iteration, or "" when every iteration passed."""
    return next((it["message"] for it in reversed(record["iterations"]) if not it["succeeded"]), "")


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
            text = gunzip_bytes(data, GROUP_RESULT_KEY).decode("utf-8")
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
    document = expect_type(document, dict, where)
    iterations = expect_type(document.get("iterations"), list, f"{where}.iterations")
    return {
        "group": expect_type(document.get("group"), str, f"{where}.group"),
        "nodes": [expect_type(node, str, f"{where}.nodes[{i}]") for i, node in enumerate(_nodes(document, where))],
        "iterations": [_read_iteration(item, f"{where}.iterations[{i}]") for i, item in enumerate(iterations)],
        "attempt": expect_type(document.get("attempt", 1), int, f"{where}.attempt"),
    }


def _nodes(document: Mapping[str, Any], where: str) -> list[Any]:
    nodes: list[Any] = expect_type(document.get("nodes"), list, f"{where}.nodes")
    return nodes


def _read_iteration(item: Any, where: str) -> IterationRecord:
    item = expect_type(item, dict, where)
    failed = expect_type(item.get("failed_nodes", []), list, f"{where}.failed_nodes")
    measurements = expect_type(item.get("measurements", {}), dict, f"{where}.measurements")
    message: str = expect_type(item.get("message"), str, f"{where}.message")
    return {
        "iteration": expect_type(item.get("iteration"), int, f"{where}.iteration"),
        "trainjob": expect_type(item.get("trainjob"), str, f"{where}.trainjob"),
        "succeeded": expect_type(item.get("succeeded"), bool, f"{where}.succeeded"),
        "message": message,
        "failed_nodes": [
            _read_failed_record(node, f"{where}.failed_nodes[{i}]", message) for i, node in enumerate(failed)
        ],
        "measurements": {
            str(key): float(expect_type(value, (int, float), f"{where}.measurements[{key!r}]"))
            for key, value in measurements.items()
        },
        "restarts": [
            _read_restart(restart, f"{where}.restarts[{i}]")
            for i, restart in enumerate(expect_type(item.get("restarts", []), list, f"{where}.restarts"))
        ],
        "never_ran": expect_type(item.get("never_ran", False), bool, f"{where}.never_ran"),
    }


def _read_restart(item: Any, where: str) -> RestartRecord:
    item = expect_type(item, dict, where)

    def optional(key: str, kind: type | tuple[type, ...]) -> Any:
        value = item.get(key)
        return None if value is None else expect_type(value, kind, f"{where}.{key}")

    return {
        "trainjob": expect_type(item.get("trainjob"), str, f"{where}.trainjob"),
        "failure": expect_type(item.get("failure"), str, f"{where}.failure"),
        "checkpoint_iteration": expect_type(item.get("checkpoint_iteration"), int, f"{where}.checkpoint_iteration"),
        "lost_work_seconds": float(
            expect_type(item.get("lost_work_seconds"), (int, float), f"{where}.lost_work_seconds")
        ),
        "reschedule_seconds": optional("reschedule_seconds", (int, float)),
        "resume_seconds": optional("resume_seconds", (int, float)),
        "resumed_from": optional("resumed_from", int),
    }


def _read_failed_record(item: Any, where: str, shared_message: str) -> FailedNodeRecord:
    """One failed node; an absent `message` is its iteration's (an explicit null is still an error)."""
    item = expect_type(item, dict, where)
    if "message" not in item:
        item = {**item, "message": shared_message}
    node = FailedNode(*(expect_type(item.get(key), str, f"{where}.{key}") for key in _FIELDS))
    return {"name": node.name, "reason": node.reason, "message": node.message}


_FIELDS = ("name", "reason", "message")
