"""Checkpoint restart (`enableCheckpoint`, `maxRestarts`), run by Argo's real controller on the simulated cluster.

One Certification, one run, one training category (nemotron5-8b, 40 steps, `--log-interval 10`,
`saveInterval: 10`, `maxRestarts: 1`) on six nodes in three 2-node groups that run at once. The category's
checkpoint PVC is bound by the real controller-manager to a static ReadWriteMany volume of the cluster; the
simulated ranks save to it and a restarted workload resumes from what is there (`tests/sim/checkpoints.py`):

    gpu-node-1, gpu-node-2   gpu-node-1 crashes once (`transient`) after the first checkpoint (iteration 10):
                             the run step restarts the workload, which loads iteration 10 and passes
    gpu-node-3, gpu-node-4   gpu-node-3 crashes before any checkpoint: failed for good, never restarted
    gpu-node-5, gpu-node-6   gpu-node-5 crashes on every workload, each time after a checkpoint: restarted
                             once (maxRestarts), then failed

What the reference requires (nvcre-contract.md §7.10) and what the test checks: a restart only with a
checkpoint and restarts left, from that checkpoint, in the same queue (same labels); the restart count and
lost work in the report. When each crash comes is computed with the simulator's own save-time helper, so the
scenario says "after the first checkpoint" by construction, not by a guessed number of seconds.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s

from nvcre_argo.names import LABEL_RECORD, LABEL_WORKFLOW
from nvcre_argo.results import RECORD_GROUP_RESULT, GroupResultRecord, read_group_result
from nvcre_argo.steps.following import RunSettings
from tests.sim import scenario
from tests.sim.cluster import SimCluster
from tests.sim.storage import SHARED_STORAGE_CLASS
from tests.sim.workload import checkpoint_save_seconds

RUN_TIMEOUT_S = 420
NODES = [f"gpu-node-{index}" for index in range(1, 7)]
TRAIN_ITERS = 40
LOG_INTERVAL = 10  # nemotron's `--log-interval`
SAVE_INTERVAL = 10
DURATION_S = 50
# The late crashes come well over a run poll after the first checkpoint is printed (checked in the test), so the
# run step sees the save while the workload runs. A crash within a poll of its save is seen only if the failed
# rank's log can still be read when the step sees the failure, and JobSet may have deleted the pod by then.
CRASH_AFTER_S = 60
RUN_STEP_POLL_S = RunSettings().poll_seconds
EARLY_CRASH_S = 2

FAULT_PLAN = {
    "defaults": {"durationSeconds": DURATION_S, "stepTimeMs": 500},
    "nodes": {
        "gpu-node-1": {"fault": "transient", "afterSeconds": CRASH_AFTER_S, "exitCode": 137},
        "gpu-node-3": {"fault": "crash", "afterSeconds": EARLY_CRASH_S, "exitCode": 1},
        "gpu-node-5": {"fault": "crash", "afterSeconds": CRASH_AFTER_S, "exitCode": 1},
    },
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
                    "startupStallTimeoutSeconds": 120,
                    "maxSteps": TRAIN_ITERS,
                    "enableCheckpoint": True,
                    "saveInterval": SAVE_INTERVAL,
                    "maxRestarts": 1,
                    "storageClassName": SHARED_STORAGE_CLASS,
                    "storageSize": "1Ti",
                    "resources": {"limits": {"cpu": "6", "memory": "48Gi"}, "requests": {"cpu": "4", "memory": "32Gi"}},
                },
            },
        ],
    )


def saves_before(crash_after_s: float, resume_from: int | None = None) -> list[int]:
    return [iteration for iteration, _ in save_times(crash_after_s, resume_from)]


def save_times(crash_after_s: float, resume_from: int | None = None) -> list[tuple[int, float]]:
    return checkpoint_save_seconds(
        train_iters=TRAIN_ITERS,
        log_interval=LOG_INTERVAL,
        save_interval=SAVE_INTERVAL,
        duration_seconds=DURATION_S,
        resume_from=resume_from,
        crash_after_seconds=crash_after_s,
    )


def group_results(api: k8s.ApiClient, namespace: str, workflow: str) -> dict[tuple[str, ...], GroupResultRecord]:
    """Each group's recorded result, by its nodes."""
    selector = f"{LABEL_WORKFLOW}={workflow},{LABEL_RECORD}={RECORD_GROUP_RESULT}"
    found = k8s.CoreV1Api(api).list_namespaced_config_map(namespace, label_selector=selector).items
    results = [read_group_result(api.sanitize_for_serialization(item)) for item in found]
    return {tuple(result["nodes"]): result for result in results}


def test_a_workload_that_fails_after_a_checkpoint_resumes_from_it_and_one_without_fails_for_good(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    # The scenario as the simulator will play it: the first checkpoint comes before the late crashes, and
    # before the early one nothing is saved; the restarted run of gpu-node-5 saves again before crashing.
    assert saves_before(CRASH_AFTER_S) == [10]
    assert saves_before(EARLY_CRASH_S) == []
    assert saves_before(CRASH_AFTER_S, resume_from=10) != []
    for resume_from in (None, 10):
        last_save_at = save_times(CRASH_AFTER_S, resume_from)[-1][1]
        assert CRASH_AFTER_S - last_save_at > 1.5 * RUN_STEP_POLL_S, "the step must see a save before the crash"
    sim.create_shared_storage(volumes=1, capacity="1Ti")
    parent = scenario.start_certification(sim.kubeconfig, api, certification(namespace), fault_plan=FAULT_PLAN)

    status = scenario.finished_status(api, namespace, parent, phase="Failed", result="FAILED", timeout_s=RUN_TIMEOUT_S)
    (training,) = status["categoryStatuses"]
    nodes = scenario.category_nodes(api, namespace, training)
    assert {name: reason for name, (reason, _) in nodes.failed.items()} == {
        "gpu-node-3": "WorkloadFailed",
        "gpu-node-5": "WorkloadFailed",
    }
    assert sorted(nodes.succeeded) == NODES[:2]

    (workflow,) = scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    name = workflow["metadata"]["name"]
    claim = k8s.CoreV1Api(api).read_namespaced_persistent_volume_claim(f"{name}-checkpoints", namespace)
    assert claim.status.phase == "Bound", claim.status
    assert [owner.uid for owner in claim.metadata.owner_references] == [workflow["metadata"]["uid"]]

    results = group_results(api, namespace, name)
    assert sorted(results) == [tuple(NODES[0:2]), tuple(NODES[2:4]), tuple(NODES[4:6])], results
    for members, result in sorted(results.items()):
        print(f"group {', '.join(members)}: restarts {json.dumps(result['iterations'][0]['restarts'])}")
    (resumed,) = results[tuple(NODES[0:2])]["iterations"]
    assert resumed["succeeded"], resumed["message"]
    (restart,) = resumed["restarts"]
    assert (restart["checkpoint_iteration"], restart["resumed_from"]) == (10, 10), restart
    assert resumed["trainjob"].endswith("-r1")
    assert resumed["trainjob"].removesuffix("-r1") == restart["trainjob"]
    assert 0 <= restart["lost_work_seconds"] < CRASH_AFTER_S, restart
    assert restart["reschedule_seconds"] is not None, restart
    assert restart["reschedule_seconds"] >= 0, restart
    (early,) = results[tuple(NODES[2:4])]["iterations"]
    assert early["restarts"] == [], "no checkpoint, no restart"
    assert not early["trainjob"].endswith("-r1")
    (exhausted,) = results[tuple(NODES[4:6])]["iterations"]
    assert [item["checkpoint_iteration"] for item in exhausted["restarts"]] == [10], exhausted["restarts"]
    assert exhausted["trainjob"].endswith("-r1"), "it failed on its restart, with none left"
    assert not exhausted["succeeded"]

    report = scenario.run_cli(
        "report", "gpu-cluster-cert", "-n", namespace, "-o", "json", kubeconfig=sim.kubeconfig, check=False
    )
    assert report.returncode == 1, report.stderr
    (category,) = json.loads(report.stdout)["categories"]
    assert category["figures"]["checkpointRestarts"] == 2, category["figures"]
    assert category["figures"]["restartLostWorkSec"] >= 0, category["figures"]
