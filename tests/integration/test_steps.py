"""The in-workflow steps (plan, run, record, cleanup) against a real kube-apiserver with the Trainer, JobSet and
Argo CRDs installed.

No kubelet and no controllers run, so each test plays them: it creates the Nodes, writes the TrainJob status
the Trainer controller would write (`Complete`/`Failed` conditions, Kueue's `spec.suspend`), creates the rank
Pods a JobSet would, and cordons nodes as a health system would. Time is a fake clock the test advances
between polls (`RunSettings.sleep` is the test's script), so nothing waits on wall-clock time. pods/log cannot
be served without a kubelet: the steps must (and do) run on without it, and measurement is driven by feeding
a canned log to `measure_log`.

Expected values are written from the reference (`nvcre-contract.md` §3.7 ConfigMap layout, §7.2 exclusions,
§7.3/§7.5 grouping, §7.7 attribution, §7.8 timeouts and queueing; `argo-hera-trainer.md` §3.3-§3.4 TrainJob
conditions and pod labels), never copied from the steps' output.
"""

from __future__ import annotations

import base64
import fcntl
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nvcre_argo import contract
from nvcre_argo.kube.client import Backoff, KubeClient
from nvcre_argo.kube.connect import connect
from nvcre_argo.kube.follow import Selection
from nvcre_argo.kube.mirror import Mirror
from nvcre_argo.kube.resources import CONFIGMAPS, NODES, PODS, TRAINING_RUNTIMES, TRAINJOBS
from nvcre_argo.names import LABEL_WORKFLOW
from nvcre_argo.plan.model import Exclusion, NodeGroup, Plan, PlanError
from nvcre_argo.plan.storage import plan_from_configmap
from nvcre_argo.render.certification_workflow import category_arguments
from nvcre_argo.steps.category_mirror import CategoryMirror, open_category_mirror
from nvcre_argo.steps.cleanup import cleanup_step
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.following import RunSettings
from nvcre_argo.steps.measurements import measure_log
from nvcre_argo.steps.planning import plan_configmap, plan_step, planned_gpu_values
from nvcre_argo.steps.recording import record_step
from nvcre_argo.steps.running import GroupResult, Measure, run_group
from nvcre_argo.steps.stall import TrainingLog, read_checkpoint_log, read_training_log
from tests.harness.controlplane import Cluster
from tests.integration.steps_support import (
    B200,
    CERTIFICATION,
    GB200,
    SELECTOR_LABEL,
    FakeClock,
    NodeSet,
    Script,
    StepInterruptedError,
    complete_trainjob,
    create_context,
    create_pending_pod,
    create_rank_pod,
    create_running_pod,
    interrupt,
    nothing,
    owner_reference,
    release_pod,
    resolve_category,
    schedule_pod,
    set_trainjob_condition,
    suspend_trainjob,
    trainjobs,
    uid8,
)

ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}
WORKFLOW = "cert-0"
TRAINJOB = "cert-0-g0"  # trainjob_name(WORKFLOW, "g0"): `<workflow>-<group>`, iteration 0 has no suffix
RUNTIME = "cert-0-runtime"
REPO = Path(__file__).resolve().parents[2]
NVCRE_ARGO = str(Path(sys.executable).with_name("nvcre-argo"))


def _no_wait(_seconds: float) -> None:
    """Backoff sleep: pods/log answers 500 without a kubelet, and retrying it must not cost the suite time."""


@pytest.fixture(scope="module")
def kube(control_plane: Cluster) -> KubeClient:
    """The product's client (what `connect` builds), with a backoff that does not sleep."""
    return connect(str(control_plane.kubeconfig)).with_backoff(Backoff(sleep=_no_wait))


@dataclass
class Step:
    """One category Workflow of this test: its context, and what the steps reported."""

    kube: KubeClient
    context: StepContext
    clock: FakeClock = field(default_factory=FakeClock)
    lines: list[str] = field(default_factory=list)
    # The product's floor under a wait on the controllers is ten minutes; these tests' waits are seconds long.
    controller_wait_floor_s: float = 0.0

    @property
    def namespace(self) -> str:
        return self.context.namespace

    def plan(self) -> Plan:
        return plan_step(self.kube, self.context, report=self.lines.append)

    def run(
        self,
        group: str,
        actions: list[tuple[float, Callable[[], None]]],
        *,
        plan: Plan | None = None,
        measure: Measure | None = None,
        matched: int | None = None,
        training_log: TrainingLog | None = None,
        checkpoint_log: TrainingLog | None = None,
        mirror: CategoryMirror | None = None,
    ) -> tuple[GroupResult, Script]:
        """run_group for one planned group, the cluster changing between polls as `actions` say; measured
        from the canned NCCL log unless `measure` says otherwise (no kubelet serves pods/log here). `matched`
        is the plan's candidate count, as the run command passes it, unless the test says otherwise. A training
        category's stall detection reads `training_log` (the last rank's log end on each poll) when given, and a
        checkpointing one `checkpoint_log` (the first rank's). With a `mirror`, the group reads as under the
        shared runner."""
        plan = plan or self.plan()
        (members,) = [item.nodes for item in plan.groups if item.name == group]
        script = Script(self.clock, actions)
        result = run_group(
            self.kube,
            self.context,
            group=group,
            nodes=members,
            gpu=planned_gpu_values(self.kube, self.context),
            settings=RunSettings(
                poll_seconds=0,
                clock=self.clock,
                sleep=script,
                training_log=training_log or read_training_log,
                checkpoint_log=checkpoint_log or read_checkpoint_log,
                mirror=mirror,
                controller_wait_floor_s=self.controller_wait_floor_s,
            ),
            measure=measure or canned_measure(NCCL_LOG),
            report=self.lines.append,
            matched=len(plan.candidates) if matched is None else matched,
        )
        return result, script

    def complete(self, trainjob: str = TRAINJOB) -> Callable[[], None]:
        return lambda: complete_trainjob(self.kube, self.namespace, trainjob)

    def start(self, trainjob: str = TRAINJOB) -> Callable[[], None]:
        """A rank pod of the TrainJob placed and running: only from then on does its running time count."""
        return lambda: create_running_pod(
            self.kube, self.namespace, name=f"{trainjob}-node-0-0-r4nk0", trainjob=trainjob
        )

    def trainjob(self, name: str = TRAINJOB) -> dict[str, Any] | None:
        return self.kube.get(TRAINJOBS, name, self.namespace)

    def configmap(self, name: str) -> dict[str, Any]:
        found = self.kube.get(CONFIGMAPS, name, self.namespace)
        assert found is not None, f"ConfigMap {name} does not exist"
        return found


def make_step(
    kube: KubeClient,
    nodes: NodeSet,
    category: dict[str, Any],
    options: dict[str, Any] | None = None,
    *,
    workflow: str = WORKFLOW,
) -> Step:
    resolved = resolve_category(category, selector=nodes.namespace, options=options)
    return Step(kube, create_context(kube, nodes.namespace, resolved, workflow))


def failures(result: GroupResult) -> list[tuple[str, str, str]]:
    """(node, reason, message) of every iteration's failed nodes."""
    return [(item["name"], item["reason"], item["message"]) for it in result.iterations for item in it.failed_nodes]


def shell_decode(encoded: str) -> str:
    """What a person does with `kubectl get cm -o yaml`: `base64 -d | gunzip`."""
    done = subprocess.run(["sh", "-c", "base64 -d | gunzip"], input=encoded.encode(), capture_output=True, check=True)
    return done.stdout.decode("utf-8")


# --- plan -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupingCase:
    id: str
    category: dict[str, Any]
    options: dict[str, Any]
    nodes: dict[str, dict[str, Any]]  # short name -> node fields
    groups: dict[str, list[str]]  # group -> short names
    excluded: dict[str, str]  # short name -> reason
    gpus_per_node: int


GB200_NODE = {"product": GB200, "gpus": "4"}
# The GB200 grouping cases set enableMNNVL: false: they are about grouping, and with MNNVL on a GB200 category
# needs a ComputeDomain, which this API server does not serve (see the test after these).
GROUPING_CASES = [
    GroupingCase(
        "nodes-per-job-makes-chunks-in-name-order",
        ALL_REDUCE,
        {"nodesPerJob": 2},
        {f"n{index}": {} for index in range(4)},
        {"g0": ["n0", "n1"], "g1": ["n2", "n3"]},
        {},
        8,
    ),
    GroupingCase(
        "a-short-last-chunk-borrows-the-first-node-and-is-an-overflow-group",
        ALL_REDUCE,
        {"nodesPerJob": 2},
        {f"n{index}": {} for index in range(5)},
        {"g0": ["n0", "n1"], "g1": ["n2", "n3"], "g2-overflow": ["n0", "n4"]},
        {},
        8,
    ),
    GroupingCase(
        "chunks-are-packed-inside-nvlink-cliques-not-by-name",
        ALL_REDUCE,
        {"nodesPerJob": 2, "enableMNNVL": False},
        {
            "n0": {**GB200_NODE, "clique": "rack-a"},
            "n1": {**GB200_NODE, "clique": "rack-b"},
            "n2": {**GB200_NODE, "clique": "rack-a"},
            "n3": {**GB200_NODE, "clique": "rack-b"},
        },
        {"g0": ["n0", "n2"], "g1": ["n1", "n3"]},
        {},
        4,
    ),
    GroupingCase(
        "intra-rack-makes-one-group-per-clique-and-one-per-unlabelled-node",
        ALL_REDUCE,
        {"testScale": "intra-rack", "enableMNNVL": False},
        {
            "n0": {**GB200_NODE, "clique": "rack-a"},
            "n1": {**GB200_NODE, "clique": "rack-a"},
            "n2": {**GB200_NODE, "clique": "rack-b"},
            "n3": GB200_NODE,
        },
        {"g0": ["n0", "n1"], "g1": ["n2"], "g2": ["n3"]},
        {},
        4,
    ),
    GroupingCase(
        "a-per-node-entry-makes-one-group-per-node",
        DCGM,
        {"nodesPerJob": 3},
        {f"n{index}": {} for index in range(3)},
        {"g0": ["n0"], "g1": ["n1"], "g2": ["n2"]},
        {},
        8,
    ),
    GroupingCase(
        "cordoned-minority-gpu-and-short-of-gpu-nodes-are-excluded",
        ALL_REDUCE,
        {},
        {
            "n0": {},
            "n1": {},
            "n2": {"unschedulable": True},
            "n3": {"product": B200},
            "n4": {"gpus": "4"},
        },
        {"g0": ["n0", "n1"]},
        {"n2": "Cordoned", "n3": "MinorityGPUArchitecture", "n4": "InsufficientGPUs"},
        8,
    ),
    GroupingCase(
        "an-architecture-tie-goes-to-the-first-node-and-decides-the-gpu-count",
        ALL_REDUCE,
        {"enableMNNVL": False},
        {"n0": GB200_NODE, "n1": GB200_NODE, "n2": {}, "n3": {}, "n4": {"product": None, "gpus": "4"}},
        {"g0": ["n0", "n1", "n4"]},
        {"n2": "MinorityGPUArchitecture", "n3": "MinorityGPUArchitecture"},
        4,
    ),
]


def _gpu_request(runtime: dict[str, Any], replicated_job: str) -> str:
    (job,) = [item for item in runtime["spec"]["template"]["spec"]["replicatedJobs"] if item["name"] == replicated_job]
    container = job["template"]["spec"]["template"]["spec"]["containers"][0]
    return str(container["resources"]["limits"]["nvidia.com/gpu"])


@pytest.mark.parametrize("case", GROUPING_CASES, ids=lambda case: case.id)
def test_the_plan_step_groups_real_nodes_and_publishes_the_plan(
    kube: KubeClient, nodes: NodeSet, case: GroupingCase
) -> None:
    for short, fields in case.nodes.items():
        nodes.add(short, **fields)
    step = make_step(kube, nodes, case.category, case.options)

    plan = step.plan()

    assert {group.name: [nodes.short(n) for n in group.nodes] for group in plan.groups} == case.groups
    assert {nodes.short(item.node): item.reason for item in plan.excluded} == case.excluded
    for short, reason in case.excluded.items():
        assert any(line.startswith(f"excluded {nodes.name(short)}: {reason}: ") for line in step.lines), step.lines

    configmap = step.configmap(f"group-nodes-{uid8(step.context)}")
    assert configmap["metadata"]["ownerReferences"] == [owner_reference(step.context)]
    group_nodes = json.loads(gzip.decompress(base64.b64decode(configmap["binaryData"]["group-nodes.json.gz"])))
    assert group_nodes == {group: nodes.names(members) for group, members in case.groups.items()}
    assert Plan.from_json(gzip.decompress(base64.b64decode(configmap["binaryData"]["plan.json.gz"])).decode()) == plan
    assert "data" not in configmap, "the plan is stored compressed only"

    runtime = kube.get(TRAINING_RUNTIMES, RUNTIME, step.namespace)
    assert runtime is not None, "the TrainingRuntime was not created"
    assert runtime["metadata"]["ownerReferences"] == [owner_reference(step.context)]
    assert _gpu_request(runtime, "node") == str(case.gpus_per_node)


def test_gb200_with_mnnvl_fails_the_plan_naming_the_missing_compute_domain_api(
    kube: KubeClient, nodes: NodeSet
) -> None:
    """This API server serves no `resource.nvidia.com` (no NVIDIA DRA driver): the plan step must say so, not
    leave every group Pending on a claim that can never be met."""
    for short in ("n0", "n1"):
        nodes.add(short, **GB200_NODE)
    step = make_step(kube, nodes, ALL_REDUCE)

    with pytest.raises(PlanError) as raised:
        step.plan()

    assert "needs a ComputeDomain (resource.nvidia.com/v1beta1), which this cluster does not serve" in str(raised.value)
    assert kube.get(TRAINING_RUNTIMES, RUNTIME, step.namespace) is None


def test_the_plan_step_names_the_selector_when_no_node_matches(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add("other", selector=f"{nodes.prefix}-elsewhere")  # a node exists, but not under this target
    step = make_step(kube, nodes, ALL_REDUCE)

    with pytest.raises(PlanError) as raised:
        step.plan()

    assert f"no node matches the target (nodeSelector {SELECTOR_LABEL}={nodes.namespace})" in str(raised.value)
    assert str(raised.value).startswith("communication/nccl-all-reduce: ")
    assert kube.get(TRAINING_RUNTIMES, RUNTIME, step.namespace) is None
    assert kube.get(CONFIGMAPS, f"group-nodes-{uid8(step.context)}", step.namespace) is None


# --- run ------------------------------------------------------------------------------------------------------


def _hostname_affinity(trainjob: dict[str, Any]) -> dict[str, list[str]]:
    """replicatedJob -> the `kubernetes.io/hostname In (...)` values the runtimePatches pin it to."""
    pinned: dict[str, list[str]] = {}
    for patch in trainjob["spec"].get("runtimePatches") or []:
        for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            affinity = job["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
            for term in affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
                for requirement in term["matchExpressions"]:
                    if requirement["key"] == "kubernetes.io/hostname" and requirement["operator"] == "In":
                        pinned[job["name"]] = requirement["values"]
    return pinned


def test_a_completed_trainjob_passes_the_group_and_is_created_once_as_specified(
    kube: KubeClient, nodes: NodeSet
) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"workloadMetadata": {"labels": {"team": "fleet"}}})

    result, script = step.run("g0", [(1, step.complete())])

    assert result.succeeded
    completed = f"TrainJob/{TRAINJOB} completed (algBandwidthGBps=200, busBandwidthGBps=375)"
    assert [(it.trainjob, it.message, it.failed_nodes) for it in result.iterations] == [(TRAINJOB, completed, [])]
    assert script.calls == 1, "the completion was noticed on the next poll"
    (trainjob,) = trainjobs(kube, step.namespace)
    metadata = trainjob["metadata"]
    assert metadata["name"] == TRAINJOB
    assert {
        "app.kubernetes.io/managed-by": "nvcre-argo",
        "nvcre.nvidia.com/certification": CERTIFICATION,
        "nvcre.nvidia.com/category-index": "0",
        "nvcre.nvidia.com/group": "g0",
        "team": "fleet",
    }.items() <= metadata["labels"].items()
    assert metadata["ownerReferences"] == [owner_reference(step.context)]
    assert trainjob["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": RUNTIME,
    }
    assert kube.get(TRAINING_RUNTIMES, RUNTIME, step.namespace) is not None
    assert trainjob["spec"]["trainer"]["numNodes"] == 2
    assert _hostname_affinity(trainjob) == {"node": sorted(members)}

    saved = step.configmap(f"group-result-{uid8(step.context)}-g0")
    assert saved["metadata"]["ownerReferences"] == [owner_reference(step.context)]
    assert {
        "nvcre.nvidia.com/record": "group-result",
        "nvcre.nvidia.com/group": "g0",
        "nvcre.nvidia.com/workflow": WORKFLOW,
    }.items() <= saved["metadata"]["labels"].items()
    # Compressed, as the plan and the failed-node ConfigMaps are: a person reads it with `base64 -d | gunzip`.
    assert "data" not in saved
    assert json.loads(shell_decode(saved["binaryData"]["result.json.gz"])) == {
        "group": "g0",
        "nodes": sorted(members),
        "iterations": [
            {
                "iteration": 0,
                "trainjob": TRAINJOB,
                "succeeded": True,
                "message": completed,
                "failed_nodes": [],
                "measurements": {"algBandwidthGBps": 200.0, "busBandwidthGBps": 375.0},
                "restarts": [],
                "never_ran": False,
            }
        ],
        "attempt": 1,
    }


def test_a_completed_trainjob_whose_measurement_cannot_be_read_does_not_pass_and_blames_no_node(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"measurementTimeout": "20s"})

    # No kubelet: no pod, no log. The log is read when the TrainJob completes and 10 and 20 s later.
    actions = [(1, step.complete()), (10, nothing), (10, nothing)]
    result, script = step.run("g0", actions, measure=measure_log)

    assert not result.succeeded
    assert script.calls == len(actions), "the step waited measurementTimeout, no more"
    (iteration,) = result.iterations
    assert iteration.failed_nodes == [], "nothing was violated, so no node is blamed"
    assert iteration.message == (
        f"MeasurementTimeout: TrainJob/{TRAINJOB} completed but no nccl-bandwidth measurement appeared within "
        "measurementTimeout 20s (waited 20s, 3 read(s) of the log): the workload left no pod whose log could be read"
    )


def test_a_measurement_that_appears_on_the_third_read_passes_the_group(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"measurementTimeout": "1m"})
    reads: list[float] = []

    def measure(context: StepContext, log_text: str) -> tuple[dict[str, float], list[str]]:
        reads.append(step.clock.now)  # no kubelet: the canned log stands in from the third read on
        return measure_log(context, NCCL_LOG if len(reads) == 3 else log_text)

    result, script = step.run("g0", [(1, step.complete()), (10, nothing), (10, nothing)], measure=measure)

    assert result.succeeded
    assert [at - reads[0] for at in reads] == [0, 10, 20]
    assert script.calls == 3
    assert result.iterations[0].measurements == {"algBandwidthGBps": 200.0, "busBandwidthGBps": 375.0}
    assert any(line.startswith("no nccl-bandwidth measurement yet") for line in step.lines)


def test_a_completed_exit_code_category_passes_without_reading_a_log_or_waiting(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(1)
    step = make_step(kube, nodes, DCGM, {"measurementTimeout": "1h"})

    def measure(context: StepContext, log_text: str) -> tuple[dict[str, float], list[str]]:
        raise AssertionError("a DCGM verdict is its exit code: nothing is measured")

    result, script = step.run("g0", [(1, step.complete())], measure=measure)

    assert result.succeeded
    assert script.calls == 1, "no sleep after the TrainJob completed"


# nccl-tests all_reduce_perf_mpi on 16 GPUs (busbw = algbw x 2(n-1)/n = algbw x 1.875); peak busbw 375.00 GB/s.
NCCL_LOG = """\
# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf_mpi
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  1073741824     268435456     float     sum      -1  10737.4  100.00  187.50      0  10845.9   99.00  185.63      0
  8589934592    2147483648     float     sum      -1  42949.7  200.00  375.00      0  43383.5  198.00  371.25      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 279.85
# Collective test concluded: all_reduce_perf_mpi
"""


def canned_measure(log: str) -> Measure:
    """No kubelet serves pods/log here: measure a canned log in place of the launcher's."""

    def measure(context: StepContext, log_text: str) -> tuple[dict[str, float], list[str]]:
        del log_text
        return measure_log(context, log)

    return measure


def test_a_completed_group_below_its_bandwidth_threshold_fails_every_node_with_threshold_violation(
    kube: KubeClient, nodes: NodeSet
) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"thresholds": {"busBandwidthGBps": "value >= 400.0"}})
    logs_seen: list[str] = []

    def measure(context: StepContext, log_text: str) -> tuple[dict[str, float], list[str]]:
        logs_seen.append(log_text)  # no kubelet: the launcher's log cannot be read, the canned one stands in
        return measure_log(context, NCCL_LOG)

    result, _ = step.run("g0", [(1, step.complete())], measure=measure)

    assert not result.succeeded
    assert logs_seen == [""]
    (iteration,) = result.iterations
    assert iteration.measurements == {"algBandwidthGBps": 200.0, "busBandwidthGBps": 375.0}
    assert {(node, reason) for node, reason, _ in failures(result)} == {
        (node, "ThresholdViolation") for node in members
    }
    assert all("busBandwidthGBps" in message for _, _, message in failures(result))


class LogServingKube(KubeClient):
    """The product's client on the same connection, answering pods/log with `log` (no kubelet serves it here)."""

    def __init__(self, kube: KubeClient, log: str) -> None:
        super().__init__(kube._api, backoff=Backoff(sleep=_no_wait), namespace=kube.namespace)
        self.log = log

    def read_log(self, namespace: str, pod: str, *, container: str | None = None, limit_bytes: int = 65536) -> str:
        del namespace, pod, container
        return self.log[-limit_bytes:]


# NCCL_LOG with 3 wrong values in the out-of-place half of the largest size, at full bandwidth: nccl-tests'
# data check counted them (footer) and exits 1, but a wrapper script may exit 0 (issue 12 item 5).
CORRUPTED_NCCL_LOG = NCCL_LOG.replace("375.00      0", "375.00      3").replace(
    "# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED"
)


def test_a_completed_group_whose_nccl_data_check_found_wrong_values_fails_every_node_as_workload_failed(
    kube: KubeClient, nodes: NodeSet
) -> None:
    assert "375.00      3" in CORRUPTED_NCCL_LOG
    members = nodes.add_many(2)
    serving = LogServingKube(kube, CORRUPTED_NCCL_LOG)
    step = make_step(serving, nodes, ALL_REDUCE, {"thresholds": {"busBandwidthGBps": "value >= 300.0"}})
    # The launcher's pod: its log is where nccl-tests prints, and it exited 0.
    create_rank_pod(
        kube,
        step.namespace,
        name=f"{TRAINJOB}-launcher-0-0-k2x9q",
        trainjob=TRAINJOB,
        node=members[0],
        exit_code=0,
        reason="Completed",
        replicated_job="launcher",
    )

    result, _ = step.run("g0", [(1, step.complete())], measure=measure_log)  # measured from the served log

    assert not result.succeeded
    (iteration,) = result.iterations
    # Bandwidth passed its threshold (375 >= 300): corrupted data fails the group anyway, on every node, since
    # nothing says which node corrupted it; WorkloadFailed, as when nccl-tests exits 1 for the same finding.
    assert {(node, reason) for node, reason, _ in failures(result)} == {(node, "WorkloadFailed") for node in members}
    assert iteration.message == (
        f"TrainJob/{TRAINJOB} completed but nccl-tests counted 3 wrong values in its data check (#wrong): "
        "the collective corrupted data"
    )


def test_a_completed_group_with_a_clean_nccl_data_check_passes_with_its_measurements(
    kube: KubeClient, nodes: NodeSet
) -> None:
    members = nodes.add_many(2)
    step = make_step(LogServingKube(kube, NCCL_LOG), nodes, ALL_REDUCE)
    create_rank_pod(
        kube,
        step.namespace,
        name=f"{TRAINJOB}-launcher-0-0-p3m7v",
        trainjob=TRAINJOB,
        node=members[0],
        exit_code=0,
        reason="Completed",
        replicated_job="launcher",
    )

    result, _ = step.run("g0", [(1, step.complete())], measure=measure_log)

    assert result.succeeded
    assert result.iterations[0].measurements == {"algBandwidthGBps": 200.0, "busBandwidthGBps": 375.0}


def test_a_failed_trainjob_blames_only_the_node_whose_rank_failed_first(kube: KubeClient, nodes: NodeSet) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    first, later = f"{TRAINJOB}-node-0-1-q9w4z", f"{TRAINJOB}-node-0-0-x7k2p"

    def fail() -> None:
        # The groupmate's rank fails 5 s after the culprit's (it lost its peer); name order would pick it.
        create_rank_pod(
            kube,
            step.namespace,
            name=later,
            trainjob=TRAINJOB,
            node=members[0],
            exit_code=1,
            finished_at="2026-01-01T00:00:05Z",
        )
        create_rank_pod(
            kube,
            step.namespace,
            name=first,
            trainjob=TRAINJOB,
            node=members[1],
            exit_code=137,
            reason="OOMKilled",
            finished_at="2026-01-01T00:00:00Z",
        )
        set_trainjob_condition(
            kube, step.namespace, TRAINJOB, "Failed", "FailedJobs", message="job cert-0-g0-node-0 failed"
        )

    result, _ = step.run("g0", [(1, fail)])

    assert not result.succeeded
    assert {(node, reason) for node, reason, _ in failures(result)} == {(members[1], "WorkloadFailed")}
    (message,) = {message for _, _, message in failures(result)}
    assert message.startswith(f"TrainJob/{TRAINJOB} failed: FailedJobs: job cert-0-g0-node-0 failed; ")
    assert f"first failure: pod {first} on node {members[1]}: container node exited 137 (OOMKilled)" in message
    assert later not in message, "a rank that failed after the culprit is not named"
    assert "log unavailable" in message, "without a kubelet the log cannot be read, and the message says so"
    assert step.trainjob() is not None, "a finished TrainJob is kept for inspection"


def test_a_groupmate_the_kubelet_stopped_in_the_crashs_second_is_not_blamed(kube: KubeClient, nodes: NodeSet) -> None:
    """When a rank crashes, JobSet deletes the group's other Jobs at once, and the kubelet stops the
    groupmates' containers (SIGTERM: exit 143) within the second of the crash; `finishedAt` counts whole
    seconds, so only the groupmate's pod being deleted tells the consequence from the cause."""
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    culprit, stopped = f"{TRAINJOB}-node-0-1-q9w4z", f"{TRAINJOB}-node-0-0-x7k2p"

    def fail() -> None:
        create_rank_pod(
            kube, step.namespace, name=stopped, trainjob=TRAINJOB, node=members[0], exit_code=143, being_deleted=True
        )
        create_rank_pod(kube, step.namespace, name=culprit, trainjob=TRAINJOB, node=members[1], exit_code=137)
        set_trainjob_condition(kube, step.namespace, TRAINJOB, "Failed", "FailedJobs", message="job failed")

    try:
        result, _ = step.run("g0", [(1, fail)])
    finally:
        release_pod(kube, step.namespace, stopped)

    assert {(node, reason) for node, reason, _ in failures(result)} == {(members[1], "WorkloadFailed")}
    (message,) = {message for _, _, message in failures(result)}
    assert f"first failure: pod {culprit} on node {members[1]}: container node exited 137" in message
    assert stopped not in message, "the groupmate stopped by its pod's deletion is not named"


def test_under_the_mirror_a_failed_trainjob_still_blames_the_first_failed_rank_though_its_pods_lag(
    kube: KubeClient, nodes: NodeSet
) -> None:
    """The TrainJob's mirror sees it Failed while the pods' mirror has not seen the failed rank (here: it
    stopped following before the pods existed). Judged from the mirrors, nothing would explain the failure
    and the whole group would be blamed; the verdict is read from the API server, so only the culprit is."""
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    culprit = f"{TRAINJOB}-node-0-1-q9w4z"

    def fail() -> None:
        create_rank_pod(
            kube,
            step.namespace,
            name=culprit,
            trainjob=TRAINJOB,
            node=members[1],
            exit_code=137,
            reason="OOMKilled",
            finished_at="2026-01-01T00:00:00Z",
        )
        set_trainjob_condition(kube, step.namespace, TRAINJOB, "Failed", "FailedJobs", message="a job failed")

    def trainjob_seen_failed() -> None:
        held = trainjobs.get(TRAINJOB) or {}
        if not any(item.get("type") == "Failed" for item in (held.get("status") or {}).get("conditions") or []):
            time.sleep(0.05)  # the watch's event is on its way: the poll reads the mirror again

    pods_selection = Selection(label_selector="jobset.sigs.k8s.io/jobset-name")
    with (
        Mirror(kube, TRAINJOBS, step.namespace, Selection(), what="TrainJob") as trainjobs,
        Mirror(kube, CONFIGMAPS, step.namespace, pods_selection, what="Pod") as stale_pods,  # never holds a pod
    ):
        mirror = CategoryMirror(step.namespace, trainjobs, stale_pods, nodes=None)
        result, _ = step.run("g0", [(1, fail), *[(0, trainjob_seen_failed)] * 200], mirror=mirror)

    assert {(node, reason) for node, reason, _ in failures(result)} == {(members[1], "WorkloadFailed")}
    (message,) = {message for _, _, message in failures(result)}
    assert f"first failure: pod {culprit} on node {members[1]}" in message


def test_a_failure_no_rank_explains_is_recorded_on_every_node_and_says_so(kube: KubeClient, nodes: NodeSet) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)

    def fail() -> None:
        # Only the MPI launcher failed (e.g. nccl-tests found corrupted data): no rank points at a node.
        create_rank_pod(
            kube,
            step.namespace,
            name=f"{TRAINJOB}-launcher-0-0-abcde",
            trainjob=TRAINJOB,
            node=members[0],
            exit_code=1,
            replicated_job="launcher",
        )
        set_trainjob_condition(kube, step.namespace, TRAINJOB, "Failed", "FailedJobs", message="launcher failed")

    result, _ = step.run("g0", [(1, fail)])

    assert {(node, reason) for node, reason, _ in failures(result)} == {(node, "WorkloadFailed") for node in members}
    (message,) = {message for _, _, message in failures(result)}
    assert "no rank pod failed, so the failure is not attributed to one node of the group" in message


def _wait_for_an_event() -> None:
    time.sleep(0.05)


# The health check follows a watch, whose events arrive in a thread a few milliseconds after the change: polls
# that give them time (real time, bounded at 10 s; the fake clock does not move).
UNTIL_THE_WATCH_SEES_IT: list[tuple[float, Callable[[], None]]] = [(0, _wait_for_an_event)] * 200


def watch_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "node-watch"]


def test_a_node_cordoned_mid_run_is_a_hardware_failure_and_the_trainjob_is_deleted(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(3)
    step = make_step(kube, nodes, ALL_REDUCE)

    result, script = step.run("g0", [(1, nothing), (1, lambda: nodes.cordon("n1")), *UNTIL_THE_WATCH_SEES_IT])

    assert failures(result) == [
        (
            nodes.name("n1"),
            "HardwareFailureDetected",
            f"node health check `node.spec.unschedulable == true` fired during TrainJob/{TRAINJOB}",
        )
    ]
    assert script.calls >= 2, "caught on a poll after the cordon, as soon as its event arrived"
    assert step.trainjob() is None, "the TrainJob is deleted to free the GPUs"
    assert watch_threads() == [], "the Node watch ended with the iteration"


def test_groupmates_of_a_sick_node_are_neither_failed_nor_certified(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(3)
    step = make_step(kube, nodes, ALL_REDUCE)
    step.run("g0", [(1, nothing), (1, lambda: nodes.cordon("n1")), *UNTIL_THE_WATCH_SEES_IT])

    outcome = record_step(kube, step.context, report=step.lines.append)

    assert [(node.name, node.reason) for node in outcome.failed] == [(nodes.name("n1"), "HardwareFailureDetected")]
    assert outcome.succeeded == [], "their test was stopped before it finished, so nothing is certified"


def test_time_suspended_by_kueue_does_not_count_toward_the_timeout(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "2s"})

    def suspend() -> None:
        suspend_trainjob(kube, step.namespace, TRAINJOB, suspended=True)

    def resume() -> None:
        suspend_trainjob(kube, step.namespace, TRAINJOB, suspended=False)

    queued_polls: list[tuple[float, Callable[[], None]]] = [(10, nothing)] * 4  # 40 s queued, limit 2 s
    result, script = step.run(
        "g0",
        [(0, suspend), *queued_polls, (0, resume), (1, nothing), (0, step.complete())],
    )

    assert result.succeeded, result.iterations[0].message
    assert script.calls == 8
    assert f"TrainJob/{TRAINJOB}: Queued (running time counted: 0s of 2s)" in step.lines
    assert step.trainjob() is not None


def test_a_trainjob_running_past_timeout_per_job_fails_and_is_deleted(kube: KubeClient, nodes: NodeSet) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "2s"})

    result, _ = step.run("g0", [(0, step.start()), (1, nothing), (10, nothing)])

    message = f"TrainJob/{TRAINJOB} timed out after 2s of running time"
    assert failures(result) == [(node, "WorkloadFailed", message) for node in members]
    assert step.trainjob() is None


def test_time_after_every_pod_succeeded_does_not_count_toward_the_timeout(kube: KubeClient, nodes: NodeSet) -> None:
    """The Trainer marks a TrainJob Complete only when it gets to it: with a thousand at once that took minutes,
    and counted, it timed out workloads whose pods had all succeeded, blaming their nodes."""
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "2s"})
    pod = f"{TRAINJOB}-node-0-0-r4nk0"

    def succeed() -> None:
        kube.merge_patch(PODS, pod, {"status": {"phase": "Succeeded"}}, step.namespace, subresource="status")

    # 1.5 s running + 1.5 s finished: over the 2 s limit only if the time after the pods' end were counted.
    actions = [(0, step.start()), (1.5, succeed), (1.5, nothing), (0, step.complete())]
    result, script = step.run("g0", actions)

    assert result.succeeded, result.iterations[0].message
    assert script.calls == 4
    assert any(line.startswith(f"TrainJob/{TRAINJOB}: Finishing") for line in step.lines), step.lines


def test_a_trainjob_whose_pods_never_appear_ends_after_timeout_per_job_blaming_no_node(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "2s"})

    result, _ = step.run("g0", [(1, nothing), (10, nothing)])

    assert not result.succeeded
    assert failures(result) == [], "no pod ran on the nodes: none is blamed"
    message = result.iterations[0].message
    assert message.startswith(f"TrainJob/{TRAINJOB} timed out after 2s waiting: none of its pods was created")
    assert message.endswith("no node is blamed")
    assert result.iterations[0].never_ran, "fault isolation must know the test never started"
    assert step.trainjob() is None


def floored_step(kube: KubeClient, nodes: NodeSet) -> Step:
    """A 2-node group with `timeoutPerJob: 2s` and a 30 s floor under waits on the controllers."""
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "2s"})
    step.controller_wait_floor_s = 30.0
    return step


def test_a_wait_on_the_controllers_lasts_at_least_the_floor_even_with_a_shorter_timeout_per_job(
    kube: KubeClient, nodes: NodeSet
) -> None:
    step = floored_step(kube, nodes)

    # No pod for 20 s (ten times timeoutPerJob, within the floor), then the workload runs and completes.
    result, _ = step.run("g0", [(10, nothing), (10, nothing), (0, step.start()), (1, nothing), (0, step.complete())])

    assert result.succeeded, result.iterations[0].message


def test_past_the_floor_a_wait_on_the_controllers_ends_the_test_blaming_no_node(
    kube: KubeClient, nodes: NodeSet
) -> None:
    step = floored_step(kube, nodes)

    result, _ = step.run("g0", [(20, nothing), (20, nothing)])

    assert not result.succeeded
    message = result.iterations[0].message
    assert message.startswith(f"TrainJob/{TRAINJOB} timed out after 30s waiting: none of its pods was created")
    assert failures(result) == []
    assert result.iterations[0].never_ran


UNSCHEDULABLE = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def test_time_blocked_in_scheduling_does_not_count_toward_the_timeout(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "2s"})
    pod = f"{TRAINJOB}-node-0-0-b7d9k"

    def block() -> None:
        create_pending_pod(kube, step.namespace, name=pod, trainjob=TRAINJOB, message=UNSCHEDULABLE)

    # 1.5 s blocked + 1.5 s running: over the 2 s limit only if the blocked time were counted.
    result, script = step.run(
        "g0",
        [
            (0, block),
            (1.5, nothing),
            (0, lambda: schedule_pod(kube, step.namespace, name=pod)),
            (1.5, nothing),
            (0, step.complete()),
        ],
    )

    assert result.succeeded, result.iterations[0].message
    assert script.calls == 5
    assert any(line.startswith(f"TrainJob/{TRAINJOB}: SchedulingBlocked") for line in step.lines), step.lines


def test_a_trainjob_blocked_in_scheduling_longer_than_timeout_per_job_times_out(
    kube: KubeClient, nodes: NodeSet
) -> None:
    """Reference §7.8: the clock pauses while pods are unschedulable, but one episode longer than timeoutPerJob
    times the Job out; otherwise a group whose pods can never be placed would hold its run step forever."""
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "2s"})

    def block() -> None:
        create_pending_pod(
            kube, step.namespace, name=f"{TRAINJOB}-node-0-0-b7d9k", trainjob=TRAINJOB, message=UNSCHEDULABLE
        )

    result, _ = step.run("g0", [(0, block), (1, nothing), (10, nothing)])

    assert {(node, reason) for node, reason, _ in failures(result)} == {(node, "WorkloadFailed") for node in members}
    (message,) = {message for _, _, message in failures(result)}
    assert message.startswith(f"TrainJob/{TRAINJOB} timed out after 2s blocked in scheduling")
    assert UNSCHEDULABLE in message, "the scheduler's own reason is kept"
    assert step.trainjob() is None


# --- stalls (reference §7.8): a training run that stops making progress fails WorkloadStalled --------------------


def megatron_line(iteration: int, elapsed_ms: float) -> str:
    return (
        f" [2026-01-12 10:00:00.000000] iteration {iteration:8d}/      40 | consumed samples: {iteration * 8:12d} | "
        f"elapsed time per iteration (ms): {elapsed_ms:.1f} | throughput per GPU (TFLOP/s/GPU): 400.0 |\n"
    )


# The warm-up line, then two steady lines of 0.5 s steps at `--log-interval 10`: a stall after 3 x 5 s = 15 s.
TRAINING_TO_20 = megatron_line(1, 2500.0) + megatron_line(10, 500.0) + megatron_line(20, 500.0)
STALL_OPTIONS = {"nodesPerJob": 2, "timeoutPerJob": "10m", "startupStallTimeoutSeconds": 20}


def canned_training_log(*reads: str) -> tuple[TrainingLog, list[str]]:
    """Read N of the log end answers reads[N] (the last one again once they are used up); and what was read."""
    done: list[str] = []

    def read(kube: KubeClient, context: StepContext, pods: Any) -> str:
        del kube, context, pods
        done.append(reads[min(len(done), len(reads) - 1)])
        return done[-1]

    return read, done


def test_a_training_run_with_no_iteration_within_its_startup_budget_stalls_and_is_deleted(
    kube: KubeClient, nodes: NodeSet
) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, NEMOTRON, STALL_OPTIONS)
    training_log, reads = canned_training_log("torchrun: starting\n")

    result, _ = step.run("g0", [(0, step.start()), *[(10, nothing)] * 3], training_log=training_log)  # 0-30 s

    message = (
        f"WorkloadStalled: no training iteration within startupStallTimeoutSeconds 20 (TrainJob/{TRAINJOB} "
        "running for 30s, time queued or blocked in scheduling not counted)"
    )
    assert failures(result) == [(node, "WorkloadFailed", message) for node in members]
    assert len(reads) == 5  # one per poll, the first before its pod existed
    assert step.trainjob() is None


def test_time_queued_does_not_count_toward_the_startup_stall_budget(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, NEMOTRON, STALL_OPTIONS)
    training_log, reads = canned_training_log("torchrun: starting\n", "torchrun: starting\n", TRAINING_TO_20)

    def suspend() -> None:
        suspend_trainjob(kube, step.namespace, TRAINJOB, suspended=True)

    def resume() -> None:
        suspend_trainjob(kube, step.namespace, TRAINJOB, suspended=False)

    # Read at the first poll, 40 s queued, then no iteration at the poll after the resume (a stall there, were the
    # queued time counted) and the first ones 15 s later, under the 20 s budget.
    result, _ = step.run(
        "g0",
        [(0, suspend), *[(10, nothing)] * 4, (0, resume), (15, nothing), (1, step.complete())],
        measure=canned_measure(TRAINING_TO_20),
        training_log=training_log,
    )

    assert result.succeeded, result.iterations[0].message
    assert reads == ["torchrun: starting\n", "torchrun: starting\n", TRAINING_TO_20]  # never while queued


def test_a_training_run_that_logs_no_new_iteration_for_three_average_steps_per_line_stalls(
    kube: KubeClient, nodes: NodeSet
) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, NEMOTRON, STALL_OPTIONS)
    training_log, _ = canned_training_log(megatron_line(1, 2500.0), TRAINING_TO_20)

    # Iteration 20 is first seen at 10 s; 15 s later (25 s) is not yet a stall, 30 s is.
    polls = [(0, step.start()), (10, nothing), (10, nothing), (5, nothing), (5, nothing)]
    result, _ = step.run("g0", polls, training_log=training_log)

    message = (
        "WorkloadStalled: no new iteration for 20s, more than 3 x the average step time 0.5s x 10 iteration(s) per "
        f"log line (15s); TrainJob/{TRAINJOB} last logged iteration 20/40"
    )
    assert failures(result) == [(node, "WorkloadFailed", message) for node in members]
    assert step.trainjob() is None


def test_a_communication_category_is_never_watched_for_stalls(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"timeoutPerJob": "10m", "startupStallTimeoutSeconds": 20})
    training_log, reads = canned_training_log("")

    result, _ = step.run("g0", [(100, nothing), (0, step.complete())], training_log=training_log)

    assert result.succeeded, result.iterations[0].message
    assert reads == []


def test_a_trainjob_deleted_by_someone_else_fails_the_group(kube: KubeClient, nodes: NodeSet) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)

    result, _ = step.run("g0", [(1, lambda: kube.delete(TRAINJOBS, TRAINJOB, step.namespace))])

    message = f"Workload TrainJob/{TRAINJOB} was deleted"  # the reference's own example message (§3.7)
    assert failures(result) == [(node, "WorkloadFailed", message) for node in members]


def test_running_a_group_again_after_its_result_was_recorded_tests_it_again_with_a_new_trainjob(
    kube: KubeClient, nodes: NodeSet
) -> None:
    """What `argo retry` does to a finished group: a new attempt, never the old verdict read again."""
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    first, _ = step.run("g0", [(1, step.complete())])
    (created,) = trainjobs(kube, step.namespace)

    second, script = step.run("g0", [(1, step.complete(f"{TRAINJOB}-a2"))])

    assert (first.attempt, second.attempt) == (1, 2)
    assert [iteration.trainjob for iteration in second.iterations] == [f"{TRAINJOB}-a2"]
    assert second.succeeded
    assert script.calls == 1
    names = sorted(item["metadata"]["name"] for item in trainjobs(kube, step.namespace))
    assert names == [TRAINJOB, f"{TRAINJOB}-a2"]
    assert created["metadata"]["name"] == TRAINJOB


def test_a_run_step_restarted_mid_run_adopts_its_running_trainjob(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    with pytest.raises(StepInterruptedError):
        step.run("g0", [(1, interrupt)])
    (created,) = trainjobs(kube, step.namespace)
    assert watch_threads() == [], "an interrupted step leaves no Node watch running"

    result, _ = step.run("g0", [(1, step.complete())])

    assert result.succeeded
    (found,) = trainjobs(kube, step.namespace)
    assert found["metadata"]["uid"] == created["metadata"]["uid"]


def test_a_trainjob_of_the_same_name_not_owned_by_the_workflow_is_left_alone(kube: KubeClient, nodes: NodeSet) -> None:
    members = nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    foreign = kube.create(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": TRAINJOB, "namespace": step.namespace},
            "spec": {"runtimeRef": {"name": "someone-elses-runtime"}},
        }
    )

    result, script = step.run("g0", [])

    message = f"TrainJob/{TRAINJOB} already exists and is not owned by this Workflow; it was left alone"
    assert failures(result) == [(node, "WorkloadFailed", message) for node in members]
    assert script.calls == 0
    found = step.trainjob()
    assert found is not None
    assert (found["metadata"]["uid"], found["spec"]["runtimeRef"]["name"]) == (
        foreign["metadata"]["uid"],
        "someone-elses-runtime",
    )


def test_every_iteration_of_repeat_count_runs_its_own_trainjob(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(1)
    step = make_step(kube, nodes, ALL_REDUCE, {"repeatCount": 2})

    result, _ = step.run("g0", [(1, step.complete()), (1, step.complete(f"{TRAINJOB}-i1"))])

    assert [(it.iteration, it.trainjob, it.succeeded) for it in result.iterations] == [
        (0, TRAINJOB, True),
        (1, f"{TRAINJOB}-i1", True),
    ]
    assert sorted(item["metadata"]["name"] for item in trainjobs(kube, step.namespace)) == [
        TRAINJOB,
        f"{TRAINJOB}-i1",
    ]


# --- record ---------------------------------------------------------------------------------------------------


def test_the_record_step_writes_the_reference_configmaps_from_every_group_result(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(6)
    step = make_step(kube, nodes, ALL_REDUCE, {"nodesPerJob": 2})
    plan = step.plan()
    assert [group.name for group in plan.groups] == ["g0", "g1", "g2"]
    step.run("g0", [(1, step.complete())], plan=plan)
    step.run("g1", [(1, lambda: kube.delete(TRAINJOBS, "cert-0-g1", step.namespace))], plan=plan)
    # g2's run step never finished: no result at all.

    outcome = record_step(kube, step.context, report=step.lines.append)

    suffix = uid8(step.context)
    assert (outcome.failed_nodes_ref, outcome.succeeded_nodes_ref) == (
        f"failed-nodes-{suffix}",
        f"succeeded-nodes-{suffix}",
    )
    assert not outcome.passed
    deleted = "Workload TrainJob/cert-0-g1 was deleted"
    no_result = "no result was recorded for group g2 (its run step did not finish)"
    expected_failed = (
        "["
        + ",".join(
            f'{{"name":"{nodes.name(short)}","reason":"WorkloadFailed","message":"{message}"}}'
            for short, message in (("n2", deleted), ("n3", deleted), ("n4", no_result), ("n5", no_result))
        )
        + "]"
    )
    failed = step.configmap(f"failed-nodes-{suffix}")
    succeeded = step.configmap(f"succeeded-nodes-{suffix}")
    assert shell_decode(failed["binaryData"]["failed-nodes.json.gz"]) == expected_failed
    assert shell_decode(succeeded["binaryData"]["succeeded-nodes.csv.gz"]) == ",".join(nodes.names(["n0", "n1"]))
    for configmap in (failed, succeeded):
        # Results outlive the Workflows: a run started by hand (no Certification above it) leaves them unowned.
        assert "ownerReferences" not in configmap["metadata"]
        assert configmap["metadata"]["labels"][LABEL_WORKFLOW] == step.context.workflow_name
        assert set(configmap.get("binaryData", {})) | set(configmap.get("data", {})) == set(configmap["binaryData"]), (
            "one key, binaryData only"
        )

    versions = (failed["metadata"]["resourceVersion"], succeeded["metadata"]["resourceVersion"])
    record_step(kube, step.context, report=step.lines.append)
    again = (
        step.configmap(f"failed-nodes-{suffix}")["metadata"]["resourceVersion"],
        step.configmap(f"succeeded-nodes-{suffix}")["metadata"]["resourceVersion"],
    )
    assert again == versions, "recording again writes identical bytes, so the update is a no-op"


# --- cleanup --------------------------------------------------------------------------------------------------


def test_cleanup_deletes_only_this_workflows_unfinished_trainjobs(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(4)
    step = make_step(kube, nodes, ALL_REDUCE, {"nodesPerJob": 1})
    other = Step(kube, create_context(kube, step.namespace, step.context.category, "cert-1"))
    plan = step.plan()
    with pytest.raises(StepInterruptedError):
        step.run("g0", [(1, interrupt)], plan=plan)  # running when its step was stopped
    with pytest.raises(StepInterruptedError):
        step.run(
            "g1",
            [(1, lambda: suspend_trainjob(kube, step.namespace, "cert-0-g1", suspended=True)), (1, interrupt)],
            plan=plan,
        )  # queued by Kueue when its step was stopped
    step.run("g2", [(1, step.complete("cert-0-g2"))], plan=plan)
    step.run(
        "g3",
        [(1, lambda: set_trainjob_condition(kube, step.namespace, "cert-0-g3", "Failed", "FailedJobs"))],
        plan=plan,
    )
    with pytest.raises(StepInterruptedError):
        other.run("g0", [(1, interrupt)])  # the same certification and category, another Workflow

    deleted = cleanup_step(kube, step.context, report=step.lines.append)

    assert deleted == ["cert-0-g0", "cert-0-g1"]
    assert sorted(item["metadata"]["name"] for item in trainjobs(kube, step.namespace)) == [
        "cert-0-g2",
        "cert-0-g3",
        "cert-1-g0",
    ]
    assert "deleted unfinished TrainJob/cert-0-g0" in step.lines
    assert cleanup_step(kube, step.context, report=step.lines.append) == []
    assert step.lines[-1] == "no unfinished TrainJob to delete"
    for name in nodes.created:
        node = kube.get(NODES, name)
        assert node is not None, f"cleanup deleted Node {name}"
        assert not node["spec"].get("unschedulable"), f"cleanup cordoned Node {name}"


# --- the CLI --------------------------------------------------------------------------------------------------


def _step_env(control_plane: Cluster, context: StepContext, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "KUBECONFIG": str(control_plane.kubeconfig),
        contract.ENV_CATEGORY: category_arguments(context.category),
        contract.ENV_CERTIFICATION: context.certification,
        contract.ENV_WORKFLOW_NAME: context.workflow_name,
        contract.ENV_WORKFLOW_UID: context.workflow_uid,
        contract.ENV_NAMESPACE: context.namespace,
        **extra,
    }


def _run_cli(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NVCRE_ARGO, "step", command], env=env, capture_output=True, text=True, timeout=120, check=False, cwd=REPO
    )


@pytest.fixture
def output_dir() -> Iterator[Path]:
    """The step outputs' fixed directory (an emptyDir in the step pod, shared by every process on this machine
    here): held under an exclusive lock and emptied of the step files, before and after."""
    directory = Path(contract.OUTPUT_DIR)
    files = [
        contract.GROUPS_FILE,
        contract.CONFIRMABLE_FILE,
        contract.FAILED_NODES_REF_FILE,
        contract.SUCCEEDED_NODES_REF_FILE,
    ]

    def clear() -> None:
        for name in files:
            Path(name).unlink(missing_ok=True)

    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".test-lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        clear()
        try:
            yield directory
        finally:
            clear()


def test_the_plan_command_writes_the_groups_for_argo(
    kube: KubeClient, nodes: NodeSet, control_plane: Cluster, output_dir: Path
) -> None:
    nodes.add_many(5)
    step = make_step(kube, nodes, ALL_REDUCE, {"nodesPerJob": 2})

    done = _run_cli("plan", _step_env(control_plane, step.context))

    assert done.returncode == 0, done.stderr
    # Group names only: the run step reads a group's nodes from the plan ConfigMap.
    # g2-overflow borrows g0's nodes and runs in g0's step: it has no item of its own.
    assert json.loads(Path(contract.GROUPS_FILE).read_text()) == ["g0", "g1"]
    # Groups of two: a group blamed as a whole is confirmed after the fan-out.
    assert Path(contract.CONFIRMABLE_FILE).read_text() == "true"
    assert "5 node(s), 0 excluded, 3 group(s)" in done.stdout
    assert kube.get(CONFIGMAPS, f"group-nodes-{uid8(step.context)}", step.namespace) is not None


def test_the_plan_command_fails_with_the_reason_when_nothing_matches(
    kube: KubeClient, nodes: NodeSet, control_plane: Cluster, output_dir: Path
) -> None:
    step = make_step(kube, nodes, ALL_REDUCE)

    done = _run_cli("plan", _step_env(control_plane, step.context))

    assert done.returncode == 1
    assert done.stderr.startswith("error: communication/nccl-all-reduce: no node matches the target")
    assert not Path(contract.GROUPS_FILE).exists()


def test_the_run_record_and_cleanup_commands_finish_a_category(
    kube: KubeClient, nodes: NodeSet, control_plane: Cluster, output_dir: Path
) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE, {"measurementTimeout": "1s"})  # the real clock runs here
    with pytest.raises(StepInterruptedError):
        step.run("g0", [(1, interrupt)])  # the first attempt of the run step was killed ...
    complete_trainjob(kube, step.namespace, TRAINJOB)  # ... and its TrainJob finished meanwhile

    ran = _run_cli("run", _step_env(control_plane, step.context, NVCRE_GROUP="g0"))
    recorded = _run_cli("record", _step_env(control_plane, step.context))
    cleaned = _run_cli("cleanup", _step_env(control_plane, step.context))

    # No kubelet serves the launcher's log here, so the all-reduce cannot be measured: the honest outcome, once
    # measurementTimeout has passed, is a group that does not pass and a category that fails, no node blamed.
    assert (ran.returncode, recorded.returncode, cleaned.returncode) == (1, 1, 0), (ran.stderr, recorded.stderr)
    assert f"group g0 iteration 1/1: FAILED: MeasurementTimeout: TrainJob/{TRAINJOB} completed" in ran.stdout
    assert "no nccl-bandwidth measurement appeared within measurementTimeout 1s (waited " in ran.stdout
    assert "group g0 did not pass, no node blamed" in recorded.stdout
    suffix = uid8(step.context)
    assert Path(contract.FAILED_NODES_REF_FILE).read_text() == f"failed-nodes-{suffix}"
    assert Path(contract.SUCCEEDED_NODES_REF_FILE).read_text() == f"succeeded-nodes-{suffix}"
    assert "no unfinished TrainJob to delete" in cleaned.stdout
    (only,) = trainjobs(kube, step.namespace)
    assert only["metadata"]["name"] == TRAINJOB


def test_the_run_command_fails_naming_the_groups_when_its_group_is_not_in_the_plan(
    kube: KubeClient, nodes: NodeSet, control_plane: Cluster, output_dir: Path
) -> None:
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    step.plan()

    ran = _run_cli("run", _step_env(control_plane, step.context, NVCRE_GROUP="g9"))

    assert ran.returncode == 1
    assert "the plan has no group 'g9'; its groups: g0" in ran.stderr
    assert trainjobs(kube, step.namespace) == []


def test_the_run_command_ends_at_once_on_sigterm_while_it_watches_the_nodes(
    control_plane: Cluster, kube: KubeClient, nodes: NodeSet
) -> None:
    """Argo stops a step with SIGTERM: the Node watch's thread must not keep the process alive, and the step
    ends with exit code 143, SIGTERM's (ended by the signal, Argo's executor would report 137, an OOM kill's
    code)."""
    nodes.add_many(2)
    step = make_step(kube, nodes, ALL_REDUCE)
    step.plan()
    env = _step_env(control_plane, step.context, NVCRE_GROUP="g0")
    process = subprocess.Popen(
        [NVCRE_ARGO, "step", "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # printed after the first poll, the watch already open
        assert first.startswith(f"TrainJob/{TRAINJOB}: "), first
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=10)
    finally:
        process.kill()
        process.communicate()

    assert returncode == contract.EXIT_TERMINATED
    assert time.monotonic() - began < 2


# --- scale: requests and sizes ----------------------------------------------------------------------------------


class CountingKube(KubeClient):
    """The product's client on the same connection, recording every request it sends: `(method, path, query)`."""

    def __init__(self, kube: KubeClient) -> None:
        super().__init__(kube._api, backoff=Backoff(sleep=_no_wait), namespace=kube.namespace)
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.sent.append((method, path, dict(kwargs.get("query") or {})))
        return super().request(method, path, **kwargs)

    def node_requests(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [item for item in self.sent if item[1].startswith("/api/v1/nodes")]


def test_the_plan_step_lists_only_the_targets_nodes_a_page_at_a_time(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(5)
    for index in range(3):
        nodes.add(f"other{index}", selector=f"{nodes.prefix}-elsewhere")  # not under this target
    step = make_step(kube, nodes, ALL_REDUCE, {"nodesPerJob": 5})
    counting = CountingKube(kube)

    plan = plan_step(counting, step.context, report=step.lines.append, page_size=2)

    assert plan.candidates == tuple(nodes.names(f"n{index}" for index in range(5)))
    listed = counting.node_requests()
    # 5 matching nodes in pages of 2: three requests, each filtered by the API server, the later ones continued.
    assert [query["labelSelector"] for _, _, query in listed] == [f"{SELECTOR_LABEL}={nodes.namespace}"] * 3
    assert [query["limit"] for _, _, query in listed] == [2, 2, 2]
    assert [query["continue"] is None for _, _, query in listed] == [True, False, False]


@dataclass(frozen=True)
class PollCase:
    category: dict[str, Any]
    group: str
    matched: int | None  # the plan's candidates as the run command passes them (None: the plan's own)
    first_poll: list[tuple[str, str]]  # its Node requests (the first poll also starts the watch)
    node_requests: list[tuple[str, str]]  # a steady poll's Node requests


NODE_GETS = [("GET", "/api/v1/nodes/{n0}"), ("GET", "/api/v1/nodes/{n1}"), ("GET", "/api/v1/nodes/{n2}")]


@pytest.mark.parametrize(
    "case",
    [
        # The group is the whole target: one list + watch through the target's selector, then no Node request.
        pytest.param(PollCase(ALL_REDUCE, "g0", None, [("GET", "/api/v1/nodes")], []), id="a-large-group-is-watched"),
        # A one-node group of a large target (per-node categories): a watch of that one Node by name.
        pytest.param(
            PollCase(DCGM, "g1", 1000, [("GET", "/api/v1/nodes")], []), id="a-one-node-group-watches-its-node"
        ),
        # A few nodes of a large target: one GET per node, never a list of the whole target per group.
        pytest.param(
            PollCase(ALL_REDUCE, "g0", 1000, NODE_GETS, NODE_GETS),
            id="a-few-nodes-of-a-large-target-are-read-one-by-one",
        ),
    ],
)
def test_a_steady_poll_costs_the_trainjob_and_its_pods_and_at_most_a_get_per_node_of_a_small_share(
    kube: KubeClient, nodes: NodeSet, case: PollCase
) -> None:
    category, group, matched = case.category, case.group, case.matched
    count = 3
    nodes.add_many(count)
    step = make_step(kube, nodes, category)
    plan = step.plan()
    (sick,) = [nodes.short(name) for name in plan.group(group).nodes if name.endswith("n1")]
    counting = CountingKube(kube)
    step.kube = counting
    polls: list[list[tuple[str, str, dict[str, Any]]]] = []

    def end_of_poll() -> None:
        polls.append(list(counting.sent))
        counting.sent.clear()

    def cordon() -> None:
        end_of_poll()
        nodes.cordon(sick)

    result, _ = step.run(group, [(1, end_of_poll), (1, cordon), *UNTIL_THE_WATCH_SEES_IT], plan=plan, matched=matched)

    assert [(node, reason) for node, reason, _ in failures(result)] == [(nodes.name(sick), "HardwareFailureDetected")]
    names = {short: nodes.name(short) for short in ("n0", "n1", "n2")}
    # Poll 1 also created the TrainJob and listed the Nodes to watch; poll 2 is a steady-state poll.
    first, steady = polls
    assert [(method, path) for method, path, _ in first if path.startswith("/api/v1/nodes")] == [
        (method, path.format(**names)) for method, path in case.first_poll
    ]
    assert [(method, path) for method, path, _ in steady if path.startswith("/api/v1/nodes")] == [
        (method, path.format(**names)) for method, path in case.node_requests
    ]
    assert len(steady) == 2 + len(case.node_requests), "the TrainJob, its pods, and the GETs of a small share"
    if case.first_poll != NODE_GETS:
        (listed,) = [query for _, path, query in first if path == "/api/v1/nodes"]
        selector = {"labelSelector": f"{SELECTOR_LABEL}={nodes.namespace}", "fieldSelector": None}
        if category is DCGM:
            selector = {"labelSelector": None, "fieldSelector": f"metadata.name={nodes.name(sick)}"}
        assert {key: listed[key] for key in selector} == selector


def test_under_the_mirror_a_steady_poll_sends_no_request_and_the_verdict_is_read_from_the_api_server(
    kube: KubeClient, nodes: NodeSet
) -> None:
    """The shared runner's groups read their TrainJob, pods and Nodes from its mirrors: between the
    TrainJob's creation and its end a group sends nothing; its end is read again (the TrainJob, its pods)."""
    nodes.add_many(3)
    step = make_step(kube, nodes, ALL_REDUCE)
    plan = step.plan()
    counting = CountingKube(kube)
    step.kube = counting
    polls: list[list[tuple[str, str, dict[str, Any]]]] = []

    def end_of_poll() -> None:
        polls.append(list(counting.sent))
        counting.sent.clear()

    def until_the_mirror_holds_the_trainjob() -> None:
        deadline = time.monotonic() + 10
        while mirror.trainjobs.get(TRAINJOB) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        end_of_poll()

    with open_category_mirror(counting, step.context, plan.group("g0").nodes) as mirror:
        assert mirror.nodes is not None
        assert len(mirror.nodes) == 3
        counting.sent.clear()
        result, _ = step.run(
            "g0",
            [
                (1, until_the_mirror_holds_the_trainjob),
                (1, end_of_poll),
                (1, end_of_poll),
                (1, lambda: complete_trainjob(kube, step.namespace, TRAINJOB)),  # not counted: the Trainer's
                *UNTIL_THE_WATCH_SEES_IT,
            ],
            plan=plan,
            mirror=mirror,
        )
    end_of_poll()

    assert result.succeeded
    first, *steady, last = polls
    assert ("POST", f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{step.namespace}/trainjobs") in [
        (method, path) for method, path, _ in first
    ]
    assert steady == [[], []], "no request between the TrainJob's creation and its end"
    paths = [path for _, path, _ in last]
    assert paths[:2] == [
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{step.namespace}/trainjobs/{TRAINJOB}",
        f"/api/v1/namespaces/{step.namespace}/pods",
    ], "the end is read from the API server: the TrainJob, then its pods"
    assert not [path for path in paths if path.startswith("/api/v1/nodes")], "the Nodes come from the mirror"


def _synthetic_plan(nodes_per_group: int, *, eligible: int = 10_000, excluded: int = 1_000) -> Plan:
    """`eligible` nodes with 42-character names in groups of `nodes_per_group`, plus `excluded` cordoned nodes
    (each exclusion carries its full message), as a large cluster's plan would be."""
    names = [f"gpu-node-{index:05d}.rack-{index // 72:03d}.cluster.local.gpu0" for index in range(eligible + excluded)]
    assert {len(name) for name in names} == {42}
    message = (
        "node is cordoned (spec.unschedulable); taint-select node.kubernetes.io/unschedulable in spec.target "
        "to certify cordoned nodes"
    )
    exclusions = tuple(Exclusion(name, "Cordoned", message) for name in names[eligible:])
    groups = tuple(
        NodeGroup(f"g{index}", tuple(names[start : start + nodes_per_group]))
        for index, start in enumerate(range(0, eligible, nodes_per_group))
    )
    return Plan("b200", tuple(sorted(names)), exclusions, groups)


@pytest.mark.parametrize("nodes_per_group", [8, 10_000], ids=["8-per-group", "10000-per-group"])
def test_the_fan_out_item_and_the_plan_configmap_stay_small_at_10000_nodes(
    kube: KubeClient, namespace: str, nodes_per_group: int
) -> None:
    """Measured on what the API server stores and returns: the plan ConfigMap of a 10,000-node plan stays far
    below the 1 MiB object limit, and a group's withParam item (what Argo copies into node names, annotations
    and the step's environment) is its name alone, the same bytes for 8 or 10,000 nodes."""
    context = create_context(kube, namespace, resolve_category(ALL_REDUCE, selector=namespace), WORKFLOW)
    plan = _synthetic_plan(nodes_per_group)

    stored = kube.create_or_replace(plan_configmap(context, plan))
    items = json.dumps(plan.withparam_items()).encode()
    first_item = json.dumps(plan.withparam_items()[0]).encode()
    configmap_bytes = len(json.dumps(stored).encode())
    print(
        f"\n{nodes_per_group} nodes per group: {len(plan.groups)} group(s), fan-out item {len(first_item)} B, "
        f"withParam {len(items)} B, plan ConfigMap {configmap_bytes} B"
    )

    assert plan_from_configmap(stored) == plan
    assert first_item == b'"g0"'
    assert configmap_bytes < 900 * 1024
