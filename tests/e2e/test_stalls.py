"""Startup and training stalls (`WorkloadStalled`), run by Argo's real controller on the simulated cluster.

One Certification, one run, one training category (nemotron5-8b, 40 steps, `--log-interval 10`) on six nodes
in three 2-node groups that run at once, `startupStallTimeoutSeconds: 20` and `timeoutPerJob: 10m`:

    gpu-node-1, gpu-node-2   gpu-node-1 `stall`s: no iteration is ever logged. Startup stall: failed once 20 s
                             of running time pass without one
    gpu-node-3, gpu-node-4   gpu-node-3 `hang`s at 3.5 s: iterations 1, 10 and 20 are logged (0.5 s per step,
                             the plan's), then nothing. Training stall: failed once no new iteration came for
                             3 x 0.5 s x 10 iterations per line = 15 s
    gpu-node-5, gpu-node-6   healthy: pass

A stall blocks the whole collective, so nothing in a stalled group's result says which node is at fault:
both nodes are suspects, and confirmation (`plan.confirmation`) tests each again with a node of the passed
group, then with a suspect it cleared:

    round 1   c1-g0 gpu-node-1 + gpu-node-5: stalls again, gpu-node-1 convicted
              c1-g1 gpu-node-2 + gpu-node-6: passes, gpu-node-2 cleared
    round 2   c2-g0 gpu-node-3 + gpu-node-2: stalls again, gpu-node-3 convicted
              c2-g1 gpu-node-4 + gpu-node-5: passes, gpu-node-4 cleared

So only the stalling nodes are recorded `WorkloadFailed` (the reference's reason for a stall), with a message
that says `WorkloadStalled` and why, and their healthy partners are certified. Both stalled groups end within
a minute of their TrainJob's creation, by the API server's clock, where `timeoutPerJob` would have taken ten,
and the run step deletes their TrainJobs.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from kubernetes import client as k8s

from nvcre_argo.names import LABEL_GROUP, LABEL_RECORD, LABEL_WORKFLOW
from nvcre_argo.results import RECORD_GROUP_RESULT
from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 300
NODES = [f"gpu-node-{index}" for index in range(1, 7)]
STARTUP_STALL_S = 20
STEP_TIME_S = 0.5
LOG_INTERVAL = 10  # nemotron's `--log-interval`
TRAINING_STALL_S = 3 * STEP_TIME_S * LOG_INTERVAL
# Both stalls are seen within a minute of the TrainJob's creation: the limit, one 10 s poll, pod start-up.
STALL_SEEN_WITHIN_S = 60
TIMESTAMP_ROUNDING_S = 1
API_TIME = "%Y-%m-%dT%H:%M:%SZ"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
ROLE_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"

FAULT_PLAN = {
    "defaults": {"durationSeconds": 6, "stepTimeMs": STEP_TIME_S * 1000},
    "nodes": {"gpu-node-1": {"fault": "stall"}, "gpu-node-3": {"fault": "hang", "afterSeconds": 3.5}},
}


def certification(namespace: str) -> dict[str, Any]:
    return scenario.example_certification(
        namespace,
        target={"nodeSelector": {"nvidia.com/gpu.present": "true"}, "nodeNames": NODES},
        categories=[
            {
                "domain": "training",
                "variant": "nemotron5-8b",
                "options": {
                    "nodesPerJob": 2,
                    "timeoutPerJob": "10m",
                    "startupStallTimeoutSeconds": STARTUP_STALL_S,
                    "maxSteps": 40,
                    "resources": {"limits": {"cpu": "6", "memory": "48Gi"}, "requests": {"cpu": "4", "memory": "32Gi"}},
                },
            },
        ],
    )


def run_capturing_trainjobs(api: k8s.ApiClient, namespace: str, parent: str) -> tuple[str, dict[str, Any]]:
    """Wait for the certification Workflow's end, keeping each TrainJob as first seen with its nodes (the run
    step deletes a stalled group's TrainJob): (final phase, {TrainJob name: {"created": ..., "nodes": [...]}})."""
    core = k8s.CoreV1Api(api)
    seen: dict[str, Any] = {}

    def done() -> bool:
        for trainjob in scenario.trainjobs(api, namespace):
            seen.setdefault(trainjob["metadata"]["name"], {"created": trainjob["metadata"]["creationTimestamp"]})
        for pod in core.list_namespaced_pod(namespace, label_selector=f"{ROLE_LABEL}=node").items:
            entry = seen.setdefault(pod.metadata.labels[JOBSET_LABEL], {})
            if pod.spec.node_name and pod.spec.node_name not in entry.setdefault("nodes", []):
                entry["nodes"].append(pod.spec.node_name)
        return scenario.workflow_phase(api, namespace, parent) in scenario.FINAL_PHASES

    scenario.wait_for(
        f"Workflow {namespace}/{parent} to finish",
        done,
        timeout_s=RUN_TIMEOUT_S,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )
    return scenario.workflow_phase(api, namespace, parent), seen


def api_time(text: str) -> datetime:
    return datetime.strptime(text, API_TIME)


def recorded_after_seconds(api: k8s.ApiClient, namespace: str, workflow: str, group: str, created: str) -> float:
    """From the group's TrainJob being created to its result being recorded, by the API server's clock."""
    selector = f"{LABEL_WORKFLOW}={workflow},{LABEL_GROUP}={group},{LABEL_RECORD}={RECORD_GROUP_RESULT}"
    (result,) = k8s.CoreV1Api(api).list_namespaced_config_map(namespace, label_selector=selector).items
    return (result.metadata.creation_timestamp.replace(tzinfo=None) - api_time(created)).total_seconds()


def test_a_startup_stall_and_a_training_stall_fail_their_groups_long_before_timeout_per_job(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    started = time.monotonic()
    parent = scenario.start_certification(sim.kubeconfig, api, certification(namespace), fault_plan=FAULT_PLAN)

    phase, seen = run_capturing_trainjobs(api, namespace, parent)
    assert phase == "Failed", scenario.workflow_tree(api, namespace)
    status = scenario.finished_certification_status(api, namespace, result="FAILED")
    (training,) = status["categoryStatuses"]
    assert training["status"] == "Failed", training

    nodes = scenario.category_nodes(api, namespace, training)
    assert {name: reason for name, (reason, _) in nodes.failed.items()} == {
        "gpu-node-1": "WorkloadFailed",
        "gpu-node-3": "WorkloadFailed",
    }
    assert sorted(nodes.succeeded) == ["gpu-node-2", "gpu-node-4", "gpu-node-5", "gpu-node-6"]
    startup = nodes.failed["gpu-node-1"][1]
    assert startup.startswith("failed in g0, then again in confirmation job c1-g0 with known-healthy gpu-node-5: "), (
        startup
    )
    assert (
        f"WorkloadStalled: no training iteration within startupStallTimeoutSeconds {STARTUP_STALL_S} (TrainJob/"
        in startup
    ), startup
    training_stall = nodes.failed["gpu-node-3"][1]
    assert training_stall.startswith(
        "failed in g1, then again in confirmation job c2-g0 with known-healthy gpu-node-2: WorkloadStalled: no new "
        "iteration for "
    ), training_stall
    assert (
        f"more than 3 x the average step time {STEP_TIME_S:g}s x {LOG_INTERVAL} iteration(s) per log line "
        f"({TRAINING_STALL_S:.0f}s)" in training_stall
    ), training_stall
    assert training_stall.endswith("last logged iteration 20/40"), training_stall

    # Each stalled group ended after its limit and within a minute, by the API server's clock, not the step's.
    (workflow,) = scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    workflow_name = workflow["metadata"]["name"]
    groups = {tuple(sorted(item.get("nodes", []))): name for name, item in seen.items()}
    confirmations = [("gpu-node-1", "gpu-node-5"), ("gpu-node-2", "gpu-node-3"), ("gpu-node-2", "gpu-node-6")]
    confirmations.append(("gpu-node-4", "gpu-node-5"))
    assert sorted(groups) == sorted([tuple(NODES[0:2]), tuple(NODES[2:4]), tuple(NODES[4:6]), *confirmations]), seen
    waits = {}
    for members, limit in ((tuple(NODES[0:2]), STARTUP_STALL_S), (tuple(NODES[2:4]), TRAINING_STALL_S)):
        trainjob = groups[members]
        group = trainjob.removeprefix(f"{workflow_name}-")
        waits[members] = recorded_after_seconds(api, namespace, workflow_name, group, seen[trainjob]["created"])
        assert limit - TIMESTAMP_ROUNDING_S <= waits[members] <= STALL_SEEN_WITHIN_S, (members, waits[members])

    assert scenario.unfinished_trainjobs(api, namespace) == []
    print(f"\nstalls recorded after {sorted(waits.values())} s; the run took {time.monotonic() - started:.0f} s")
