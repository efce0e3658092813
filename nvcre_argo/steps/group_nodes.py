"""The groups of a category Workflow run by one shared runner: each is an Argo suspend node, which the runner
finds in its Workflow's status and completes with the group's outcome (pure functions; no I/O).

Why suspend nodes: a node with no pod behind it is the one way Argo draws each group in its UI (name, phase,
message, outputs, times) without a pod per group. Argo itself completes suspend nodes from outside the
controller the same way (`argo node set`, `argo stop --node-field-selector`): it sets the node's phase,
message, finish time and supplied outputs in the Workflow's status, and the controller goes on from there
(the next step runs). The runner changes nothing else, and only nodes that are still running as it read them
(`node_patch` says how), so a group someone resumed by hand, or that a stopped Workflow failed, is never
overwritten. Besides completing nodes, the runner writes the message of a node whose group waits for a slot
(`maxConcurrent`), which is all a waiting group shows. The nodes are read as the watcher reads them
(`watch.workflows.nodes`), from `status.nodes` or Argo's compressed map. The verdict never rests on these
nodes: the record step reads the groups' result ConfigMaps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre_argo import contract
from nvcre_argo.watch import workflows

RUNNING = "Running"
FINAL_PHASES = frozenset({"Succeeded", "Failed", "Error", "Skipped", "Omitted"})


@dataclass(frozen=True)
class GroupNode:
    """One group's suspend node: `item` is the group the fan-out gave it (its `group` input)."""

    item: str
    node_id: str
    phase: str
    message: str = ""

    @property
    def running(self) -> bool:
        """Argo has run the node, which now waits for the runner to run its group and complete it."""
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
    for node_id, node in workflows.nodes(workflow).items():
        if node.get("type") != "Suspend" or node.get("templateName") != contract.TEMPLATE_GROUP:
            continue
        item = _group_input(node)
        if item not in wanted:
            continue
        candidate = GroupNode(
            item=item,
            node_id=str(node.get("id") or node_id),
            phase=str(node.get("phase") or ""),
            message=str(node.get("message") or ""),
        )
        if item not in found or candidate.running:
            found[item] = candidate
    return found


def _group_input(node: Mapping[str, Any]) -> str | None:
    for parameter in (node.get("inputs") or {}).get("parameters") or []:
        if parameter.get("name") == contract.PARAM_GROUP:
            value = parameter.get("value")
            return str(value) if value is not None else None
    return None


@dataclass(frozen=True)
class Completion:
    """A group's outcome as its node shows it: Succeeded or Failed, the one-line failure as its message, its
    outputs (the suspend template's supplied parameters), its finish time."""

    passed: bool
    message: str
    outputs: Mapping[str, str]
    finished_at: str

    def fields(self) -> dict[str, Any]:
        """The node's fields this sets (every other field is Argo's and stays as it is)."""
        fields: dict[str, Any] = {
            "phase": "Succeeded" if self.passed else "Failed",
            "finishedAt": self.finished_at,
            "outputs": {
                "parameters": [
                    {"name": name, "value": value, "valueFrom": {"supplied": {}}}
                    for name, value in self.outputs.items()
                ]
            },
        }
        if self.message:
            fields["message"] = self.message
        return fields


def node_patch(workflow: Mapping[str, Any], changes: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The one JSON patch that sets, on every running group node of `changes` (by node id) in `workflow` as
    read, the fields given (a `Completion`'s, or a waiting group's message); a field given as None is removed
    (a group that starts loses its waiting message). It applies only to the Workflow as read, or the API server
    refuses all of it (422) and the caller reads it again:
    - nodes in `status.nodes`: each node's first operation tests that it is still Running, so Argo's own
      updates of other nodes in between do not matter;
    - nodes in `status.compressedNodes` (Argo compresses a Workflow past its size limit, at thousands of
      groups): one string holds every node, so the patch rewrites it and tests the Workflow's resourceVersion.
    Nodes not Running in `workflow` are left out. The patch also drops the Workflow's `managedFields`
    (`_dropped_managed_fields`)."""
    all_nodes = workflows.nodes(workflow)
    running = {
        node_id: fields for node_id, fields in changes.items() if (all_nodes.get(node_id) or {}).get("phase") == RUNNING
    }
    if not running:
        return []
    if workflows.nodes_compressed(workflow):
        for node_id, fields in running.items():
            node = {**all_nodes[node_id], **fields}
            all_nodes[node_id] = {key: value for key, value in node.items() if value is not None}
        version = str((workflow.get("metadata") or {}).get("resourceVersion") or "")
        return [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "replace", "path": "/status/compressedNodes", "value": workflows.encode_compressed_nodes(all_nodes)},
            *_dropped_managed_fields(workflow),
        ]
    operations: list[dict[str, Any]] = _dropped_managed_fields(workflow)
    for node_id, fields in running.items():
        path = f"/status/nodes/{_pointer_token(node_id)}"
        operations.append({"op": "test", "path": f"{path}/phase", "value": RUNNING})
        for key, value in fields.items():
            if value is None:
                operations.append({"op": "remove", "path": f"{path}/{key}"})
            else:
                operations.append({"op": "add", "path": f"{path}/{key}", "value": value})
    return operations


def _dropped_managed_fields(workflow: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The operation that drops the Workflow's `metadata.managedFields`, when it has any.

    Why: the API server records there, per writer, every field it ever set: every node's fields for Argo's
    controller, and the completed ones for the runner, about a third of a category Workflow at a thousand
    groups (123 kB of 352 kB at 256 groups, in the overhead benchmark). etcd stores and limits (1.5 MiB) the
    object with them, but Argo's controller, which compresses the node map past 1 MiB, evidently sizes the
    Workflow without them: it left a category Workflow of 1,024 groups stored at 1.2 MB uncompressed (0.8 MB
    without them), and at somewhat more groups it would pass etcd's limit before Argo compresses it.
    Overwriting the list with one empty entry is the API server's documented way to drop it, and an object
    without it stays without it under Argo's later updates (no writer applies the Workflow server-side, the
    one kind of write that brings it back). `add` rather than `replace`, which would fail on a Workflow that
    has none."""
    if not (workflow.get("metadata") or {}).get("managedFields"):
        return []
    return [{"op": "add", "path": "/metadata/managedFields", "value": [{}]}]


def _pointer_token(key: str) -> str:
    """A map key as one JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def stranded_groups(workflow: Mapping[str, Any]) -> str | None:
    """Why some group nodes of the Workflow will never end, or None: their shared runner ended for good (its
    `Retry` node Failed or Errored: no attempt is left or Argo would not retry it) before completing them.

    Only the runner completes a group's suspend node, so such groups would wait until the Workflow's deadline,
    holding the steps after them (`record`, the next isolation round) and the certification's next category.
    The groups are the suspend nodes beside the runner in its step group (one fan-out, or one round's). A
    runner lost as `Failed` (its pod stopped with SIGTERM, exit code 143, and its end read before the pod was
    gone) is the usual case: Argo does not retry it (`render.category_template.step_retry`)."""
    all_nodes = workflows.nodes(workflow)
    for runner_id, runner in sorted(all_nodes.items()):
        if (
            runner.get("type") != "Retry"
            or runner.get("templateName") != contract.TEMPLATE_RUN_GROUPS
            or runner.get("phase") not in workflows.FAILED_PHASES
        ):
            continue
        waiting = [
            sibling
            for step_group in all_nodes.values()
            if runner_id in (step_group.get("children") or [])
            for sibling_id in step_group.get("children") or []
            if (sibling := all_nodes.get(sibling_id))
            and sibling.get("type") == "Suspend"
            and sibling.get("templateName") == contract.TEMPLATE_GROUP
            and sibling.get("phase") not in FINAL_PHASES
        ]
        if waiting:
            name = runner.get("displayName") or runner.get("name") or runner_id
            ended = f"{runner['phase']}: {runner['message']}" if runner.get("message") else runner["phase"]
            return (
                f"its shared runner {name} ended {ended}, with {len(waiting)} group(s) it had not completed, "
                "which nothing else completes"
            )
    return None
