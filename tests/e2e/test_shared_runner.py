"""One shared runner pod runs all of a category's groups (`nvcre-compile --shared-runner`), under Argo's real
controller, with every group still a node of its own.

dcgm-level1 per node on the 8 nodes, at most 3 at once, gpu-node-3 crashes. What must hold:
- the verdict is the one a step pod per group gives: exactly gpu-node-3 fails (WorkloadFailed), the 7 others
  are certified;
- the category Workflow runs four pods, whatever its number of groups: plan, run-groups, record, cleanup;
- each of the 8 groups is a suspend node that the runner completed: the crashed group Failed with the
  message a group's own step pod would show, and its outputs; the others Succeeded;
- Argo's semaphore still decides what runs: never more than 3 TrainJobs at once.
"""

from __future__ import annotations

import json
from datetime import datetime

from kubernetes import client as k8s

from nvcre_argo import contract
from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 600
CRASHING_NODE = "gpu-node-3"
MAX_CONCURRENT = 3
FAULT_PLAN = {
    "defaults": {"durationSeconds": 4},
    "nodes": {CRASHING_NODE: {"fault": "crash", "exitCode": 1, "afterSeconds": 1}},
}


def _finished_at(trainjob: dict[str, object]) -> datetime:
    conditions = (trainjob.get("status") or {}).get("conditions") or []  # type: ignore[union-attr]
    (end,) = [c for c in conditions if c["type"] in ("Complete", "Failed") and c["status"] == "True"]
    return datetime.fromisoformat(end["lastTransitionTime"])


def most_at_once(trainjobs: list[dict[str, object]]) -> int:
    """The largest number of TrainJobs that existed unfinished at the moment one of them was created."""
    spans = [
        (datetime.fromisoformat(str(item["metadata"]["creationTimestamp"])), _finished_at(item))  # type: ignore[index]
        for item in trainjobs
    ]
    return max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans)


def test_one_runner_pod_runs_every_group_and_each_group_is_a_node_it_completes(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    certification = scenario.example_certification(
        namespace,
        categories=[
            {
                "domain": "diagnostics",
                "variant": "dcgm-level1",
                "options": {"maxConcurrent": MAX_CONCURRENT, "timeoutPerJob": "5m"},
            }
        ],
    )
    parent = scenario.start_certification(
        sim.kubeconfig, api, certification, fault_plan=FAULT_PLAN, compile_options=["--shared-runner"]
    )

    status = scenario.finished_status(api, namespace, parent, phase="Failed", result="FAILED", timeout_s=RUN_TIMEOUT_S)
    (dcgm,) = status["categoryStatuses"]
    nodes = scenario.category_nodes(api, namespace, dcgm)
    assert {name: reason for name, (reason, _) in nodes.failed.items()} == {CRASHING_NODE: "WorkloadFailed"}, (
        json.dumps(status, indent=1)
    )
    assert nodes.succeeded == [f"gpu-node-{index}" for index in (1, 2, 4, 5, 6, 7, 8)]

    (child,) = scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    assert child["spec"]["entrypoint"] == contract.shared_runner_entrypoint(contract.TEMPLATE_CATEGORY)
    graph = list(child["status"]["nodes"].values())
    pods = sorted(node["templateName"] for node in graph if node["type"] == "Pod")
    assert pods == ["cleanup", "plan", "record", "run-groups"], pods

    groups = [node for node in graph if node["templateName"] == contract.TEMPLATE_GROUP]
    assert len(groups) == 8
    assert {node["type"] for node in groups} == {"Suspend"}
    failed = [node for node in groups if node["phase"] != "Succeeded"]
    assert len(failed) == 1, [(node["displayName"], node["phase"]) for node in groups]
    (crashed,) = failed
    assert crashed["phase"] == "Failed"
    assert crashed["message"].startswith(f"1 node(s) failed: {CRASHING_NODE} (WorkloadFailed)"), crashed["message"]
    outputs = {item["name"]: item.get("value") for item in crashed["outputs"]["parameters"]}
    assert outputs[contract.OUTPUT_FAILED_NODE_COUNT] == "1"
    assert all(node.get("finishedAt") for node in groups)

    (runner,) = [node for node in graph if node["type"] == "Pod" and node["templateName"] == "run-groups"]
    assert runner["phase"] == "Failed"
    assert "7/8 group(s) passed" in runner["message"], runner["message"]

    trainjobs = scenario.trainjobs(api, namespace)
    assert len(trainjobs) == 8
    assert most_at_once(trainjobs) <= MAX_CONCURRENT
    assert scenario.unfinished_trainjobs(api, namespace) == []
