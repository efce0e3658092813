"""An overflow group, run by Argo's real controller: it runs in its host group's step, right after the host.

Eight nodes in two NVLink cliques of four, NCCL in groups of three: `g0` = gpu-node-1..3 and `g1` =
gpu-node-5..7 (each inside its clique), and the two left over, gpu-node-4 and gpu-node-8, are topped up with
gpu-node-1 from `g0`, their host, as `g2-overflow`. gpu-node-8 crashes. What must hold:

- the category Workflow has one fan-out, `g0` and `g1`, and nothing drawn for the overflow group;
- the overflow TrainJob starts only after its host's TrainJob completed (they share gpu-node-1);
- exactly gpu-node-8 fails (WorkloadFailed): not the borrowed gpu-node-1, which passed in `g0`, nor gpu-node-4,
  which is not certified either (its only group crashed);
- the host's step says which of its two groups failed and why.
"""

from __future__ import annotations

import json
from datetime import datetime

from kubernetes import client as k8s

from nvcre_argo.names import LABEL_GROUP
from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 600
CRASHING_NODE = "gpu-node-8"
FAULT_PLAN = {
    "defaults": {"durationSeconds": 4},
    "nodes": {CRASHING_NODE: {"fault": "crash", "exitCode": 1, "afterSeconds": 1}},
}


def test_an_overflow_group_runs_after_its_host_in_the_hosts_step_and_blames_only_its_faulty_node(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    certification = scenario.example_certification(
        namespace,
        categories=[
            {
                "domain": "communication",
                "variant": "nccl-all-reduce",
                "options": {"nodesPerJob": 3, "timeoutPerJob": "5m"},
            }
        ],
    )
    parent = scenario.start_certification(sim.kubeconfig, api, certification, fault_plan=FAULT_PLAN)

    status = scenario.finished_status(api, namespace, parent, phase="Failed", result="FAILED", timeout_s=RUN_TIMEOUT_S)
    (nccl,) = status["categoryStatuses"]
    nodes = scenario.category_nodes(api, namespace, nccl)
    assert {name: reason for name, (reason, _) in nodes.failed.items()} == {CRASHING_NODE: "WorkloadFailed"}, (
        json.dumps(status, indent=1)
    )
    # gpu-node-4's only group crashed: neither failed nor certified. gpu-node-1 passed in g0.
    assert nodes.succeeded == [f"gpu-node-{index}" for index in (1, 2, 3, 5, 6, 7)]

    by_group = {item["metadata"]["labels"][LABEL_GROUP]: item for item in scenario.trainjobs(api, namespace)}
    assert sorted(by_group) == ["g0", "g1", "g2-overflow"]
    overflow_created = datetime.fromisoformat(by_group["g2-overflow"]["metadata"]["creationTimestamp"])
    assert overflow_created >= scenario.trainjob_finished_at(by_group["g0"]).replace(microsecond=0)

    (child,) = scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    graph = child["status"]["nodes"].values()
    assert [node["displayName"] for node in graph if "overflow" in node["displayName"]] == []
    (host,) = [node for node in graph if scenario.is_group_node(node) and node["displayName"].startswith("group(0:g0)")]
    assert host["phase"] == "Failed"
    assert f"g2-overflow: 1 node(s) failed: {CRASHING_NODE} (WorkloadFailed)" in host["message"], host["message"]
    assert scenario.unfinished_trainjobs(api, namespace) == []
