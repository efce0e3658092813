"""Injected faults on known nodes, run by Argo's real controller: exactly the faulty nodes are reported.

One Certification, one run, several faults at once: an NCCL all-reduce in groups of two nodes (so every
faulty node has a healthy groupmate that must not be blamed) followed by a per-node DCGM diagnostic (the
next category still runs after a failed one). Each fault kind sits on its own group:

    gpu-node-1  crash (exit 137)  -> WorkloadFailed; its groupmate is neither failed nor certified
    gpu-node-3  slow NCCL link    -> the group misses the threshold (a collective has one bandwidth), so both
                                     nodes are confirmed with a node of the healthy group: gpu-node-3 again
                                     ThresholdViolation, gpu-node-4 passes and is certified
    gpu-node-5  cordoned mid-run  -> HardwareFailureDetected (the health monitor), groupmate not blamed
    gpu-node-7  healthy group     -> certified

Asserted on what a user reads: the failed-node ConfigMaps, the Certification's verdict, no TrainJob left.
"""

from __future__ import annotations

import json

from kubernetes import client as k8s

from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 900
THRESHOLD_GBPS = 100

FAULT_PLAN = {
    "defaults": {"durationSeconds": 4, "busBandwidthGBps": 380},
    "nodes": {
        "gpu-node-1": {"fault": "crash", "exitCode": 137, "afterSeconds": 1},
        "gpu-node-3": {"fault": "slow", "busBandwidthGBps": 12},
        "gpu-node-5": {"fault": "health", "afterSeconds": 1, "cordon": True},
    },
}


def faulty_certification(namespace: str) -> dict[str, object]:
    return scenario.example_certification(
        namespace,
        categories=[
            {
                "domain": "communication",
                "variant": "nccl-all-reduce",
                "options": {
                    "nodesPerJob": 2,
                    "timeoutPerJob": "5m",
                    "thresholds": {"busBandwidthGBps": f"value >= {THRESHOLD_GBPS}"},
                },
            },
            {"domain": "diagnostics", "variant": "dcgm-level1"},
        ],
    )


def test_each_faulty_node_is_reported_with_its_reason_and_no_healthy_groupmate_is_blamed(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    parent = scenario.start_certification(sim.kubeconfig, api, faulty_certification(namespace), fault_plan=FAULT_PLAN)

    status = scenario.finished_status(api, namespace, parent, phase="Failed", result="FAILED", timeout_s=RUN_TIMEOUT_S)
    nccl, dcgm = status["categoryStatuses"]
    assert (nccl["status"], dcgm["status"]) == ("Failed", "Failed"), json.dumps(status, indent=1)

    nccl_nodes = scenario.category_nodes(api, namespace, nccl)
    reasons = {name: reason for name, (reason, _) in nccl_nodes.failed.items()}
    assert reasons == {
        "gpu-node-1": "WorkloadFailed",
        "gpu-node-3": "ThresholdViolation",
        "gpu-node-5": "HardwareFailureDetected",
    }, scenario.workflow_tree(api, namespace)
    assert "exited 137" in nccl_nodes.failed["gpu-node-1"][1]
    slow = nccl_nodes.failed["gpu-node-3"][1]
    assert slow.startswith("failed in g1, then again in confirmation job c1-g0 with known-healthy gpu-node-7: "), slow
    assert nccl_nodes.succeeded == ["gpu-node-4", "gpu-node-7", "gpu-node-8"]

    # The per-node diagnostic ran after the failed category: only the crashing node fails it. The node
    # cordoned during the first category is still cordoned, so the plan excludes it (neither list).
    dcgm_nodes = scenario.category_nodes(api, namespace, dcgm)
    assert {name: reason for name, (reason, _) in dcgm_nodes.failed.items()} == {"gpu-node-1": "WorkloadFailed"}
    assert dcgm_nodes.succeeded == [f"gpu-node-{index}" for index in (2, 3, 4, 6, 7, 8)]
    assert status["excludedNodes"] >= 1, json.dumps(status, indent=1)
    assert scenario.unfinished_trainjobs(api, namespace) == []
    assert scenario.running_workload_pods(api, namespace) == []


def test_a_measurement_that_cannot_be_read_is_never_a_pass(sim: SimCluster, api: k8s.ApiClient, namespace: str) -> None:
    """The kubelet refuses every workload log: the NCCL test succeeds but nothing can be measured. The run step
    reads the log again until measurementTimeout (short here) passes, then the group fails with
    MeasurementTimeout. Without thresholds nothing is violated, so no node is blamed, but no node is certified
    either, and the reason is in the category's result."""
    certification = scenario.example_certification(
        namespace,
        categories=[
            {"domain": "communication", "variant": "nccl-all-reduce", "options": {"measurementTimeout": "10s"}}
        ],
    )
    parent = scenario.start_certification(
        sim.kubeconfig, api, certification, fault_plan="defaults: {logsReadable: false}\n"
    )

    status = scenario.finished_status(api, namespace, parent, phase="Failed", result="FAILED", timeout_s=RUN_TIMEOUT_S)
    (nccl,) = status["categoryStatuses"]
    nodes = scenario.category_nodes(api, namespace, nccl)
    assert (nodes.failed, nodes.succeeded) == ({}, [])
    report = scenario.run_cli("report", "gpu-cluster-cert", "-n", namespace, kubeconfig=sim.kubeconfig, check=False)
    assert report.returncode == 1
    assert "MeasurementTimeout: " in scenario.workflow_tree(api, namespace) + report.stdout, report.stdout
