"""The shared runner against a real API server: it runs the groups whose suspend node Argo has run, at most
`maxConcurrent` at once, completes each node with its outcome by a JSON patch, and never overwrites a node that
someone else completed.

No Argo controller runs here, so the test plays it: it writes the Workflow's status nodes (the Workflow CRD has
no status subresource, so a status change is an update of the object, as Argo's own `argo node set` makes) and
runs a pending group's node by turning it Running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import WORKFLOWS
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.group_step import GroupStepOutcome
from nvcre_argo.steps.shared_runner import SharedRun, run_shared, waiting_message
from nvcre_argo.watch import workflows
from tests.integration.steps_support import NodeSet, create_context, resolve_category

pytestmark = pytest.mark.k8s

DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}
WAIT_S = 20.0


def suspend_node(workflow: str, index: int, item: str, phase: str) -> dict[str, Any]:
    """A group's suspend node as Argo's controller writes it (inputs, and the supplied outputs it copies)."""
    return {
        "id": f"{workflow}-{index}",
        "name": f"{workflow}[1].group({index}:{item})",
        "displayName": f"group({index}:{item})",
        "type": "Suspend",
        "templateName": "group",
        "phase": phase,
        "startedAt": "2026-12-02T05:00:00Z",
        "inputs": {"parameters": [{"name": "group", "value": item}]},
        "outputs": {
            "parameters": [
                {"name": "measurements", "valueFrom": {"supplied": {}}},
                {"name": "failed-nodes", "valueFrom": {"supplied": {}}},
            ]
        },
    }


def set_phase(kube: KubeClient, context: StepContext, node_id: str, phase: str) -> None:
    """What Argo does when it runs a node (Pending -> Running), or `argo resume` (Running -> Succeeded)."""
    workflow = kube.get(WORKFLOWS, context.workflow_name, context.namespace)
    assert workflow is not None
    workflow["status"]["nodes"][node_id]["phase"] = phase
    kube.replace(workflow)


def nodes_of(kube: KubeClient, context: StepContext) -> dict[str, dict[str, Any]]:
    workflow = kube.get(WORKFLOWS, context.workflow_name, context.namespace)
    assert workflow is not None
    return workflows.nodes(workflow)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


PHASES = {"g0": "Running", "g1": "Pending", "g2": "Succeeded", "g3": "Running"}


def create_workflow(kube: KubeClient, nodes: NodeSet, phases: dict[str, str], *, compressed: bool) -> StepContext:
    """A Workflow with a suspend node per group, in `status.nodes` or, as Argo keeps a large Workflow, in
    `status.compressedNodes`."""
    made = create_context(kube, nodes.namespace, resolve_category(DCGM, selector=nodes.namespace), "cert-0")
    workflow = kube.get(WORKFLOWS, made.workflow_name, made.namespace)
    assert workflow is not None
    status_nodes = {
        f"cert-0-{index}": suspend_node("cert-0", index, item, phase)
        for index, (item, phase) in enumerate(phases.items())
    }
    if compressed:
        workflow["status"] = {"phase": "Running", "compressedNodes": workflows.encode_compressed_nodes(status_nodes)}
    else:
        workflow["status"] = {"phase": "Running", "nodes": status_nodes}
    kube.replace(workflow)
    return made


@pytest.fixture
def context(kube: KubeClient, nodes: NodeSet) -> StepContext:
    """Four groups: g0 run by Argo, g1 not yet, g2 long done, g3 run."""
    return create_workflow(kube, nodes, PHASES, compressed=False)


class Groups:
    """run_item for the test: each group waits until the test releases it, then returns its canned outcome."""

    def __init__(self, outcomes: dict[str, GroupStepOutcome]) -> None:
        self.outcomes = outcomes
        self.released = {item: threading.Event() for item in outcomes}
        self.started: list[str] = []

    def __call__(self, item: str, report: Callable[[str], None]) -> GroupStepOutcome:
        self.started.append(item)
        report("running")
        assert self.released[item].wait(WAIT_S), f"group {item} was never released"
        return self.outcomes[item]


def run_in_background(
    kube: KubeClient,
    context: StepContext,
    groups: Groups,
    lines: list[str],
    *,
    items: tuple[str, ...] = tuple(PHASES),
    limit: int | None = None,
) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["result"] = run_shared(kube, context, items, groups, limit=limit, report=lines.append, poll_seconds=0.1)
        except BaseException as error:  # reported by the test, not lost in the thread
            box["error"] = error

    box["thread"] = threading.Thread(target=body, daemon=True)
    box["thread"].start()
    return box


def finish(box: dict[str, Any]) -> SharedRun:
    box["thread"].join(WAIT_S)
    assert not box["thread"].is_alive(), "the shared runner did not return"
    assert "error" not in box, box.get("error")
    result: SharedRun = box["result"]
    return result


def test_the_runner_runs_the_groups_whose_node_runs_and_completes_their_nodes(
    kube: KubeClient, context: StepContext
) -> None:
    failed = GroupStepOutcome(False, "1 node(s) failed: n1 (WorkloadFailed): exit code 1", "", "1")
    groups = Groups(
        {
            "g0": GroupStepOutcome(True, "", "busBandwidthGBps=452.1", "0"),
            "g1": failed,
            "g3": GroupStepOutcome(True, "", "", "0"),
        }
    )
    lines: list[str] = []
    box = run_in_background(kube, context, groups, lines)
    wait_for(lambda: sorted(groups.started) == ["g0", "g3"], "the groups whose node runs to start")
    assert "g1" not in groups.started, "a group whose node Argo has not run must not run"

    groups.released["g0"].set()
    wait_for(lambda: nodes_of(kube, context)["cert-0-0"]["phase"] == "Succeeded", "g0's node to succeed")
    g0 = nodes_of(kube, context)["cert-0-0"]
    assert g0["finishedAt"]
    assert g0["outputs"]["parameters"][0] == {
        "name": "measurements",
        "value": "busBandwidthGBps=452.1",
        "valueFrom": {"supplied": {}},
    }
    assert "message" not in g0

    set_phase(kube, context, "cert-0-1", "Running")  # Argo runs g1's node
    wait_for(lambda: "g1" in groups.started, "g1 to start once its node runs")
    groups.released["g1"].set()
    groups.released["g3"].set()
    result = finish(box)

    nodes = nodes_of(kube, context)
    written = kube.get(WORKFLOWS, context.workflow_name, context.namespace)
    assert written is not None
    assert not written["metadata"].get("managedFields"), "dropped, and not brought back by the test's updates"
    assert nodes["cert-0-1"]["phase"] == "Failed"
    assert nodes["cert-0-1"]["message"] == failed.summary
    assert nodes["cert-0-3"]["phase"] == "Succeeded"
    assert nodes["cert-0-2"] == suspend_node("cert-0", 2, "g2", "Succeeded"), "a finished group is left alone"
    assert sorted(result.outcomes) == ["g0", "g1", "g3"]
    assert result.failed == ["g1"]
    assert result.summary().startswith("2/3 group(s) passed: g1: 1 node(s) failed: n1")
    assert any(line.startswith("[g1] FAILED after") for line in lines)


def test_a_group_resumed_by_hand_while_it_runs_is_not_overwritten(kube: KubeClient, context: StepContext) -> None:
    groups = Groups(
        {
            "g0": GroupStepOutcome(False, "the group did not pass", "", "0"),
            "g1": GroupStepOutcome(True, "", "", "0"),
            "g3": GroupStepOutcome(True, "", "", "0"),
        }
    )
    lines: list[str] = []
    box = run_in_background(kube, context, groups, lines)
    wait_for(lambda: "g0" in groups.started, "g0 to start")
    set_phase(kube, context, "cert-0-0", "Succeeded")  # `argo resume` of g0's node while g0 runs
    set_phase(kube, context, "cert-0-1", "Running")
    for event in groups.released.values():
        event.set()
    result = finish(box)

    g0 = nodes_of(kube, context)["cert-0-0"]
    assert g0["phase"] == "Succeeded"
    assert "message" not in g0
    assert "finishedAt" not in g0
    assert result.completed_elsewhere == {"g0": "Succeeded"}
    assert "g0" not in result.outcomes
    assert "completed outside this runner: g0 (Succeeded)" in result.summary()


def test_groups_of_a_compressed_workflow_are_run_and_completed_in_its_compressed_nodes(
    kube: KubeClient, nodes: NodeSet
) -> None:
    """At thousands of groups Argo keeps the node map compressed; the runner must still find its groups there and
    complete them there (Argo hydrates the map before it reads a node)."""
    context = create_workflow(kube, nodes, {"g0": "Running", "g1": "Running", "g2": "Succeeded"}, compressed=True)
    failed = GroupStepOutcome(False, "1 node(s) failed: n1 (WorkloadFailed): exit code 1", "", "1")
    groups = Groups({"g0": GroupStepOutcome(True, "", "busBandwidthGBps=452.1", "0"), "g1": failed})
    box = run_in_background(kube, context, groups, [], items=("g0", "g1", "g2"))
    wait_for(lambda: sorted(groups.started) == ["g0", "g1"], "both groups whose node runs to start")
    for event in groups.released.values():
        event.set()
    result = finish(box)

    workflow = kube.get(WORKFLOWS, context.workflow_name, context.namespace)
    assert workflow is not None
    assert not workflow["status"].get("nodes"), "the nodes stay compressed, as Argo keeps them"
    assert not workflow["metadata"].get("managedFields")
    written = workflows.nodes(workflow)
    assert written["cert-0-0"]["phase"] == "Succeeded"
    assert written["cert-0-0"]["outputs"]["parameters"][0]["value"] == "busBandwidthGBps=452.1"
    assert written["cert-0-1"]["phase"] == "Failed"
    assert written["cert-0-1"]["message"] == failed.summary
    assert written["cert-0-2"] == suspend_node("cert-0", 2, "g2", "Succeeded"), "a finished group is left alone"
    assert result.failed == ["g1"]


def test_at_most_max_concurrent_groups_run_and_the_waiting_ones_say_so(kube: KubeClient, nodes: NodeSet) -> None:
    """maxConcurrent 2 over four groups whose nodes all run: two start, in order; the other two nodes show the
    waiting message until a slot frees, and no message is left once they run."""
    context = create_workflow(kube, nodes, dict.fromkeys(("g0", "g1", "g2", "g3"), "Running"), compressed=False)
    groups = Groups({item: GroupStepOutcome(True, "", "", "0") for item in ("g0", "g1", "g2", "g3")})
    lines: list[str] = []
    box = run_in_background(kube, context, groups, lines, items=("g0", "g1", "g2", "g3"), limit=2)
    waiting = waiting_message(2)

    def messages() -> list[str]:
        found = nodes_of(kube, context)
        return [found[f"cert-0-{index}"].get("message", "") for index in range(4)]

    wait_for(lambda: messages() == ["", "", waiting, waiting], "the two waiting groups' message")
    assert sorted(groups.started) == ["g0", "g1"], "the first two in order; the waiting messages show which wait"

    groups.released["g1"].set()
    wait_for(lambda: "g2" in groups.started, "g2 to take the slot g1 freed")
    wait_for(lambda: messages()[2] == "", "g2's waiting message to go")
    assert sorted(groups.started) == ["g0", "g1", "g2"], "g3 still waits: g0 and g2 hold the two slots"
    assert messages()[3] == waiting
    for event in groups.released.values():
        event.set()
    result = finish(box)

    assert sorted(result.outcomes) == ["g0", "g1", "g2", "g3"]
    assert [node["phase"] for node in nodes_of(kube, context).values()] == ["Succeeded"] * 4
    assert messages() == ["", "", "", ""]
