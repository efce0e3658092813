"""The groups of a category Workflow run by one shared runner: each is an Argo suspend node, which the runner
finds in its Workflow's status and completes with the group's outcome (pure functions; no I/O).

Why suspend nodes: a node with no pod behind it is the one way Argo draws each group in its UI (name, phase,
message, outputs, times) without a pod per group. Argo itself completes suspend nodes from outside the
controller the same way (`argo node set`, `argo stop --node-field-selector`): it sets the node's phase,
message, finish time and supplied outputs in the Workflow's status, and the controller goes on from there
(the semaphore slot is released, the next step runs). The runner changes nothing else, and only a node that
is still running: the patch starts with a `test` of the phase, so a group someone resumed by hand, or that a
stopped Workflow failed, is never overwritten. The verdict never rests on these nodes: the record step reads
the groups' result ConfigMaps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre_argo import contract

RUNNING = "Running"
FINAL_PHASES = frozenset({"Succeeded", "Failed", "Error", "Skipped", "Omitted"})


@dataclass(frozen=True)
class GroupNode:
    """One group's suspend node: `item` is the group the fan-out gave it (its `group` input)."""

    item: str
    node_id: str
    phase: str

    @property
    def running(self) -> bool:
        """Argo granted it a slot of the category's semaphore (maxConcurrent) and it waits for its outcome."""
        return self.phase == RUNNING

    @property
    def finished(self) -> bool:
        return self.phase in FINAL_PHASES


def group_nodes(workflow: Mapping[str, Any], items: Iterable[str]) -> dict[str, GroupNode]:
    """The suspend nodes of `items` in the Workflow's status, by item. A group without a node yet (Argo has
    not expanded the fan-out) is absent. Should a group have several (never in one fan-out), a running one
    wins: it is the one waiting for an outcome."""
    wanted = set(items)
    found: dict[str, GroupNode] = {}
    nodes = (workflow.get("status") or {}).get("nodes") or {}
    for node_id, node in nodes.items():
        if node.get("type") != "Suspend" or node.get("templateName") != contract.TEMPLATE_GROUP:
            continue
        item = _group_input(node)
        if item not in wanted:
            continue
        candidate = GroupNode(item=item, node_id=str(node.get("id") or node_id), phase=str(node.get("phase") or ""))
        if item not in found or candidate.running:
            found[item] = candidate
    return found


def _group_input(node: Mapping[str, Any]) -> str | None:
    for parameter in (node.get("inputs") or {}).get("parameters") or []:
        if parameter.get("name") == contract.PARAM_GROUP:
            value = parameter.get("value")
            return str(value) if value is not None else None
    return None


def completion_patch(
    node_id: str, *, passed: bool, message: str, outputs: Mapping[str, str], finished_at: str
) -> list[dict[str, Any]]:
    """The JSON patch that ends a running group node: Succeeded or Failed, the one-line failure as its message,
    its outputs (the suspend template's supplied parameters), its finish time. It applies only while the node
    is still Running (the first operation tests that)."""
    path = f"/status/nodes/{_pointer_token(node_id)}"
    operations: list[dict[str, Any]] = [
        {"op": "test", "path": f"{path}/phase", "value": RUNNING},
        {"op": "replace", "path": f"{path}/phase", "value": "Succeeded" if passed else "Failed"},
        {"op": "add", "path": f"{path}/finishedAt", "value": finished_at},
        {
            "op": "add",
            "path": f"{path}/outputs",
            "value": {
                "parameters": [
                    {"name": name, "value": value, "valueFrom": {"supplied": {}}} for name, value in outputs.items()
                ]
            },
        },
    ]
    if message:
        operations.append({"op": "add", "path": f"{path}/message", "value": message})
    return operations


def _pointer_token(key: str) -> str:
    """A map key as one JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")
