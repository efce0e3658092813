"""The shared runner's view of its groups: which suspend node is whose, and the patch that writes them."""

from __future__ import annotations

from typing import Any

from nvcre_argo import contract
from nvcre_argo.steps.group_nodes import Completion, GroupNode, group_nodes, node_patch, stranded_groups
from nvcre_argo.watch import workflows


def node(
    node_id: str, item: str, phase: str, *, kind: str = "Suspend", template: str = "group", message: str = ""
) -> dict[str, Any]:
    written = {
        "id": node_id,
        "name": f"wf[1].group({item})",
        "displayName": f"group({item})",
        "type": kind,
        "templateName": template,
        "phase": phase,
        "inputs": {"parameters": [{"name": "group", "value": item}]},
    }
    return {**written, "message": message} if message else written


def workflow(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"nodes": {item["id"]: item for item in nodes}}}


def test_each_item_maps_to_its_suspend_node_and_other_nodes_are_ignored() -> None:
    found = group_nodes(
        workflow(
            node("wf-1", "g0", "Running", message="waiting for a slot"),
            node("wf-2", "g1", "Pending"),
            node("wf-3", "g2", "Succeeded"),
            node("wf-4", "g3", "Running", kind="Pod", template="run-group"),  # a group's own step pod
            node("wf-5", "g4", "Running"),  # not one of this runner's items (another round's)
        ),
        ["g0", "g1", "g2", "g3"],
    )
    assert found == {
        "g0": GroupNode("g0", "wf-1", "Running", "waiting for a slot"),
        "g1": GroupNode("g1", "wf-2", "Pending"),
        "g2": GroupNode("g2", "wf-3", "Succeeded"),
    }
    assert found["g0"].running
    assert not found["g0"].finished
    assert not found["g1"].running
    assert not found["g1"].finished
    assert found["g2"].finished


def test_a_running_node_wins_over_another_of_the_same_group() -> None:
    found = group_nodes(workflow(node("old", "g0", "Failed"), node("new", "g0", "Running")), ["g0"])
    assert found["g0"].node_id == "new"


def test_a_workflow_without_status_has_no_group_nodes_yet() -> None:
    assert group_nodes({}, ["g0"]) == {}


FAILED = Completion(
    passed=False,
    message="1 node(s) failed: gpu-node-3 (WorkloadFailed): exit code 1",
    outputs={contract.OUTPUT_MEASUREMENTS: "", contract.OUTPUT_FAILED_NODE_COUNT: "1"},
    finished_at="2026-12-02T05:00:00Z",
)
PASSED = Completion(passed=True, message="", outputs={}, finished_at="2026-12-02T05:00:01Z")


def test_the_patch_tests_that_each_node_still_runs_before_changing_it() -> None:
    operations = node_patch(
        workflow(node("wf-1", "g0", "Running"), node("wf-2", "g1", "Running")),
        {"wf-1": FAILED.fields(), "wf-2": PASSED.fields()},
    )
    assert operations[0] == {"op": "test", "path": "/status/nodes/wf-1/phase", "value": "Running"}
    assert operations[5] == {"op": "test", "path": "/status/nodes/wf-2/phase", "value": "Running"}
    changes = {operation["path"]: operation["value"] for operation in operations if operation["op"] == "add"}
    assert changes == {
        "/status/nodes/wf-1/phase": "Failed",
        "/status/nodes/wf-1/finishedAt": "2026-12-02T05:00:00Z",
        "/status/nodes/wf-1/message": "1 node(s) failed: gpu-node-3 (WorkloadFailed): exit code 1",
        "/status/nodes/wf-1/outputs": {
            "parameters": [
                {"name": "measurements", "value": "", "valueFrom": {"supplied": {}}},
                {"name": "failed-nodes", "value": "1", "valueFrom": {"supplied": {}}},
            ]
        },
        "/status/nodes/wf-2/phase": "Succeeded",
        "/status/nodes/wf-2/finishedAt": "2026-12-02T05:00:01Z",
        "/status/nodes/wf-2/outputs": {"parameters": []},
    }


def test_a_node_no_longer_running_as_read_is_left_out_and_none_left_is_no_patch() -> None:
    read = workflow(node("wf-1", "g0", "Succeeded"), node("wf-2", "g1", "Running"))
    paths = {operation["path"] for operation in node_patch(read, {"wf-1": FAILED.fields(), "wf-2": PASSED.fields()})}
    assert all(path.startswith("/status/nodes/wf-2/") for path in paths)
    assert node_patch(read, {"wf-1": FAILED.fields(), "gone": PASSED.fields()}) == []


def test_a_field_given_as_none_is_removed() -> None:
    """A group that starts loses the message it showed while it waited for a slot."""
    read = workflow(node("wf-1", "g0", "Running", message="waiting"), node("wf-2", "g1", "Running"))
    assert node_patch(read, {"wf-1": {"message": None}, "wf-2": {"message": "waiting"}}) == [
        {"op": "test", "path": "/status/nodes/wf-1/phase", "value": "Running"},
        {"op": "remove", "path": "/status/nodes/wf-1/message"},
        {"op": "test", "path": "/status/nodes/wf-2/phase", "value": "Running"},
        {"op": "add", "path": "/status/nodes/wf-2/message", "value": "waiting"},
    ]


def test_odd_node_keys_are_escaped() -> None:
    operations = node_patch(workflow(node("a/b~c", "g0", "Running")), {"a/b~c": PASSED.fields()})
    assert all(operation["path"].startswith("/status/nodes/a~1b~0c/") for operation in operations)


def test_the_first_patch_drops_the_workflows_managed_fields_and_later_ones_find_none_to_drop() -> None:
    """The API server's record of who set which field is about a third of a large category Workflow, which Argo
    does not count when it decides to compress the Workflow: the runner drops it (see `_dropped_managed_fields`)."""
    read = workflow(node("wf-1", "g0", "Running"))
    read["metadata"] = {"managedFields": [{"manager": "workflow-controller", "fieldsV1": {"f:status": {}}}]}
    operations = node_patch(read, {"wf-1": PASSED.fields()})
    assert operations[0] == {"op": "add", "path": "/metadata/managedFields", "value": [{}]}
    assert operations[1] == {"op": "test", "path": "/status/nodes/wf-1/phase", "value": "Running"}

    read["metadata"] = {}
    assert all(operation["path"] != "/metadata/managedFields" for operation in node_patch(read, {"wf-1": {}}))


def test_compressed_nodes_are_found_and_completed_in_one_rewrite_tested_by_resource_version() -> None:
    """Argo keeps a Workflow past its size limit as `status.compressedNodes`: the runner reads its groups there
    and writes the whole map back, only onto the Workflow as read."""
    nodes = {
        item["id"]: item
        for item in (
            node("wf-1", "g0", "Running"),
            node("wf-2", "g1", "Running"),
            node("wf-3", "g2", "Running", message="waiting"),
        )
    }
    read = {
        "metadata": {"resourceVersion": "4242"},
        "status": {"compressedNodes": workflows.encode_compressed_nodes(nodes)},
    }
    assert group_nodes(read, ["g0", "g1"]) == {
        "g0": GroupNode("g0", "wf-1", "Running"),
        "g1": GroupNode("g1", "wf-2", "Running"),
    }
    test, rewrite = node_patch(read, {"wf-1": FAILED.fields(), "wf-3": {"message": None}})
    assert test == {"op": "test", "path": "/metadata/resourceVersion", "value": "4242"}
    assert rewrite["op"] == "replace"
    assert rewrite["path"] == "/status/compressedNodes"
    written = workflows.decode_compressed_nodes(rewrite["value"])
    assert written["wf-2"] == nodes["wf-2"], "a node not completed is written back as read"
    assert written["wf-1"] == {**nodes["wf-1"], **FAILED.fields()}
    assert written["wf-1"]["phase"] == "Failed"
    assert written["wf-1"]["message"] == FAILED.message
    assert written["wf-3"] == node("wf-3", "g2", "Running"), "a field given as None is removed"

    read["metadata"]["managedFields"] = [{"manager": "workflow-controller"}]
    *_, dropped = node_patch(read, {"wf-1": FAILED.fields()})
    assert dropped == {"op": "add", "path": "/metadata/managedFields", "value": [{}]}


def fan_out(
    step_group: str, runner_phase: str, *groups: tuple[str, str], runner_message: str = ""
) -> list[dict[str, Any]]:
    """A shared runner's step group: the runner's Retry node (its one attempt a Pod) beside its group nodes."""
    runner = {
        "id": f"{step_group}-runner",
        "displayName": "run-groups",
        "type": "Retry",
        "templateName": contract.TEMPLATE_RUN_GROUPS,
        "phase": runner_phase,
        "children": [f"{step_group}-attempt"],
    }
    if runner_message:
        runner["message"] = runner_message
    attempt = {**runner, "id": f"{step_group}-attempt", "type": "Pod", "children": []}
    members = [node(f"{step_group}-{item}", item, phase) for item, phase in groups]
    parent = {
        "id": step_group,
        "type": "StepGroup",
        "phase": "Running",
        "children": [runner["id"], *(member["id"] for member in members)],
    }
    return [parent, runner, attempt, *members]


def test_groups_left_waiting_by_a_runner_that_ended_for_good_are_stranded() -> None:
    lost = "main: Error (exit code 143)"
    nodes = fan_out("sg", "Failed", ("g0", "Succeeded"), ("g1", "Running"), ("g2", "Pending"), runner_message=lost)
    assert stranded_groups(workflow(*nodes)) == (
        f"its shared runner run-groups ended Failed: {lost}, with 2 group(s) it had not completed, "
        "which nothing else completes"
    )
    compressed = {"status": {"compressedNodes": workflows.encode_compressed_nodes({n["id"]: n for n in nodes})}}
    assert stranded_groups(compressed) == stranded_groups(workflow(*nodes))


def test_groups_are_not_stranded_while_the_runner_may_be_retried_or_once_every_group_ended() -> None:
    retrying = fan_out("sg", "Running", ("g0", "Running"))
    failed_after_its_groups = fan_out("sg", "Failed", ("g0", "Failed"), ("g1", "Succeeded"))
    assert stranded_groups(workflow(*retrying)) is None
    assert stranded_groups(workflow(*failed_after_its_groups)) is None
    assert stranded_groups({}) is None


def test_only_the_failed_runners_own_groups_count() -> None:
    """Another round's runner still runs its groups; the failed runner of round 1 had completed its own."""
    nodes = fan_out("r1", "Failed", ("r1-g0", "Failed")) + fan_out("r2", "Running", ("r2-g0", "Running"))
    assert stranded_groups(workflow(*nodes)) is None
