"""`measurementTimeout` and `rdmaDeviceAccess: hostPath`, run by Argo's real controller on the simulated cluster.

One Certification, one run, two nodes (one 2-node group per category), two categories in order:

    0  nccl-all-reduce, threshold busBandwidthGBps  gpu-node-1's group prints no result table (`nomeasurement`):
                                                    MeasurementTimeout after the spec's measurementTimeout 20s,
                                                    both nodes ThresholdViolation (a threshold was set)
    1  nemotron5-8b, rdmaDeviceAccess: hostPath     runs and passes (training ignores `nomeasurement`); its
                                                    worker pods, as the API server admitted them, mount host
                                                    /dev/infiniband and run privileged

The same timeout without a threshold (no node blamed) is shown by the unit and integration tests of the run
step; a third category here would add a minute for a branch they already cover.

The wait is measured from outside the product: from the TrainJob's `Complete` condition (the Trainer
controller's clock) to the creation of the group's result ConfigMap (the API server's), which the run step
writes once its verdict is known. It is at least the 20 s waited (less 1 s of timestamp rounding) and at most
that plus one 10 s poll of the TrainJob and a few seconds of step overhead.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from kubernetes import client as k8s

from nvcre_argo.names import LABEL_GROUP, LABEL_RECORD, LABEL_WORKFLOW, trainjob_name
from nvcre_argo.results import RECORD_GROUP_RESULT
from nvcre_argo.steps.following import RunSettings
from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 300
NODES = ["gpu-node-1", "gpu-node-2"]
MEASUREMENT_TIMEOUT_S = 20
RUN_STEP_POLL_S = RunSettings().poll_seconds  # how late the run step may notice the TrainJob completed
STEP_OVERHEAD_S = 5
TIMESTAMP_ROUNDING_S = 1
API_TIME = "%Y-%m-%dT%H:%M:%SZ"
ROLE_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
HOST_RDMA_VOLUME = {"name": "host-infiniband", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}}
HOST_RDMA_MOUNT = {"name": "host-infiniband", "mountPath": "/dev/infiniband"}

FAULT_PLAN = {"defaults": {"durationSeconds": 3}, "nodes": {"gpu-node-1": {"fault": "nomeasurement"}}}
NCCL = {"domain": "communication", "variant": "nccl-all-reduce"}
GROUP_OF_TWO = {"nodesPerJob": 2, "timeoutPerJob": "5m"}


def certification(namespace: str) -> dict[str, Any]:
    return scenario.example_certification(
        namespace,
        target={"nodeSelector": {"nvidia.com/gpu.present": "true"}, "nodeNames": NODES},
        measurementTimeout=f"{MEASUREMENT_TIMEOUT_S}s",  # every category's, from the spec
        categories=[
            {**NCCL, "options": {**GROUP_OF_TWO, "thresholds": {"busBandwidthGBps": "value >= 100"}}},
            {
                "domain": "training",
                "variant": "nemotron5-8b",
                "options": {
                    **GROUP_OF_TWO,
                    "maxSteps": 10,
                    "rdmaDeviceAccess": "hostPath",
                    "resources": {"limits": {"cpu": "6", "memory": "48Gi"}, "requests": {"cpu": "4", "memory": "32Gi"}},
                },
            },
        ],
    )


def run_capturing_worker_pods(api: k8s.ApiClient, namespace: str, parent: str) -> tuple[str, dict[str, Any]]:
    """Wait for the certification Workflow's end, keeping every rank pod as first seen once scheduled (JobSet
    may delete a finished group's pods; a pod listed before the scheduler bound it has no `nodeName` yet):
    (final phase, pods by name)."""
    core = k8s.CoreV1Api(api)
    seen: dict[str, Any] = {}

    def done() -> bool:
        for pod in core.list_namespaced_pod(namespace, label_selector=f"{ROLE_LABEL}=node").items:
            if pod.metadata.name not in seen or (
                pod.spec.node_name and not seen[pod.metadata.name]["spec"].get("nodeName")
            ):
                seen[pod.metadata.name] = api.sanitize_for_serialization(pod)
        return scenario.workflow_phase(api, namespace, parent) in scenario.FINAL_PHASES

    scenario.wait_for(
        f"Workflow {namespace}/{parent} to finish",
        done,
        timeout_s=RUN_TIMEOUT_S,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )
    return scenario.workflow_phase(api, namespace, parent), seen


def category_workflow(api: k8s.ApiClient, namespace: str, index: int) -> dict[str, Any]:
    children = scenario.workflows(
        api, namespace, f"nvcre.nvidia.com/role=category,nvcre.nvidia.com/category-index={index}"
    )
    (child,) = children
    return child


def api_time(text: str) -> datetime:
    return datetime.strptime(text, API_TIME)


def measured_wait_seconds(api: k8s.ApiClient, namespace: str, workflow: str) -> float:
    """From the group's TrainJob completing to its result being recorded, by the controllers' clocks."""
    trainjob = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", trainjob_name(workflow, "g0")
    )
    (complete,) = [c for c in trainjob["status"]["conditions"] if c["type"] == "Complete" and c["status"] == "True"]
    selector = f"{LABEL_WORKFLOW}={workflow},{LABEL_GROUP}=g0,{LABEL_RECORD}={RECORD_GROUP_RESULT}"
    (result,) = k8s.CoreV1Api(api).list_namespaced_config_map(namespace, label_selector=selector).items
    return (
        result.metadata.creation_timestamp.replace(tzinfo=None) - api_time(complete["lastTransitionTime"])
    ).total_seconds()


def test_a_measurement_that_never_appears_times_out_and_hostpath_rdma_workers_run_privileged(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    started = time.monotonic()
    parent = scenario.start_certification(sim.kubeconfig, api, certification(namespace), fault_plan=FAULT_PLAN)

    phase, worker_pods = run_capturing_worker_pods(api, namespace, parent)
    assert phase == "Failed", scenario.workflow_tree(api, namespace)
    status = scenario.finished_certification_status(api, namespace, result="FAILED")
    thresholded, training = status["categoryStatuses"]
    assert [c["status"] for c in status["categoryStatuses"]] == ["Failed", "Succeeded"], status

    # 0: no measurement within measurementTimeout, a threshold set: both nodes ThresholdViolation.
    nodes = scenario.category_nodes(api, namespace, thresholded)
    assert {name: reason for name, (reason, _) in nodes.failed.items()} == dict.fromkeys(NODES, "ThresholdViolation")
    assert nodes.succeeded == []
    message = nodes.failed["gpu-node-1"][1]
    assert message.startswith("MeasurementTimeout: "), message
    assert f"within measurementTimeout {MEASUREMENT_TIMEOUT_S}s (waited {MEASUREMENT_TIMEOUT_S}s" in message
    assert "no measurement lines in the log of pod" in message
    assert message.endswith('missing measurement for threshold "busBandwidthGBps"'), message

    # It waited measurementTimeout, by the controllers' clocks, not the product's own statement.
    wait = measured_wait_seconds(api, namespace, category_workflow(api, namespace, 0)["metadata"]["name"])
    low = MEASUREMENT_TIMEOUT_S - TIMESTAMP_ROUNDING_S
    high = MEASUREMENT_TIMEOUT_S + RUN_STEP_POLL_S + STEP_OVERHEAD_S + TIMESTAMP_ROUNDING_S
    assert low <= wait <= high, wait

    # 1: rdmaDeviceAccess hostPath: the training workers ran and passed, privileged with host /dev/infiniband.
    nodes = scenario.category_nodes(api, namespace, training)
    assert (nodes.failed, nodes.succeeded) == ({}, NODES)
    training_job = trainjob_name(category_workflow(api, namespace, 1)["metadata"]["name"], "g0")
    by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in worker_pods.values():
        by_job.setdefault(pod["metadata"]["labels"][JOBSET_LABEL], []).append(pod)
    workers = by_job.pop(training_job)
    assert sorted(pod["spec"]["nodeName"] for pod in workers) == NODES
    for pod in workers:
        container = pod["spec"]["containers"][0]
        assert HOST_RDMA_VOLUME in pod["spec"]["volumes"]
        assert HOST_RDMA_MOUNT in container["volumeMounts"]
        assert container["securityContext"]["privileged"] is True
    # The NCCL category left rdmaDeviceAccess unset: its workers are as before, unprivileged.
    assert len(by_job) == 1, sorted(by_job)
    for pod in (pod for pods in by_job.values() for pod in pods):
        assert HOST_RDMA_VOLUME not in pod["spec"]["volumes"]
        assert "privileged" not in pod["spec"]["containers"][0].get("securityContext", {})

    assert scenario.unfinished_trainjobs(api, namespace) == []
    print(f"\nmeasured wait {wait:.0f} s; the run took {time.monotonic() - started:.0f} s")
