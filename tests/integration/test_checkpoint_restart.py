"""Checkpoint restart in the run step (issue 13 item 1), against a real kube-apiserver with the Trainer CRDs.

As in `test_steps.py`, the test plays the controllers: it writes the TrainJob conditions the Trainer would and
the pods a JobSet would, and feeds the last rank's log end poll by poll (no kubelet serves pods/log here), on
a fake clock. Expected values come from the reference (`nvcre-contract.md` §7.10: a failed workload is
restarted while restarts are left and a checkpoint was recorded; without one the failure is final; the
restart keeps the labels) and from the goodput formula there, never from the step's output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import PERSISTENT_VOLUME_CLAIMS, TRAINING_RUNTIMES
from nvcre_argo.measure.thresholds import GOODPUT_RATIO
from nvcre_argo.render.trainjob import CHECKPOINT_DIR_ENV
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.restarts import RESTARTS_ANNOTATION
from nvcre_argo.steps.stall import TrainingLog
from tests.integration.steps_support import (
    NodeSet,
    StepInterruptedError,
    create_pending_pod,
    create_running_pod,
    interrupt,
    nothing,
    owner_reference,
    schedule_pod,
    set_trainjob_condition,
    trainjobs,
)
from tests.integration.test_steps import (
    NEMOTRON,
    RUNTIME,
    TRAINJOB,
    WORKFLOW,
    Step,
    canned_measure,
    canned_training_log,
)
from tests.integration.test_steps import make_step as _make_step

CLAIM = f"{WORKFLOW}-checkpoints"
OPTIONS = {
    "nodesPerJob": 2,
    "timeoutPerJob": "10m",
    "startupStallTimeoutSeconds": 100,
    "enableCheckpoint": True,
    "saveInterval": 10,
    "maxRestarts": 1,
    "storageClassName": "shared-rwx",
    "storageSize": "2Ti",
}
CHECKPOINT_DIR = f"/mnt/checkpoints/{TRAINJOB}"
RESTARTED = f"{TRAINJOB}-r1"


def line(iteration: int, second: int, elapsed_ms: float) -> str:
    return (
        f" [2026-01-12 10:00:{second:02d}.000000] iteration {iteration:8d}/      40 | consumed samples: "
        f"{iteration * 8:12d} | elapsed time per iteration (ms): {elapsed_ms:.1f} | throughput per GPU "
        "(TFLOP/s/GPU): 400.0 |\n"
    )


def saved(iteration: int) -> str:
    return (
        f"saving checkpoint at iteration {iteration:7d} to {CHECKPOINT_DIR} in torch_dist format\n"
        f"  successfully saved checkpoint from iteration {iteration:7d} to {CHECKPOINT_DIR} [ t 1/1, p 1/1 ]\n"
    )


def loaded(iteration: int) -> str:
    return (
        f" loading distributed checkpoint from {CHECKPOINT_DIR} at iteration {iteration}\n"
        f"  successfully loaded checkpoint from {CHECKPOINT_DIR} [ t 1/1, p 1/1 ] at iteration {iteration}\n"
    )


# The first workload: warm-up, one steady line, checkpoint 20. The restarted one resumes there and trains on:
# its last line is steady (1 s per iteration over the 10 s between its lines: a goodput of 1.0 on its own).
BEFORE_CRASH = line(1, 0, 2500.0) + line(10, 5, 500.0) + line(20, 10, 500.0) + saved(20)
RESUMED = loaded(20) + line(30, 20, 1000.0) + line(40, 30, 1000.0)


def logs(*reads: str) -> dict[str, TrainingLog]:
    """The logs a run reads: the last rank's ends are `reads` in turn; the first rank's (its checkpoint lines)
    is read right after, in the same poll, and shows the same end (one node's group: the same pod)."""
    training_log, done = canned_training_log(*reads)

    def checkpoint_log(kube: KubeClient, context: StepContext, pods: Any) -> str:
        del kube, context, pods
        return done[-1] if done else ""

    return {"training_log": training_log, "checkpoint_log": checkpoint_log}


def make_step(kube: KubeClient, nodes: NodeSet) -> Step:
    return _make_step(kube, nodes, NEMOTRON, OPTIONS)


def fail(step: Step, name: str = TRAINJOB) -> Callable[[], None]:
    return lambda: set_trainjob_condition(step.kube, step.namespace, name, "Failed", "FailedJobs", message="rank died")


def complete(step: Step, name: str) -> Callable[[], None]:
    return lambda: set_trainjob_condition(step.kube, step.namespace, name, "Complete", "AllJobsCompleted")


def test_the_plan_step_creates_the_checkpoint_pvc_and_the_ranks_mount_it(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes)

    step.plan()

    claim = kube.get(PERSISTENT_VOLUME_CLAIMS, CLAIM, step.namespace)
    assert claim is not None
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Ti"
    assert claim["spec"]["storageClassName"] == "shared-rwx"
    assert claim["metadata"]["ownerReferences"] == [owner_reference(step.context)]
    runtime = kube.get(TRAINING_RUNTIMES, RUNTIME, step.namespace)
    assert runtime is not None
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]["spec"]
    assert {"name": "checkpoints", "persistentVolumeClaim": {"claimName": CLAIM}} in pod["volumes"]
    assert {"name": "checkpoints", "mountPath": "/mnt/checkpoints"} in pod["containers"][0]["volumeMounts"]


def test_a_workload_that_fails_after_a_checkpoint_is_restarted_from_it_and_its_costs_are_recorded(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes)
    read = logs(BEFORE_CRASH, BEFORE_CRASH, "torchrun: starting\n", RESUMED)  # the first read before its pod exists

    def crash_and_hold_the_restart_in_scheduling() -> None:
        fail(step)()
        create_pending_pod(kube, step.namespace, name="r1-rank-0", trainjob=RESTARTED, message="0/2 nodes free")

    # t=0 the first workload runs and has saved iteration 20; t=10 it failed; the restart waits in scheduling
    # until t=15, then shows its first iteration at t=20 and completes at t=21.
    result, _ = step.run(
        "g0",
        [
            (0, lambda: create_running_pod(kube, step.namespace, name="r0-rank-0", trainjob=TRAINJOB)),
            (10, crash_and_hold_the_restart_in_scheduling),
            (5, lambda: schedule_pod(kube, step.namespace, name="r1-rank-0")),
            (5, nothing),
            (1, complete(step, RESTARTED)),
        ],
        measure=canned_measure(RESUMED),
        **read,
    )

    assert result.succeeded, result.iterations[0].message
    (iteration,) = result.iterations
    assert iteration.trainjob == RESTARTED
    (restart,) = iteration.restarts
    assert restart["trainjob"] == TRAINJOB
    assert restart["checkpoint_iteration"] == 20
    assert restart["lost_work_seconds"] == 10  # saved when first seen at t=0, failed at t=10
    assert restart["reschedule_seconds"] == 5  # failed at t=10, the restart running at t=15
    assert restart["resume_seconds"] == 5  # its first iteration seen 5 s after it started running
    assert restart["resumed_from"] == 20
    # goodput = 1.0 (the last workload's own log) x (t_w - t_ch - t_rm - t_re) / (t_w - t_re), t_w = 21 s
    assert iteration.measurements[GOODPUT_RATIO] == (21 - 10 - 5 - 5) / (21 - 5)
    restarted = {item["metadata"]["name"]: item for item in trainjobs(kube, step.namespace)}
    assert set(restarted) == {RESTARTED}, "the failed workload was deleted before the restart was created"
    trainer_env = {item["name"]: item["value"] for item in restarted[RESTARTED]["spec"]["trainer"]["env"]}
    assert trainer_env[CHECKPOINT_DIR_ENV] == CHECKPOINT_DIR, "the restart resumes from the first one's directory"
    assert RESTARTS_ANNOTATION in restarted[RESTARTED]["metadata"]["annotations"]
    assert restarted[RESTARTED]["metadata"]["labels"]["nvcre.nvidia.com/group"] == "g0"


def test_a_workload_that_fails_before_any_checkpoint_fails_for_good(kube: KubeClient, nodes: NodeSet) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes)
    read = logs(line(1, 0, 2500.0) + line(10, 5, 500.0))

    result, _ = step.run("g0", [(10, fail(step))], **read)

    assert not result.succeeded
    assert result.iterations[0].restarts == []
    assert {node["name"] for node in result.iterations[0].failed_nodes} == set(members)
    assert [item["metadata"]["name"] for item in trainjobs(kube, step.namespace)] == [TRAINJOB]


def test_no_restart_is_left_after_max_restarts(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes)
    read = logs(BEFORE_CRASH, RESUMED + saved(40))

    result, _ = step.run("g0", [(10, fail(step)), (10, fail(step, RESTARTED))], **read)

    assert not result.succeeded
    (iteration,) = result.iterations
    assert iteration.trainjob == RESTARTED
    assert [item["trainjob"] for item in iteration.restarts] == [TRAINJOB]
    assert [item["metadata"]["name"] for item in trainjobs(kube, step.namespace)] == [RESTARTED]


def test_a_retried_step_pod_follows_the_restarted_workload_and_keeps_its_history(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes)
    read = logs(BEFORE_CRASH, RESUMED)

    with pytest.raises(StepInterruptedError):
        step.run("g0", [(10, fail(step)), (1, interrupt)], **read)
    result, _ = step.run("g0", [(1, complete(step, RESTARTED))], measure=canned_measure(RESUMED), **read)

    assert result.succeeded
    assert [item["trainjob"] for item in result.iterations[0].restarts] == [TRAINJOB]
    assert [item["metadata"]["name"] for item in trainjobs(kube, step.namespace)] == [RESTARTED]
