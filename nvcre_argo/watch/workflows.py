"""Read what the watcher needs from an Argo Workflow object (a plain dict, as the API server returns it).

Why a module of its own: an Argo Workflow's status has several shapes for the same facts. `status.phase` is
absent or `""` right after creation; the node map is in `status.nodes` or, for large Workflows, in
`status.compressedNodes` (base64 of gzip of the JSON map); a step retried by Argo appears as a `Retry` node
whose children are the attempts; a step with `continueOn` ends `Failed` while its Workflow ends `Succeeded`.
Every reader here is tolerant: a field that is missing or malformed reads as "not known yet", never as an
exception, because one odd Workflow must not stop the watcher from writing every other Certification's status.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import logging
import zlib
from collections.abc import Mapping
from typing import Any

from nvcre_argo import contract

logger = logging.getLogger(__name__)

RUNNING_PHASES = frozenset({"", "Pending", "Running"})
FAILED_PHASES = frozenset({"Failed", "Error"})
TERMINAL_PHASES = FAILED_PHASES | {"Succeeded"}

Node = dict[str, Any]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def metadata(workflow: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(workflow.get("metadata"))


def name(workflow: Mapping[str, Any]) -> str:
    return _text(metadata(workflow).get("name"))


def namespace(workflow: Mapping[str, Any]) -> str | None:
    return _text(metadata(workflow).get("namespace")) or None


def uid(workflow: Mapping[str, Any]) -> str:
    return _text(metadata(workflow).get("uid"))


def label(workflow: Mapping[str, Any], key: str) -> str | None:
    value = _mapping(metadata(workflow).get("labels")).get(key)
    return value if isinstance(value, str) else None


def created(workflow: Mapping[str, Any]) -> str:
    """`metadata.creationTimestamp` (RFC 3339 strings in UTC sort as times); `""` when unset."""
    return _text(metadata(workflow).get("creationTimestamp"))


def owner_uids(workflow: Mapping[str, Any]) -> set[str]:
    references = metadata(workflow).get("ownerReferences")
    if not isinstance(references, list):
        return set()
    return {_text(_mapping(reference).get("uid")) for reference in references} - {""}


def _status(workflow: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(workflow.get("status"))


def phase(workflow: Mapping[str, Any]) -> str:
    """`status.phase`; `""` while Argo has not looked at the Workflow yet."""
    return _text(_status(workflow).get("phase"))


def message(workflow: Mapping[str, Any]) -> str:
    return _text(_status(workflow).get("message"))


def decode_compressed_nodes(encoded: str) -> dict[str, Node]:
    """`status.compressedNodes` → the node map: `json.loads(gzip.decompress(base64.b64decode(encoded)))`."""
    decoded = json.loads(gzip.decompress(base64.b64decode(encoded, validate=True)))
    if not isinstance(decoded, dict):
        raise TypeError(f"compressedNodes holds a JSON {type(decoded).__name__}, expected an object")
    return {key: value for key, value in decoded.items() if isinstance(value, dict)}


def encode_compressed_nodes(all_nodes: Mapping[str, Node]) -> str:
    """The node map → `status.compressedNodes`, as Argo writes it (base64 of gzip of the JSON map), for a writer
    that changes nodes of a Workflow Argo compressed (`steps.group_nodes`)."""
    return base64.b64encode(gzip.compress(json.dumps(all_nodes, separators=(",", ":")).encode())).decode()


def nodes_compressed(workflow: Mapping[str, Any]) -> bool:
    """Whether the node map is in `status.compressedNodes` (Argo compresses a Workflow grown past its size limit)."""
    encoded = _status(workflow).get("compressedNodes")
    return isinstance(encoded, str) and bool(encoded)


def nodes(workflow: Mapping[str, Any]) -> dict[str, Node]:
    """The node map, from `status.compressedNodes` when present (Argo then leaves `status.nodes` empty),
    else from `status.nodes`. An undecodable map reads as empty and is logged."""
    status = _status(workflow)
    if nodes_compressed(workflow):
        try:
            return decode_compressed_nodes(status["compressedNodes"])
        except (binascii.Error, OSError, EOFError, zlib.error, ValueError, TypeError) as error:
            logger.warning("Workflow %s: cannot decode status.compressedNodes: %s", name(workflow), error)
            return {}
    plain = _mapping(status.get("nodes"))
    return {key: dict(value) for key, value in plain.items() if isinstance(value, Mapping)}


def _template(node: Mapping[str, Any]) -> str:
    """The template a node ran: `templateName`, or the template of its `templateRef`."""
    return _text(node.get("templateName")) or _text(_mapping(node.get("templateRef")).get("template"))


def _final_nodes(all_nodes: Mapping[str, Node]) -> list[Node]:
    """Every node except the attempts under a `Retry` node: the Retry node's phase is the final verdict."""
    attempts: set[str] = set()
    for node in all_nodes.values():
        if node.get("type") == "Retry" and isinstance(node.get("children"), list):
            attempts.update(child for child in node["children"] if isinstance(child, str))
    return [node for key, node in sorted(all_nodes.items()) if key not in attempts]


def _parameters(node: Mapping[str, Any]) -> dict[str, str]:
    parameters = _mapping(node.get("outputs")).get("parameters")
    if not isinstance(parameters, list):
        return {}
    values = {}
    for parameter in parameters:
        entry = _mapping(parameter)
        key, value = _text(entry.get("name")), entry.get("value")
        if key and isinstance(value, str):
            values[key] = value.strip()
    return values


def record_outputs(all_nodes: Mapping[str, Node]) -> dict[str, str]:
    """The `record` step's non-empty output parameters (`failed-nodes-ref`, `succeeded-nodes-ref`).

    A Succeeded `record` node wins over others (a failed attempt may have written nothing); ties go to the node
    that finished last, then to the node id, so the answer does not depend on dict order."""
    wanted = (contract.OUTPUT_FAILED_NODES_REF, contract.OUTPUT_SUCCEEDED_NODES_REF)
    candidates = [node for node in all_nodes.values() if _template(node) == contract.TEMPLATE_RECORD]
    candidates.sort(
        key=lambda node: (node.get("phase") == "Succeeded", _text(node.get("finishedAt")), _text(node.get("id")))
    )
    outputs: dict[str, str] = {}
    for node in candidates:  # later (better) candidates overwrite earlier ones
        for key, value in _parameters(node).items():
            if key in wanted and value:
                outputs[key] = value
    return outputs


def latest_output(all_nodes: Mapping[str, Node], template: str, parameter: str) -> str | None:
    """The non-empty output `parameter` of the latest node (by start time, then id) running `template` that
    has one: e.g. the progress line of a diagnose loop's last `plan-round`."""
    found = [
        (_text(node.get("startedAt")), _text(node.get("id")), value)
        for node in all_nodes.values()
        if _template(node) == template and (value := _parameters(node).get(parameter))
    ]
    return max(found)[2] if found else None


def failed_steps(all_nodes: Mapping[str, Node], template: str) -> list[tuple[str, str]]:
    """`(displayName, message)` of the final nodes running `template` that ended Failed or Error, by name.

    This is how a failure hidden by `continueOn` is seen: the node stays Failed while its Workflow succeeds."""
    failed = [
        (_text(node.get("displayName")) or _text(node.get("name")), _text(node.get("message")))
        for node in _final_nodes(all_nodes)
        if _template(node) == template and node.get("phase") in FAILED_PHASES and node.get("type") != "Skipped"
    ]
    return sorted(failed)


def step_failure(all_nodes: Mapping[str, Node], template: str) -> str | None:
    """Why the (final) node running `template` failed, when it did: its message, or its phase."""
    for node in _final_nodes(all_nodes):
        if _template(node) == template and node.get("phase") in FAILED_PHASES:
            return _text(node.get("message")) or f"step {template} ended {node['phase']}"
    return None
