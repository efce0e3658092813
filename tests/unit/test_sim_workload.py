"""What each workload pod of the simulated GPU cluster does under a fault plan, read back the product's way.

The pods are built from the product's own rendering of every catalog entry (TrainingRuntime + TrainJob), the
way Kubeflow Trainer v2 and JobSet turn them into pods: the trainer's command, args and env on the
`trainjob-ancestor-step: trainer` job's `node` container, torchrun's `PET_*` env, JobSet's labels and the
completion index. Logs are checked with the product's parsers (`parse_nccl_log`, `parse_megatron_log`), so
a format the product would misread fails here, not in an end-to-end run. Every pod starts at t=0 here; in a
cluster the MPI launcher starts after its workers, which only delays its failures further.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.loading import parse_certification
from nvcre_argo.measure.megatron import parse_megatron_log, parse_training_line
from nvcre_argo.measure.nccl import parse_nccl_log
from nvcre_argo.measure.thresholds import evaluate_thresholds, measured_values
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.category import resolve_certification
from nvcre_argo.resolve.values import gpu_values
from tests.sim.faults import FaultPlan, load_fault_plan
from tests.sim.workload import (
    COMPLETION_INDEX,
    HEALTH_GRACE_SECONDS,
    JOBSET_NAME_LABEL,
    PEER_TEARDOWN_SECONDS,
    REPLICATED_JOB_LABEL,
    RESUMED_MIN_SECONDS,
    WARMUP_FACTOR,
    Exit,
    Log,
    MarkNode,
    Ready,
    RunForever,
    SaveCheckpoint,
    Script,
    Wait,
    WorkloadKind,
    checkpoint_save_seconds,
    script_for,
    workload_kind,
)

NODES = ("gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4")
GPUS_PER_NODE = 8  # h100
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINJOB = "cert-0-g0"
NCCL_ALL_REDUCE = "communication/nccl-all-reduce"
LOOPBACK = "communication/nccl-loopback"
TRAINING = "training/nemotron5-8b"
DCGM = "diagnostics/dcgm-level1"
# One entry per workload family; per-node entries run one node per TrainJob.
FAMILIES = {
    "nccl-mpi": (NCCL_ALL_REDUCE, NODES),
    "nccl-loopback": (LOOPBACK, ("gpu-node-3",)),
    "training": (TRAINING, NODES),
    "dcgm": (DCGM, ("gpu-node-3",)),
}


# --------------------------------------------------------------------------------------------- pods


@functools.cache
def rendered(
    key: str, nodes: tuple[str, ...], rdma_device_access: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The product's TrainingRuntime and TrainJob for one group of `nodes` (h100, no gang scheduler)."""
    domain, variant = key.split("/")
    category: dict[str, Any] = {"domain": domain, "variant": variant}
    if rdma_device_access is not None:
        category["options"] = {"rdmaDeviceAccess": rdma_device_access}
    spec = {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "categories": [category]}
    document = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "cert"}, "spec": spec}
    resolved, errors = resolve_certification(parse_certification(document, "test.yaml").spec, load_catalog())
    assert errors == []
    (category,) = resolved
    gpu = gpu_values(category, "h100")
    runtime = render_runtime(category, gpu, name="cert-runtime", namespace="nvcre", num_nodes=len(nodes))
    trainjob = render_trainjob(
        category,
        gpu,
        name=TRAINJOB,
        namespace="nvcre",
        certification="cert",
        runtime_name="cert-runtime",
        group="g0",
        nodes=nodes,
    )
    return runtime, trainjob


def jobset_pods(
    key: str, nodes: Sequence[str], *, launcher_node: str | None = None, rdma_device_access: str | None = None
) -> list[dict[str, Any]]:
    """The bound pods Trainer v2 + JobSet create for the rendered pair: `node` pod i on sorted(nodes)[i]."""
    runtime, trainjob = rendered(key, tuple(sorted(nodes)), rdma_device_access)
    trainer = trainjob["spec"]["trainer"]
    torch = "torch" in runtime["spec"]["mlPolicy"]
    pods = []
    for replicated_job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        job_name = replicated_job["name"]
        job_template = replicated_job["template"]
        pod_template = copy.deepcopy(job_template["spec"]["template"])
        container = pod_template["spec"]["containers"][0]
        job_labels = job_template.get("metadata", {}).get("labels", {})
        if job_labels.get(ANCESTOR_LABEL) == "trainer":
            container.update({key: list(trainer[key]) for key in ("command", "args") if key in trainer})
            container["env"] = [*container.get("env", []), *trainer.get("env", [])]
            if torch:
                container["env"] += [
                    {"name": "PET_NNODES", "value": str(trainer["numNodes"])},
                    {"name": "PET_NPROC_PER_NODE", "value": str(trainer.get("numProcPerNode", 1))},
                    {
                        "name": "PET_NODE_RANK",
                        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}},
                    },
                ]
        replicas = trainer["numNodes"] if job_name == "node" else 1
        for index in range(replicas):
            labels = {
                **job_labels,
                **pod_template.get("metadata", {}).get("labels", {}),
                JOBSET_NAME_LABEL: TRAINJOB,
                REPLICATED_JOB_LABEL: job_name,
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-name": f"{TRAINJOB}-{job_name}-0",
                COMPLETION_INDEX: str(index),
            }
            node = sorted(nodes)[index] if job_name == "node" else (launcher_node or sorted(nodes)[0])
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{TRAINJOB}-{job_name}-0-{index}-x7k2q",
                        "namespace": "nvcre",
                        "labels": labels,
                        "annotations": {COMPLETION_INDEX: str(index)},
                    },
                    "spec": {**pod_template["spec"], "nodeName": node, "hostname": f"{TRAINJOB}-{job_name}-0-{index}"},
                    "status": {"phase": "Running"},
                }
            )
    return pods


def rank_nodes(pods: Sequence[dict[str, Any]]) -> list[str]:
    """`peers` as the sim kubelet passes them: the nodes of every pod but an MPI launcher, sorted."""
    ranks = {pod["spec"]["nodeName"] for pod in pods if pod["metadata"]["labels"][REPLICATED_JOB_LABEL] != "launcher"}
    return sorted(ranks)


@dataclass(frozen=True)
class Played:
    """One pod and its script; `role` is `launcher` or `node-<completion index>`."""

    role: str
    node: str
    script: Script

    @property
    def failure_at(self) -> float | None:
        exit_step = self.script.exit
        return self.script.ends_after_seconds if exit_step is not None and exit_step.code != 0 else None


def play(
    key: str,
    plan: FaultPlan | str = "",
    *,
    nodes: Sequence[str] = NODES,
    attempt: int = 0,
    launcher_node: str | None = None,
    domains: Mapping[str, str] | None = None,
) -> dict[str, Played]:
    """Every pod's script; `domains` is passed to `script_for` only when given, so its default is tested too."""
    chosen = load_fault_plan(plan) if isinstance(plan, str) else plan
    pods = jobset_pods(key, nodes, launcher_node=launcher_node)
    peers = rank_nodes(pods)
    played = {}
    for pod in pods:
        labels = pod["metadata"]["labels"]
        role = "launcher" if labels[REPLICATED_JOB_LABEL] == "launcher" else f"node-{labels[COMPLETION_INDEX]}"
        if domains is None:
            script = script_for(pod, peers=peers, plan=chosen, attempt=attempt)
        else:
            script = script_for(pod, peers=peers, plan=chosen, attempt=attempt, domains=domains)
        played[role] = Played(role, pod["spec"]["nodeName"], script)
    return played


def family(
    name: str, plan: str = "", *, attempt: int = 0, domains: Mapping[str, str] | None = None
) -> dict[str, Played]:
    key, nodes = FAMILIES[name]
    return play(key, plan, nodes=nodes, attempt=attempt, domains=domains)


def first_failures(played: dict[str, Played]) -> list[Played]:
    """The pods that exit non-zero first (all of them when several tie)."""
    failing = [item for item in played.values() if item.failure_at is not None]
    if not failing:
        return []
    first = min(item.failure_at for item in failing if item.failure_at is not None)
    return [item for item in failing if item.failure_at == first]


def last_rank(played: dict[str, Played]) -> Played:
    return played[f"node-{len([role for role in played if role.startswith('node-')]) - 1}"]


# --------------------------------------------------------------------------------------------- roles

# What every catalog entry's pods are; a new entry fails the coverage test until it is classified here.
ENTRY_ROLES = {
    "communication/nccl-all-gather": {"node": WorkloadKind.MPI_WORKER, "launcher": WorkloadKind.NCCL_LAUNCHER},
    "communication/nccl-all-reduce": {"node": WorkloadKind.MPI_WORKER, "launcher": WorkloadKind.NCCL_LAUNCHER},
    "communication/nccl-alltoall": {"node": WorkloadKind.MPI_WORKER, "launcher": WorkloadKind.NCCL_LAUNCHER},
    "communication/nccl-loopback": {"node": WorkloadKind.NCCL_SINGLE_NODE},
    "communication/nccl-loopback-nvswitch": {"node": WorkloadKind.NCCL_SINGLE_NODE},
    "diagnostics/dcgm-level1": {"node": WorkloadKind.DCGM_DIAG},
    "diagnostics/dcgm-level2": {"node": WorkloadKind.DCGM_DIAG},
    "diagnostics/dcgm-level3": {"node": WorkloadKind.DCGM_DIAG},
    "diagnostics/dcgm-level4": {"node": WorkloadKind.DCGM_DIAG},
    "training/nemotron5-56b": {"node": WorkloadKind.MEGATRON_TRAINING},
    "training/nemotron5-8b": {"node": WorkloadKind.MEGATRON_TRAINING},
}


def test_every_catalog_entry_has_its_roles_listed_here() -> None:
    assert sorted(ENTRY_ROLES) == sorted(load_catalog().names())


@pytest.mark.parametrize(("key", "roles"), list(ENTRY_ROLES.items()), ids=list(ENTRY_ROLES))
def test_the_pods_of_every_catalog_entry_are_recognised_from_the_rendered_manifests(
    key: str, roles: dict[str, WorkloadKind]
) -> None:
    kinds = {pod["metadata"]["labels"][REPLICATED_JOB_LABEL]: workload_kind(pod) for pod in jobset_pods(key, NODES)}
    assert kinds == roles


def bare_pod(command: list[str], *, job: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {REPLICATED_JOB_LABEL: job} if job else {}
    container: dict[str, Any] = {"name": "main", "command": command}
    if env:
        container["env"] = [{"name": name, "value": value} for name, value in env.items()]
    return {"metadata": {"name": "p", "labels": labels}, "spec": {"nodeName": "gpu-node-1", "containers": [container]}}


@pytest.mark.parametrize(
    ("pod", "kind"),
    [
        pytest.param(bare_pod(["mpirun", "-np", "2", "all_gather_perf"]), WorkloadKind.NCCL_LAUNCHER, id="mpirun"),
        pytest.param(bare_pod(["all_reduce_perf", "-g", "8"], job="launcher"), WorkloadKind.NCCL_LAUNCHER, id="label"),
        pytest.param(bare_pod(["/opt/nccl/alltoall_perf", "-g", "8"]), WorkloadKind.NCCL_SINGLE_NODE, id="single"),
        pytest.param(bare_pod(["dcgmi", "diag", "-r", "2"]), WorkloadKind.DCGM_DIAG, id="dcgmi"),
        pytest.param(bare_pod(["/usr/sbin/sshd", "-De"]), WorkloadKind.MPI_WORKER, id="sshd"),
        pytest.param(bare_pod(["python", "pretrain_gpt.py"]), WorkloadKind.MEGATRON_TRAINING, id="pretrain-gpt"),
        pytest.param(bare_pod(["sleep", "10"]), WorkloadKind.GENERIC, id="sleep"),
        pytest.param(bare_pod([]), WorkloadKind.GENERIC, id="image-entrypoint"),
    ],
)
def test_a_hand_written_pod_is_recognised_by_its_command_and_role(pod: dict[str, Any], kind: WorkloadKind) -> None:
    assert workload_kind(pod) is kind


def test_an_unknown_workload_runs_durationseconds_then_exits_0_and_crashes_like_any_other() -> None:
    pod = bare_pod(["sleep", "10"])
    healthy = script_for(pod, peers=["gpu-node-1"], plan=load_fault_plan("defaults: {durationSeconds: 7}"), attempt=0)
    assert (healthy.kind, healthy.ends_after_seconds, healthy.exit) == ("generic", 7, Exit(0, "Completed"))
    crashing = load_fault_plan("nodes: {gpu-node-1: {fault: crash, exitCode: 3, afterSeconds: 2}}")
    crashed = script_for(pod, peers=["gpu-node-1"], plan=crashing, attempt=0)
    assert (crashed.ends_after_seconds, crashed.exit) == (2, Exit(3, "Error"))


def test_a_pod_not_bound_to_a_node_has_no_script() -> None:
    pod = bare_pod(["sleep", "10"])
    del pod["spec"]["nodeName"]
    with pytest.raises(ValueError, match="nodeName"):
        script_for(pod, peers=[], plan=FaultPlan(), attempt=0)


@pytest.mark.parametrize("key", [NCCL_ALL_REDUCE, TRAINING])
def test_a_rank_pod_with_host_rdma_devices_is_played_like_any_other(key: str) -> None:
    """`rdmaDeviceAccess: hostPath` pods (a hostPath volume, privileged) run on the simulated nodes unchanged:
    the simulated node has its InfiniBand devices, so the pods play exactly the scripts of the default pods."""
    with_host, default = (
        jobset_pods(key, NODES, rdma_device_access="hostPath"),
        jobset_pods(key, NODES, rdma_device_access=None),
    )
    ranks = [pod for pod in with_host if pod["metadata"]["labels"][REPLICATED_JOB_LABEL] == "node"]
    assert ranks
    volume = {"name": "host-infiniband", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}}
    assert all(volume in pod["spec"]["volumes"] for pod in ranks)
    plan = load_fault_plan("")
    scripts = [script_for(pod, peers=rank_nodes(with_host), plan=plan, attempt=0) for pod in with_host]
    assert scripts == [script_for(pod, peers=rank_nodes(default), plan=plan, attempt=0) for pod in default]


# --------------------------------------------------------------------------------------------- every script

EVERY_FAULT = {
    "healthy": "",
    "crash": "nodes: {gpu-node-3: {fault: crash, exitCode: 137, afterSeconds: 1}}",
    "hang": "nodes: {gpu-node-3: {fault: hang}}",
    "slow": "nodes: {gpu-node-3: {fault: slow, busBandwidthGBps: 12, tflopsPerGpu: 100, stepTimeMs: 9000}}",
    "datacheck": "nodes: {gpu-node-3: {fault: datacheck}}",
    "health": "nodes: {gpu-node-3: {fault: health, afterSeconds: 1, taint: {key: k, effect: NoSchedule}}}",
    "notready": "nodes: {gpu-node-3: {fault: notready, afterSeconds: 1}}",
    "stall": "nodes: {gpu-node-3: {fault: stall}}",
    "transient": "nodes: {gpu-node-3: {fault: transient, exitCode: 2}}",
    "nomeasurement": "nodes: {gpu-node-3: {fault: nomeasurement}}",
}
SCENARIOS = [pytest.param(name, fault, id=f"{name}-{fault}") for name in FAMILIES for fault in EVERY_FAULT]


def assert_well_formed(played: dict[str, Played]) -> None:
    for item in played.values():
        steps = item.script.steps
        assert isinstance(steps[-1], Exit | RunForever)
        assert item.script.ready_after_seconds == 0
        assert all(step.seconds > 0 for step in steps if isinstance(step, Wait))
        assert all(step.text.endswith("\n") for step in steps if isinstance(step, Log))
        assert not any(isinstance(a, Log) and isinstance(b, Log) for a, b in itertools.pairwise(steps))


@pytest.mark.parametrize(("name", "fault"), SCENARIOS)
def test_every_script_is_well_formed(name: str, fault: str) -> None:
    assert_well_formed(family(name, EVERY_FAULT[fault]))


@pytest.mark.parametrize(("name", "fault"), SCENARIOS)
def test_only_the_faulty_node_s_pod_fails_first_and_every_other_failure_comes_later(name: str, fault: str) -> None:
    played = family(name, EVERY_FAULT[fault])
    first = first_failures(played)
    if fault in ("crash", "transient"):
        assert [item.node for item in first] == ["gpu-node-3"]
        culprit_at = first[0].failure_at
        assert culprit_at is not None
        later = [item.failure_at for item in played.values() if item.failure_at is not None and item not in first]
        assert all(at >= culprit_at + PEER_TEARDOWN_SECONDS for at in later)
    elif fault == "datacheck" and name.startswith("nccl"):
        # nccl-tests itself fails the check: the pod that ran it (the launcher, or the loopback pod).
        assert [item.role for item in first] == ["launcher" if name == "nccl-mpi" else "node-0"]
    else:
        assert first == []


@pytest.mark.parametrize(("name", "fault"), SCENARIOS)
def test_the_same_inputs_give_the_same_script(name: str, fault: str) -> None:
    assert family(name, EVERY_FAULT[fault]) == family(name, EVERY_FAULT[fault])


# --------------------------------------------------------------------------------------------- NCCL


def test_a_healthy_nccl_group_reports_the_default_bandwidth_on_every_rank_and_succeeds() -> None:
    played = play(NCCL_ALL_REDUCE, "defaults: {durationSeconds: 4, busBandwidthGBps: 380}")
    launcher = played.pop("launcher")
    result = parse_nccl_log(launcher.script.log)
    assert result.bus_bandwidth_gbps == 380
    assert (result.out_of_bounds, result.wrong_results) == (0, 0)
    assert result.hosts == NODES
    assert len(result.ranks) == GPUS_PER_NODE * len(NODES)  # mpirun -np totalGpus
    assert [row.size_bytes for row in result.rows[:3]] == [8, 16, 32]
    assert result.rows[-1].size_bytes == 16 << 30  # -e 16G for h100
    assert (launcher.script.ends_after_seconds, launcher.script.exit) == (4, Exit(0, "Completed"))
    for worker in played.values():
        assert worker.script.kind == WorkloadKind.MPI_WORKER
        assert worker.script.terminal == RunForever()
        assert worker.script.log.startswith("Server listening on 0.0.0.0 port 22.")


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        pytest.param("nodes: {gpu-node-4: {fault: slow, busBandwidthGBps: 12}}", 12, id="one-slow-node"),
        pytest.param(
            "nodes: {gpu-node-1: {fault: slow, busBandwidthGBps: 200},"
            " gpu-node-2: {fault: slow, busBandwidthGBps: 90}}",
            90,
            id="the-slowest-of-two",
        ),
        pytest.param("defaults: {busBandwidthGBps: 455.5}", 455.5, id="healthy-default"),
        pytest.param("nodes: {gpu-node-9: {fault: slow, busBandwidthGBps: 1}}", 380, id="slow-node-outside-group"),
    ],
)
def test_the_measured_bus_bandwidth_is_the_slowest_group_member_s(plan: str, expected: float) -> None:
    values = measured_values(nccl=parse_nccl_log(play(NCCL_ALL_REDUCE, plan)["launcher"].script.log))
    assert values["busBandwidthGBps"] == expected
    below = evaluate_thresholds({"busBandwidthGBps": "value >= 100"}, values)
    assert bool(below) == (expected < 100)


@pytest.mark.parametrize(
    ("launcher_node", "expected"),
    [
        pytest.param("gpu-node-9", 380, id="own-node-is-no-rank"),
        pytest.param("gpu-node-2", 12, id="shares-a-rank-node"),
    ],
)
def test_the_launcher_s_own_node_counts_only_when_ranks_run_there(launcher_node: str, expected: float) -> None:
    plan = f"nodes: {{{launcher_node}: {{fault: slow, busBandwidthGBps: 12}}}}"
    launcher = play(NCCL_ALL_REDUCE, plan, launcher_node=launcher_node)["launcher"]
    assert launcher.node == launcher_node
    assert parse_nccl_log(launcher.script.log).bus_bandwidth_gbps == expected


@pytest.mark.parametrize("key", ["communication/nccl-all-gather", "communication/nccl-alltoall"])
def test_other_collectives_report_the_same_peak_with_their_own_bus_factor(key: str) -> None:
    result = parse_nccl_log(play(key, "defaults: {busBandwidthGBps: 300}")["launcher"].script.log)
    assert result.bus_bandwidth_gbps == 300
    # (n-1)/n for 32 ranks: algbw = busbw x 32/31
    assert result.alg_bandwidth_gbps == pytest.approx(300 * 32 / 31, abs=0.01)


def test_a_loopback_test_reports_its_own_node_with_every_gpu_as_a_rank() -> None:
    played = play(LOOPBACK, "nodes: {gpu-node-3: {fault: slow, busBandwidthGBps: 77}}", nodes=["gpu-node-3"])
    result = parse_nccl_log(played["node-0"].script.log)
    assert (result.bus_bandwidth_gbps, result.hosts, len(result.ranks)) == (77, ("gpu-node-3",), GPUS_PER_NODE)
    assert played["node-0"].script.exit == Exit(0, "Completed")


@pytest.mark.parametrize("name", ["nccl-mpi", "nccl-loopback"])
def test_a_data_check_failure_prints_wrong_values_and_fails_the_nccl_test(name: str) -> None:
    played = family(name, EVERY_FAULT["datacheck"])
    tester = played["launcher" if name == "nccl-mpi" else "node-0"]
    result = parse_nccl_log(tester.script.log)
    assert result.wrong_results > 0
    assert result.out_of_bounds == result.wrong_results
    assert "FAILED" in tester.script.log
    assert result.bus_bandwidth_gbps == 380  # the data is wrong, not slow
    assert tester.script.exit == Exit(1, "Error")
    assert ("Primary job  terminated normally" in tester.script.log) == (name == "nccl-mpi")


@pytest.mark.parametrize("name", ["training", "dcgm"])
def test_a_data_check_fault_does_not_touch_training_or_dcgm(name: str) -> None:
    assert family(name, EVERY_FAULT["datacheck"]) == family(name, "")


@pytest.mark.parametrize("name", ["nccl-mpi", "nccl-loopback"])
def test_a_nomeasurement_group_succeeds_with_nothing_in_its_log_to_measure(name: str) -> None:
    played = family(name, EVERY_FAULT["nomeasurement"])
    tester = played["launcher" if name == "nccl-mpi" else "node-0"]
    result = parse_nccl_log(tester.script.log)
    assert (result.rows, result.avg_bus_bandwidth_gbps, result.out_of_bounds) == ((), None, None)
    assert measured_values(nccl=result) == {}
    assert "busbw" not in tester.script.log
    assert "# Using devices" in tester.script.log  # the rest of the log is as in a healthy run
    assert tester.script.exit == Exit(0, "Completed")
    assert tester.script.ends_after_seconds == family(name)[tester.role].script.ends_after_seconds


def test_a_nomeasurement_node_outside_the_group_changes_nothing() -> None:
    plan = "nodes: {gpu-node-9: {fault: nomeasurement}}"
    assert play(NCCL_ALL_REDUCE, plan) == play(NCCL_ALL_REDUCE)


@pytest.mark.parametrize("name", ["training", "dcgm"])
def test_a_nomeasurement_fault_does_not_touch_training_or_dcgm(name: str) -> None:
    assert family(name, EVERY_FAULT["nomeasurement"]) == family(name, "")


@pytest.mark.parametrize(
    ("exit_code", "names_the_host"),
    [
        pytest.param(
            137, "mpirun noticed that process rank 16 with PID 4016 on node gpu-node-3 exited on signal 9", id="killed"
        ),
        pytest.param(1, "gpu-node-3: Test CUDA failure", id="exit-1"),
    ],
)
def test_an_nccl_crash_ends_the_worker_on_that_node_first_then_mpirun_aborts(
    exit_code: int, names_the_host: str
) -> None:
    played = play(NCCL_ALL_REDUCE, f"nodes: {{gpu-node-3: {{fault: crash, exitCode: {exit_code}, afterSeconds: 1.5}}}}")
    crashed = played["node-2"]
    assert crashed.node == "gpu-node-3"
    assert (crashed.script.ends_after_seconds, crashed.script.exit) == (1.5, Exit(exit_code, "Error"))
    assert "Cuda failure" in crashed.script.log
    launcher = played["launcher"]
    assert (launcher.script.ends_after_seconds, launcher.script.exit) == (3.5, Exit(1, "Error"))
    assert "Primary job  terminated normally, but 1 process returned" in launcher.script.log
    assert names_the_host in launcher.script.log
    result = parse_nccl_log(launcher.script.log)
    assert result.out_of_bounds is None  # no footer: the test never finished
    assert 0 < len(result.rows) < 32
    assert [played[role].script.terminal for role in ("node-0", "node-1", "node-3")] == [RunForever()] * 3


def test_a_hung_nccl_group_prints_its_first_result_then_never_finishes() -> None:
    played = play(NCCL_ALL_REDUCE, EVERY_FAULT["hang"])
    assert {role: item.script.terminal for role, item in played.items()} == dict.fromkeys(played, RunForever())
    assert len(parse_nccl_log(played["launcher"].script.log).rows) == 1


def test_a_stalled_nccl_group_never_prints_a_result_or_even_the_column_header() -> None:
    launcher = play(NCCL_ALL_REDUCE, EVERY_FAULT["stall"])["launcher"]
    result = parse_nccl_log(launcher.script.log)
    assert (result.rows, len(result.ranks)) == ((), 32)
    assert "busbw" not in launcher.script.log
    assert launcher.script.terminal == RunForever()


# --------------------------------------------------------------------------------------------- Megatron-LM


@pytest.mark.parametrize(
    ("plan", "step_seconds", "tflops"),
    [
        pytest.param("", 2.0, 400, id="defaults"),
        pytest.param("defaults: {stepTimeMs: 1234.5, tflopsPerGpu: 512.3}", 1.2345, 512.3, id="fractional"),
        pytest.param(
            "nodes: {gpu-node-1: {fault: slow, tflopsPerGpu: 150}, gpu-node-2: {fault: slow, stepTimeMs: 5000}}",
            5.0,
            150,
            id="the-group-s-worst-of-each",
        ),
    ],
)
def test_the_last_rank_logs_megatron_figures_the_product_reads_back(
    plan: str, step_seconds: float, tflops: float
) -> None:
    played = play(TRAINING, plan)
    result = parse_megatron_log(last_rank(played).script.log)
    assert result.avg_step_time_sec == pytest.approx(step_seconds)
    assert result.avg_tflops_per_gpu == pytest.approx(tflops)
    assert result.goodput_ratio == pytest.approx(1.0)
    # TRAIN_ITERS=50 (maxSteps) from the env, --log-interval 10; Megatron also logs iteration 1.
    assert [record.iteration for record in result.records] == [1, 10, 20, 30, 40, 50]
    assert {record.train_iters for record in result.records} == {50}


def test_megatron_timestamps_advance_by_the_iterations_times_the_printed_step_time() -> None:
    records = parse_megatron_log(last_rank(play(TRAINING)).script.log).records
    for previous, record in itertools.pairwise(records):
        assert record.timestamp is not None
        assert previous.timestamp is not None
        interval = timedelta(milliseconds=record.elapsed_ms * (record.iteration - previous.iteration))
        assert record.timestamp - previous.timestamp == interval


def test_only_the_last_rank_logs_training_lines_and_every_rank_finishes_together() -> None:
    played = play(TRAINING, "defaults: {durationSeconds: 6}")
    assert [len(parse_megatron_log(item.script.log).records) for item in played.values()] == [0, 0, 0, 6]
    assert {(item.script.ends_after_seconds, item.script.exit) for item in played.values()} == {
        (6, Exit(0, "Completed"))
    }


def test_without_train_iters_in_its_arguments_training_logs_a_short_default_run() -> None:
    pod = bare_pod(["torchrun", "pretrain_gpt.py", "--log-interval", "$INTERVAL"], env={"INTERVAL": "4"})
    script = script_for(pod, peers=["gpu-node-1"], plan=FaultPlan(), attempt=0)
    assert [record.iteration for record in parse_megatron_log(script.log).records] == [1, 4, 8, 12, 16, 20]


def test_a_training_crash_ends_its_pod_first_and_its_peers_report_the_lost_peer_later() -> None:
    played = play(TRAINING, "nodes: {gpu-node-2: {fault: crash, exitCode: 137, afterSeconds: 1}}")
    assert (played["node-1"].node, played["node-1"].script.ends_after_seconds) == ("gpu-node-2", 1)
    assert played["node-1"].script.exit == Exit(137, "Error")
    assert "CUDA error" in played["node-1"].script.log
    for role in ("node-0", "node-2", "node-3"):
        peer = played[role].script
        assert (peer.ends_after_seconds, peer.exit) == (1 + PEER_TEARDOWN_SECONDS, Exit(1, "Error"))
        assert "Connection closed by remote peer gpu-node-2" in peer.log
    # The last rank stopped logging when the group lost its peer: no result, and not the final iteration.
    result = parse_megatron_log(played["node-3"].script.log)
    assert result.last_iteration is None or result.last_iteration < 50


def test_with_two_crashes_the_earlier_one_is_the_culprit_and_the_later_node_still_fails_on_its_own() -> None:
    plan = (
        "nodes: {gpu-node-4: {fault: crash, exitCode: 9, afterSeconds: 1}, "
        "gpu-node-2: {fault: crash, exitCode: 7, afterSeconds: 2}}"
    )
    played = play(TRAINING, plan)
    ends = {item.node: (item.script.ends_after_seconds, item.script.exit) for item in played.values()}
    assert ends == {
        "gpu-node-4": (1, Exit(9, "Error")),
        "gpu-node-2": (2, Exit(7, "Error")),
        "gpu-node-1": (3, Exit(1, "Error")),
        "gpu-node-3": (3, Exit(1, "Error")),
    }


@pytest.mark.parametrize(("fault", "lines"), [pytest.param("hang", 1, id="hang"), pytest.param("stall", 0, id="stall")])
def test_a_blocked_training_group_never_exits_and_logs_at_most_its_first_iteration(fault: str, lines: int) -> None:
    played = play(TRAINING, EVERY_FAULT[fault])
    assert {item.script.terminal for item in played.values()} == {RunForever()}
    assert len(parse_megatron_log(last_rank(played).script.log).records) == lines


def test_a_training_hang_with_after_seconds_logs_every_iteration_due_before_then_and_never_exits() -> None:
    """What a stall detector needs to see a training stall: a steady step time first, then no new iteration.
    A healthy run spreads its lines evenly over `durationSeconds` (3 s here), so a hang at 2.5 s keeps all but
    the lines due after it, and a hang at the end keeps them all."""
    healthy = parse_megatron_log(last_rank(play(TRAINING)).script.log).records
    assert len(healthy) >= 4
    due = [3.0 * (index + 1) / (len(healthy) + 1) for index in range(len(healthy))]  # when each line is printed
    for after, lines in ((3.0, len(healthy)), (2.5, sum(at < 2.5 for at in due))):
        played = play(TRAINING, f"nodes: {{gpu-node-3: {{fault: hang, afterSeconds: {after}}}}}")
        assert {item.script.terminal for item in played.values()} == {RunForever()}
        result = parse_megatron_log(last_rank(played).script.log)
        assert result.records == healthy[:lines]
        assert result.avg_step_time_sec == pytest.approx(2.0)  # the plan's default stepTimeMs


# --------------------------------------------------------------------------------------------- checkpoints

# The training entry below: --train-iters 50, --log-interval 10 (lines at 1, 10, 20, 30, 40, 50), TP 2 on h100.
# Megatron prints its checkpoint messages from global rank 0 (`print_rank_0`, the first node's pod) and its
# training lines from the last rank (`print_rank_last`): one pod prints both only in a one-node run.
CHECKPOINT_DIR = "/mnt/checkpoints/wf-abc-g0"
FIRST_NODE = "gpu-node-1"  # where rank 0, which prints the checkpoint messages and saves, runs
LAST_NODE = "gpu-node-4"  # where the last rank, which prints the training lines, runs
ONE_NODE = (FIRST_NODE,)
GROUP_SIZES = [pytest.param(ONE_NODE, id="one-node"), pytest.param(NODES, id="four-nodes")]
BANNER_END = "processes per node\n"  # the end of torchrun's banner, every rank's first line
NO_CHECKPOINT = (
    "WARNING: could not find the metadata file /mnt/checkpoints/wf-abc-g0/latest_checkpointed_iteration.txt\n"
    "    will not load any checkpoints and will start from random\n"
)
SAVING = re.compile(r"^\[[\d:. -]+\] saving checkpoint at iteration +(\d+) to (\S+) in torch_dist format$")
SAVED = re.compile(r"^  \[[\d:. -]+\] successfully saved checkpoint from iteration +(\d+) to (\S+) \[ t 1/2, p 1/1 \]$")


def checkpointing_pods(
    save_interval: int, *, nodes: Sequence[str] = NODES, claim: str | None = "checkpoints"
) -> list[dict[str, Any]]:
    """The training entry's pods on `nodes` with the product's checkpoint contract: env on every `node` pod
    and, unless `claim` is None (then an emptyDir), the claim mounted at /mnt/checkpoints."""
    pods = copy.deepcopy(jobset_pods(TRAINING, nodes))
    settings = {"ENABLE_CHECKPOINT": "true", "SAVE_INTERVAL": str(save_interval), "CHECKPOINT_DIR": CHECKPOINT_DIR}
    source: dict[str, Any] = {"persistentVolumeClaim": {"claimName": claim}} if claim else {"emptyDir": {}}
    for pod in pods:
        container = pod["spec"]["containers"][0]
        container["env"] = [item for item in container["env"] if item["name"] not in settings]
        container["env"] += [{"name": name, "value": value} for name, value in settings.items()]
        container["volumeMounts"] = [
            *container.get("volumeMounts", []),
            {"name": "ckpt", "mountPath": "/mnt/checkpoints"},
        ]
        pod["spec"]["volumes"] = [*pod["spec"].get("volumes", []), {"name": "ckpt", **source}]
    return pods


def play_checkpointing(
    save_interval: int,
    plan: str = "",
    *,
    nodes: Sequence[str] = NODES,
    attempt: int = 0,
    resume_from: int | None = None,
) -> dict[str, Played]:
    pods = checkpointing_pods(save_interval, nodes=nodes)
    chosen = load_fault_plan(plan)
    return {
        f"node-{pod['metadata']['labels'][COMPLETION_INDEX]}": Played(
            f"node-{pod['metadata']['labels'][COMPLETION_INDEX]}",
            pod["spec"]["nodeName"],
            script_for(pod, peers=rank_nodes(pods), plan=chosen, attempt=attempt, resume_from=resume_from),
        )
        for pod in pods
    }


def saves(script: Script) -> list[tuple[int, float]]:
    """Every checkpoint the script stores, with when."""
    return [(step.iteration, at) for at, step in script.timeline() if isinstance(step, SaveCheckpoint)]


def timed_lines(script: Script) -> list[tuple[float, str]]:
    """Every line of the script's log, with the second it is printed at."""
    return [(at, line) for at, step in script.timeline() if isinstance(step, Log) for line in step.text.splitlines()]


def after_banner(log: str) -> str:
    return log[log.index(BANNER_END) + len(BANNER_END) :]


def printed_saves(saving: Played, training: Played) -> list[int]:
    """The iterations whose save rank 0's pod (`saving`) prints, checking that Megatron's two lines come with
    the last rank's (`training`) line of that iteration: right after it when one pod prints both (a one-node
    run), at the same second when they are two pods."""
    lines = timed_lines(saving.script)
    training_at = {
        record.iteration: at
        for at, line in timed_lines(training.script)
        if (record := parse_training_line(line)) is not None
    }
    found = []
    for index, (at, line) in enumerate(lines):
        if (saving_line := SAVING.match(line)) is None:
            continue
        iteration = int(saving_line[1])
        if saving.role == training.role:
            record = parse_training_line(lines[index - 1][1])
            assert record is not None, lines[index - 1]
            assert record.iteration == iteration
        else:
            assert parse_training_line(lines[index - 1][1]) is None  # rank 0 prints no training line
            assert at == pytest.approx(training_at[iteration], abs=1e-3)
        saved_at, saved_line = lines[index + 1]
        saved = SAVED.match(saved_line)
        assert saved is not None, saved_line
        assert saved_at == at
        assert (int(saved[1]), saved[2], saving_line[2]) == (iteration, CHECKPOINT_DIR, CHECKPOINT_DIR)
        found.append(iteration)
    assert len(found) == saving.script.log.count("successfully saved checkpoint")
    return found


@pytest.mark.parametrize("nodes", GROUP_SIZES)
@pytest.mark.parametrize(
    ("save_interval", "expected"),
    [
        pytest.param(1, [1, 10, 20, 30, 40, 50], id="every-iteration"),
        pytest.param(10, [10, 20, 30, 40, 50], id="the-log-interval"),
        pytest.param(15, [20, 30, 50], id="15-30-45"),
        pytest.param(25, [30, 50], id="25-50"),
        pytest.param(50, [50], id="the-last-iteration"),
        pytest.param(51, [], id="past-the-end"),
    ],
)
def test_rank_0_saves_at_the_first_logged_iteration_at_or_past_each_multiple_of_the_save_interval(
    save_interval: int, expected: list[int], nodes: tuple[str, ...]
) -> None:
    played = play_checkpointing(save_interval, nodes=nodes)
    assert_well_formed(played)
    last = last_rank(played)
    first = played.pop("node-0")
    assert (first.node, last.node) == (FIRST_NODE, nodes[-1])
    assert [iteration for iteration, _ in saves(first.script)] == expected
    assert printed_saves(first, last) == expected
    # Stored between Megatron's two lines: a log showing the success always has the checkpoint behind it.
    steps = first.script.steps
    for index, step in enumerate(steps):
        if isinstance(step, SaveCheckpoint):
            before, after = steps[index - 1], steps[index + 1]
            assert isinstance(before, Log)
            assert SAVING.match(before.text.splitlines()[-1])
            assert isinstance(after, Log)
            assert SAVED.match(after.text.splitlines()[0])
    assert len(played) == len(nodes) - 1
    for rank in played.values():
        assert saves(rank.script) == []
        assert "checkpoint" not in rank.script.log


@pytest.mark.parametrize("nodes", GROUP_SIZES)
def test_checkpoint_messages_are_megatron_s_own_and_the_product_reads_the_training_lines_as_before(
    nodes: tuple[str, ...],
) -> None:
    played = play_checkpointing(25, nodes=nodes)
    checkpointing, training = played["node-0"].script.log, last_rank(played).script.log
    plain = last_rank(play(TRAINING, nodes=nodes)).script.log
    assert after_banner(checkpointing).startswith(NO_CHECKPOINT)
    if len(nodes) == 1:
        assert after_banner(checkpointing).startswith(NO_CHECKPOINT + " [before the start of training step]")
    # Iteration 30: a minute of start-up, iteration 1's 10 s warm-up, then 29 x 2 s.
    assert (
        "[2026-01-01 00:02:08.000000] saving checkpoint at iteration      30 to /mnt/checkpoints/wf-abc-g0 in "
        "torch_dist format\n"
        "  [2026-01-01 00:02:08.000000] successfully saved checkpoint from iteration      30 to "
        "/mnt/checkpoints/wf-abc-g0 [ t 1/2, p 1/1 ]\n"
    ) in checkpointing
    assert parse_megatron_log(training) == parse_megatron_log(plain)
    assert len(parse_megatron_log(training).records) == 6


def test_in_a_two_node_run_rank_0_prints_and_stores_the_checkpoints_and_the_last_rank_the_training_lines() -> None:
    played = play_checkpointing(10, nodes=NODES[:2])
    assert_well_formed(played)
    first, last = played["node-0"], played["node-1"]
    assert (first.node, last.node) == (FIRST_NODE, "gpu-node-2")
    # Iterations 10 to 50 at 00:01:28 + 20 s x k: 60 s of start-up, 10 s of warm-up, then 2 s per iteration.
    assert after_banner(first.script.log) == NO_CHECKPOINT + "".join(
        f"[2026-01-01 00:{stamp}.000000] saving checkpoint at iteration {iteration:7d} to {CHECKPOINT_DIR} in "
        "torch_dist format\n"
        f"  [2026-01-01 00:{stamp}.000000] successfully saved checkpoint from iteration {iteration:7d} to "
        f"{CHECKPOINT_DIR} [ t 1/2, p 1/1 ]\n"
        for iteration, stamp in [(10, "01:28"), (20, "01:48"), (30, "02:08"), (40, "02:28"), (50, "02:48")]
    )
    assert [parse_training_line(line) for line in first.script.log.splitlines()] == [None] * len(
        first.script.log.splitlines()
    )
    assert "checkpoint" not in last.script.log
    assert [record.iteration for record in parse_megatron_log(last.script.log).records] == [1, 10, 20, 30, 40, 50]
    assert [iteration for iteration, _ in saves(first.script)] == [10, 20, 30, 40, 50]
    assert not any(isinstance(step, SaveCheckpoint) for step in last.script)
    assert printed_saves(first, last) == [10, 20, 30, 40, 50]


@pytest.mark.parametrize("crashing", [FIRST_NODE, "gpu-node-2", LAST_NODE])
@pytest.mark.parametrize(
    ("after", "expected"),
    [
        # 6 lines spread over max(3, 2 x (a + 2) + 1) s: at 13/7 x k for a = 4, so iteration 10's at 3.71 s
        # comes before the crash and iteration 20's at 5.57 s does not; at 11/7 x k for a = 3, 3.14 s is late.
        pytest.param(4, [10], id="after-the-first-save"),
        pytest.param(3, [], id="before-any-save"),
    ],
)
def test_a_crash_prints_and_stores_only_the_saves_due_before_it(
    crashing: str, after: float, expected: list[int]
) -> None:
    played = play_checkpointing(10, f"nodes: {{{crashing}: {{fault: crash, exitCode: 137, afterSeconds: {after}}}}}")
    assert_well_formed(played)
    first, last = played["node-0"], last_rank(played)
    assert [iteration for iteration, _ in saves(first.script)] == expected
    assert printed_saves(first, last) == expected
    assert all(at < after for _, at in saves(first.script))
    for rank in (first, last):
        assert rank.failure_at is not None
        assert rank.failure_at >= after


def test_a_hung_run_stores_the_saves_it_printed_before_it_hung() -> None:
    """Lines at 3/7 x k s; a hang at 2.5 s keeps the first five (iterations 1 to 40)."""
    played = play_checkpointing(10, "nodes: {gpu-node-3: {fault: hang, afterSeconds: 2.5}}")
    first, last = played["node-0"], last_rank(played)
    assert (first.script.terminal, last.script.terminal) == (RunForever(), RunForever())
    assert [record.iteration for record in parse_megatron_log(last.script.log).records] == [1, 10, 20, 30, 40]
    assert [iteration for iteration, _ in saves(first.script)] == printed_saves(first, last) == [10, 20, 30, 40]


def test_a_resumed_run_loads_its_checkpoint_then_trains_and_saves_from_there() -> None:
    played = play_checkpointing(25, "defaults: {durationSeconds: 3}", resume_from=20)
    assert_well_formed(played)
    last = last_rank(played)
    first = played.pop("node-0")
    assert after_banner(first.script.log).startswith(
        " loading distributed checkpoint from /mnt/checkpoints/wf-abc-g0 at iteration 20\n"
        "  successfully loaded checkpoint from /mnt/checkpoints/wf-abc-g0 [ t 1/2, p 1/1 ] at iteration 20\n"
    )
    log = last.script.log
    records = parse_megatron_log(log).records
    assert [record.iteration for record in records] == [30, 40, 50]
    assert [record.elapsed_ms for record in records] == [2000 * WARMUP_FACTOR, 2000, 2000]  # warm-up again
    assert re.findall(r"consumed samples: +(\d+)", log) == [str(iteration * 32) for iteration in (30, 40, 50)]
    assert parse_megatron_log(log).avg_step_time_sec == pytest.approx(2.0)
    # Saves due after 20: 25 (at 30) and 50.
    assert [iteration for iteration, _ in saves(first.script)] == printed_saves(first, last) == [30, 50]
    # 30 of the 50 iterations left: 3 s x 30/50, for every rank.
    for item in [first, *played.values()]:
        assert item.script.ends_after_seconds == pytest.approx(1.8)
        assert item.script.exit == Exit(0, "Completed")
    for rank in played.values():
        assert "checkpoint" not in rank.script.log


@pytest.mark.parametrize("resume_from", [50, 70])
def test_a_run_resumed_at_or_past_its_last_iteration_loads_and_completes_after_the_minimum(resume_from: int) -> None:
    played = play_checkpointing(10, resume_from=resume_from)
    first, last = played["node-0"], last_rank(played)
    assert f"successfully loaded checkpoint from {CHECKPOINT_DIR} [ t 1/2, p 1/1 ] at iteration {resume_from}\n" in (
        first.script.log
    )
    assert parse_megatron_log(last.script.log).records == ()
    assert [saves(item.script) for item in played.values()] == [[]] * len(NODES)
    assert {(item.script.ends_after_seconds, item.script.exit) for item in played.values()} == {
        (RESUMED_MIN_SECONDS, Exit(0, "Completed"))
    }


@pytest.mark.parametrize(
    ("resume_from", "duration", "expected"),
    [
        pytest.param(None, 3, 3, id="fresh"),
        pytest.param(25, 3, 1.5, id="half-left"),
        pytest.param(25, 10, 5, id="half-of-a-longer-run"),
        pytest.param(45, 3, RESUMED_MIN_SECONDS, id="never-below-the-minimum"),
        pytest.param(45, 0.5, 0.5, id="never-longer-than-a-fresh-run"),
    ],
)
def test_a_resumed_run_is_shorter_in_proportion_to_the_iterations_left(
    resume_from: int | None, duration: float, expected: float
) -> None:
    played = play_checkpointing(10, f"defaults: {{durationSeconds: {duration}}}", resume_from=resume_from)
    assert [item.script.ends_after_seconds for item in played.values()] == [pytest.approx(expected)] * len(NODES)


def test_a_pod_that_does_not_checkpoint_ignores_resume_from() -> None:
    pods = jobset_pods(TRAINING, NODES)  # the catalog's ENABLE_CHECKPOINT is "false"
    plan = FaultPlan()
    for pod in pods:
        assert script_for(pod, peers=NODES, plan=plan, attempt=0, resume_from=20) == script_for(
            pod, peers=NODES, plan=plan, attempt=0
        )
        assert "checkpoint" not in script_for(pod, peers=NODES, plan=plan, attempt=0).log


def test_a_transient_crash_after_a_save_is_resumed_from_it_on_the_retry() -> None:
    """The story an end-to-end test tells: the first attempt crashes after its first checkpoint, the retry
    loads it and finishes the run, saving the rest."""
    plan = "nodes: {gpu-node-2: {fault: transient, afterSeconds: 4}}"
    first = play_checkpointing(10, plan, attempt=0)["node-0"]
    assert (first.script.exit, [iteration for iteration, _ in saves(first.script)]) == (Exit(1, "Error"), [10])
    retry = play_checkpointing(10, plan, attempt=1, resume_from=10)
    assert " loading distributed checkpoint from /mnt/checkpoints/wf-abc-g0 at iteration 10\n" in (
        retry["node-0"].script.log
    )
    assert {item.script.exit for item in retry.values()} == {Exit(0, "Completed")}
    assert [record.iteration for record in parse_megatron_log(last_rank(retry).script.log).records] == [20, 30, 40, 50]
    assert [iteration for iteration, _ in saves(retry["node-0"].script)] == [20, 30, 40, 50]


@pytest.mark.parametrize(
    ("plan", "resume_from", "crash_after"),
    [
        pytest.param("", None, None, id="healthy"),
        pytest.param("defaults: {durationSeconds: 20}", None, None, id="longer"),
        pytest.param("nodes: {gpu-node-2: {fault: crash, afterSeconds: 4}}", None, 4, id="crash-after-a-save"),
        pytest.param("nodes: {gpu-node-2: {fault: crash, afterSeconds: 3}}", None, 3, id="crash-before-any"),
        pytest.param("nodes: {gpu-node-2: {fault: transient, afterSeconds: 5}}", None, 5, id="transient"),
        pytest.param("", 20, None, id="resumed"),
        pytest.param(
            "defaults: {durationSeconds: 20}\nnodes: {gpu-node-2: {fault: crash, afterSeconds: 6}}",
            20,
            6,
            id="resumed-crash-inside-the-run",
        ),
    ],
)
def test_the_save_time_helper_gives_the_times_the_played_run_saves_at(
    plan: str, resume_from: int | None, crash_after: float | None
) -> None:
    """The helper's times are those at which rank 0's pod prints each save and stores it."""
    duration = load_fault_plan(plan).defaults.duration_seconds
    saving = play_checkpointing(10, plan, resume_from=resume_from)["node-0"].script
    played = saves(saving)
    printed = [(int(found[1]), at) for at, line in timed_lines(saving) if (found := SAVING.match(line)) is not None]
    assert printed == played
    helper = checkpoint_save_seconds(
        train_iters=50,
        log_interval=10,
        save_interval=10,
        duration_seconds=duration,
        resume_from=resume_from,
        crash_after_seconds=crash_after,
    )
    assert [iteration for iteration, _ in helper] == [iteration for iteration, _ in played]
    assert [at for _, at in helper] == pytest.approx([at for _, at in played], abs=1e-3)
    assert (helper == []) == (crash_after == 3)


def test_without_a_crash_the_save_times_spread_the_lines_evenly_over_the_duration() -> None:
    # Lines at 1, 10, ..., 50 printed at 6 x k/7 s; the saves every 20 iterations are at 20 and 40.
    found = checkpoint_save_seconds(train_iters=50, log_interval=10, save_interval=20, duration_seconds=6)
    assert [iteration for iteration, _ in found] == [20, 40]
    assert [at for _, at in found] == pytest.approx([18 / 7, 30 / 7])


# --------------------------------------------------------------------------------------------- DCGM


def test_dcgm_passes_with_exit_0_and_prints_its_json_verdict() -> None:
    script = family("dcgm")["node-0"].script
    assert script.exit == Exit(0, "Completed")
    document = json.loads(script.log)
    statuses = [
        result["status"]
        for category in document["DCGM GPU Diagnostic"]["test_categories"]
        for test in category["tests"]
        for result in test["results"]
    ]
    assert statuses == ["Pass"]  # level 1: the deployment checks only


def test_a_crashing_dcgm_run_exits_with_the_plan_s_code_and_a_failed_test() -> None:
    played = play("diagnostics/dcgm-level3", EVERY_FAULT["crash"], nodes=["gpu-node-3"])
    script = played["node-0"].script
    assert (script.ends_after_seconds, script.exit) == (1, Exit(137, "Error"))
    assert '"status": "Fail"' in script.log


def test_dcgm_without_json_prints_its_table() -> None:
    pod = bare_pod(["dcgmi", "diag", "-r", "2"])
    script = script_for(pod, peers=["gpu-node-1"], plan=FaultPlan(), attempt=0)
    assert "| software                  | Pass" in script.log
    assert "| memory                    | Pass" in script.log


# --------------------------------------------------------------------------------------------- node marks


HEALTH_SIGNALS: dict[str, tuple[str, dict[str, Any]]] = {
    "taint": (
        "{fault: health, afterSeconds: 2, taint: {key: nvidia.com/gpu.health, value: unhealthy, effect: NoSchedule}}",
        {"taint": {"key": "nvidia.com/gpu.health", "value": "unhealthy", "effect": "NoSchedule"}},
    ),
    "condition": (
        "{fault: health, afterSeconds: 2, condition: {type: GpuUnhealthy, status: 'True'}}",
        {"condition": {"type": "GpuUnhealthy", "status": "True"}},
    ),
    "notready": ("{fault: notready, afterSeconds: 2}", {"not_ready": True}),
}


@pytest.mark.parametrize(
    ("name", "signal"),
    [pytest.param(name, signal, id=f"{name}-{signal}") for name in FAMILIES for signal in HEALTH_SIGNALS],
)
def test_a_health_fault_marks_its_node_once_from_its_own_pod_while_the_group_runs_on(name: str, signal: str) -> None:
    fault, change = HEALTH_SIGNALS[signal]
    played = family(name, f"defaults: {{durationSeconds: 3}}\nnodes: {{gpu-node-3: {fault}}}")
    marks = [(item.node, at, step) for item in played.values() for at, step in item.script.marks]
    assert marks == [("gpu-node-3", 2, MarkNode("gpu-node-3", change))]
    for item in played.values():
        # Nothing fails; whatever completes does so only after the mark and the monitor's grace.
        assert item.failure_at is None
        assert item.script.ends_after_seconds in (None, 3 + 2 + HEALTH_GRACE_SECONDS)
    if name == "nccl-mpi":
        assert parse_nccl_log(played["launcher"].script.log).bus_bandwidth_gbps == 380


def test_a_health_mark_after_the_pod_is_gone_never_happens() -> None:
    plan = (
        "nodes: {gpu-node-1: {fault: crash, afterSeconds: 1}, "
        "gpu-node-3: {fault: health, afterSeconds: 5, condition: {type: GpuUnhealthy, status: 'True'}}}"
    )
    played = play(TRAINING, plan)
    assert [item.script.marks for item in played.values()] == [[], [], [], []]


# --------------------------------------------------------------------------------------------- transient


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_transient_fault_crashes_the_first_workload_only(name: str) -> None:
    crash = EVERY_FAULT["crash"].replace("137", "2")
    first = family(name, EVERY_FAULT["transient"], attempt=0)
    assert {role: item.script.exit for role, item in first.items()} == {
        role: item.script.exit for role, item in family(name, crash).items()
    }
    assert [item.node for item in first_failures(first)] == ["gpu-node-3"]
    for attempt in (1, 2):
        assert family(name, EVERY_FAULT["transient"], attempt=attempt) == family(name, "", attempt=attempt)


# --------------------------------------------------------------------------------------------- steps


def test_a_script_refuses_a_missing_or_misplaced_end_and_a_second_ready() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Script(WorkloadKind.GENERIC, (Ready(), Wait(1)))
    with pytest.raises(ValueError, match="exactly one"):
        Script(WorkloadKind.GENERIC, (RunForever(), Exit(0, "Completed")))
    with pytest.raises(ValueError, match="Ready at most once"):
        Script(WorkloadKind.GENERIC, (Ready(), Ready(), RunForever()))
    script = Script(WorkloadKind.GENERIC, (Wait(1.5), Ready(), Log("a\n"), Wait(2), Log("b\n"), Exit(3, "Error")))
    assert (script.ready_after_seconds, script.ends_after_seconds, script.log) == (1.5, 3.5, "a\nb\n")
    assert list(script) == list(script.steps)


# --------------------------------------------------------------------------------------------- links

# Two NVLink domains of two nodes each, as the sim cluster's `nvidia.com/gpu.clique` labels would put them.
TWO_DOMAINS = {
    "gpu-node-1": "sim-cluster.0",
    "gpu-node-2": "sim-cluster.0",
    "gpu-node-3": "sim-cluster.1",
    "gpu-node-4": "sim-cluster.1",
}
ONE_DOMAIN = dict.fromkeys(NODES, "sim-cluster.0")
BROKEN_LINK = "links: [{between: [sim-cluster.0, sim-cluster.1], afterSeconds: 2, exitCode: 3}]"


def ib_error(host: str, peer: str) -> re.Pattern[str]:
    """NCCL's InfiniBand completion error as `host` reports it about `peer`."""
    return re.compile(
        rf"^{host}:\d+:\d+ \[0\] transport/net_ib\.cc:\d+ NCCL WARN NET/IB : Got completion from peer "
        rf"{peer}<\d+> with status=12 .* remoteGids::ffff:[\d.]+ hca mlx5_0$",
        re.MULTILINE,
    )


@pytest.mark.parametrize("key", ["communication/nccl-all-reduce", "communication/nccl-alltoall"])
def test_an_nccl_group_across_a_broken_link_fails_in_the_launcher_with_ib_errors_from_both_sides(key: str) -> None:
    played = play(key, BROKEN_LINK, domains=TWO_DOMAINS)
    launcher = played.pop("launcher")
    assert (launcher.script.ends_after_seconds, launcher.script.exit) == (2, Exit(3, "Error"))
    log = launcher.script.log
    assert ib_error("gpu-node-1", "gpu-node-3").search(log)
    assert ib_error("gpu-node-3", "gpu-node-1").search(log)
    assert "gpu-node-1: Test NCCL failure common.cu:1005 'remote process exited or there was a network error" in log
    assert "Primary job  terminated normally, but 2 processes returned" in log
    assert "Exit code:    3" in log
    assert "Cuda failure" not in log  # no GPU broke
    result = parse_nccl_log(log)
    assert (result.hosts, result.out_of_bounds) == (NODES, None)  # no footer: the test never finished
    assert 0 < len(result.rows) < 32
    # No rank pod fails, so nothing names one node as the culprit; the workers run until deleted.
    assert {role: item.script.terminal for role, item in played.items()} == dict.fromkeys(played, RunForever())


def test_a_training_group_across_a_broken_link_fails_on_every_rank_at_once_with_the_network_error() -> None:
    played = play(TRAINING, BROKEN_LINK, domains=TWO_DOMAINS)
    assert {(item.script.ends_after_seconds, item.script.exit) for item in played.values()} == {(2, Exit(3, "Error"))}
    assert sorted(item.node for item in first_failures(played)) == list(NODES)  # every rank: no single culprit
    across = {"gpu-node-1": "gpu-node-3", "gpu-node-2": "gpu-node-3", "gpu-node-3": "gpu-node-1"}
    for item in played.values():
        log = item.script.log
        assert "NCCL error: remote process exited or there was a network error" in log
        rank = int(item.role.removeprefix("node-")) * GPUS_PER_NODE  # the node's first global rank
        peer = across.get(item.node, "gpu-node-1")
        assert f"Last error:\n[rank{rank}]: NET/IB : Got completion from peer {peer}<" in log
        assert "CUDA error" not in log
    result = parse_megatron_log(last_rank(played).script.log)
    assert result.last_iteration is not None
    assert result.last_iteration < 50


@pytest.mark.parametrize(
    ("plan", "domains"),
    [
        pytest.param(BROKEN_LINK, ONE_DOMAIN, id="group-inside-one-domain"),
        pytest.param(BROKEN_LINK.replace("sim-cluster.1", "sim-cluster.2"), TWO_DOMAINS, id="link-to-another-domain"),
        pytest.param(
            "links: [{between: [sim-cluster.2, sim-cluster.3]}]", TWO_DOMAINS, id="link-between-two-other-domains"
        ),
        pytest.param(BROKEN_LINK, {}, id="no-domains-known"),
        pytest.param(BROKEN_LINK, {"gpu-node-1": "sim-cluster.0", "gpu-node-2": "sim-cluster.0"}, id="one-side-known"),
        pytest.param("", TWO_DOMAINS, id="no-links"),
    ],
)
@pytest.mark.parametrize("key", [NCCL_ALL_REDUCE, TRAINING])
def test_a_group_not_spanning_a_broken_link_runs_as_if_the_plan_had_none(
    key: str, plan: str, domains: dict[str, str]
) -> None:
    assert play(key, plan, domains=domains) == play(key)


def test_without_domains_a_pod_matches_no_link() -> None:
    assert play(NCCL_ALL_REDUCE, BROKEN_LINK) == play(NCCL_ALL_REDUCE)


@pytest.mark.parametrize("name", ["nccl-loopback", "dcgm"])
def test_a_single_node_workload_never_crosses_a_link(name: str) -> None:
    domains = {"gpu-node-3": "sim-cluster.0"}
    plan = "links: [{between: [sim-cluster.0, sim-cluster.1]}]"
    assert family(name, plan, domains=domains) == family(name)


@pytest.mark.parametrize("name", ["nccl-mpi", "training"])
def test_every_link_failure_script_is_well_formed(name: str) -> None:
    assert_well_formed(family(name, BROKEN_LINK, domains=TWO_DOMAINS))


@pytest.mark.parametrize(
    ("crash_after", "culprit"),
    [
        pytest.param(1, "gpu-node-4", id="crash-first"),
        pytest.param(2, "gpu-node-4", id="tie-the-crash-is-attributable"),
        pytest.param(3, None, id="link-first"),
    ],
)
def test_the_earlier_of_a_node_crash_and_a_link_failure_decides_how_the_group_ends(
    crash_after: float, culprit: str | None
) -> None:
    plan = f"{BROKEN_LINK}\nnodes: {{gpu-node-4: {{fault: crash, exitCode: 137, afterSeconds: {crash_after}}}}}"
    played = play(TRAINING, plan, domains=TWO_DOMAINS)
    first = first_failures(played)
    if culprit is None:
        assert len(first) == len(NODES)
        assert {(item.failure_at, item.script.exit) for item in first} == {(2, Exit(3, "Error"))}
    else:
        assert [(item.node, item.failure_at) for item in first] == [(culprit, crash_after)]
        assert "Connection closed by remote peer gpu-node-4" in played["node-0"].script.log


@pytest.mark.parametrize("fault", ["hang", "stall"])
def test_a_link_failure_outweighs_a_blocked_group(fault: str) -> None:
    plan = f"{BROKEN_LINK}\n{EVERY_FAULT[fault]}"
    assert play(NCCL_ALL_REDUCE, plan, domains=TWO_DOMAINS)["launcher"].script.exit == Exit(3, "Error")
    assert {item.script.exit for item in play(TRAINING, plan, domains=TWO_DOMAINS).values()} == {Exit(3, "Error")}
