"""Orchestration overhead (issue 15, item 2): how far a certification's wall time is from its ideal critical
path on the simulated GPU cluster, and where the difference goes; figures printed and written to JSON, never
asserted.

Run from the repository root as (`make bench-overhead OVERHEAD_ARGS=...` passes the options)

    .venv/bin/python -m tests.bench.bench_overhead [--sizes 16] [--duration 60] [--runs dcgm-mc0,nccl-full]
        [--control] [--out build/overhead.json]

For each size it starts one simulated cluster (GPU nodes in NVLink cliques of 8) and runs, each in a namespace
of its own, a Certification without faults and with one category (the fault plan's `durationSeconds` is
`--duration`, `timeoutPerJob` five times that and at least 300 s, so no job nears it):

    dcgm-mc0         diagnostics/dcgm-level1     one node per group, maxConcurrent 0 (all groups at once)
    dcgm-mc8         diagnostics/dcgm-level1     one node per group, maxConcurrent 8
    dcgm-mc512       diagnostics/dcgm-level1     one node per group, maxConcurrent 512 (for 4,096 nodes)
    nccl-full        communication/nccl-all-reduce  full-scale: one group of every node
    nccl-pairs-mc0   communication/nccl-all-reduce  nodesPerJob 2, maxConcurrent 0
    nccl-pairs-mc8   communication/nccl-all-reduce  nodesPerJob 2, maxConcurrent 8
    *-pods           the same, compiled with `--pod-per-group`: a step pod per group, not one shared runner

The ideal critical path of a category is `waves x duration` (`tests/bench/overhead.py`); the overhead is the
category Workflow's wall time (its `status.startedAt` -> `finishedAt`) minus the ideal, and the ratio
wall / ideal - 1. The certification Workflow's wall time (which adds creating the category Workflow, the
certification step's 5 s polling of it and the verdict) is printed next to it. The breakdown comes from the
category Workflow's `status.nodes` (Argo's per-pod start and finish, to the second): lead-in, plan step,
the gaps between steps (Argo's reconciliation), the run waves' time beyond the workload duration, the record
and cleanup steps. While a run goes, a recorder watches the namespace's TrainJobs and JobSet pods and Argo's
step pods and keeps each one's last state (cleanup deletes the first, pod GC the others), which splits a
run-group pod's time into pod start-up, step start-up, TrainJob start-up, the workload, completion, "seen
late" (the step's 10 s polling) and Argo's notice of the pod's end (`tests/bench/overhead.py` says which
timestamps bound each).

The orchestration's footprint (issue 15, item 3; `tests/bench/footprint.py`): the step pods of both Workflows
(how many, how many at once at the peak, and the peak of their summed CPU and memory requests, init and wait
containers included), and the API requests of the namespace's service accounts (the step pods and, when it
runs there, the watcher) over the certification Workflow's wall time, counted in the API server's audit log,
which the benchmark's cluster writes for service accounts only. And the sizes of the objects a run leaves
(issue 15, item 4): per kind (Workflow, ConfigMap, TrainJob as last seen), how many and the largest.
And where the machine's CPU went from submission to the run's end (`tests/bench/cpu_use.py`): how busy its
cores were (over the run and in its busiest minute) and each simulated-cluster component's share, which tells
a wave held up by a controller from one held up by a machine with no core left.

With `--control`, each one-wave run (`maxConcurrent: 0`) is followed by its control wave
(`tests/bench/bare_wave.py`): the run's TrainJobs created again, straight from the benchmark, in the run's
namespace once its workload pods are gone. That wave's time beyond the workload is what the cluster alone takes
to start and end those TrainJobs; the category's overhead beyond it is what Argo and nvcre-argo add.

Measured on 2 shared cores, 16 GPU nodes, `--duration 60` (the five runs took 15 minutes after a 29 s cluster
start): the category Workflow took 54-90 s more than its ideal (ratio 75-107 %), the certification Workflow
another 33-36 s (creating the category Workflow, its 5 s polling of it, the verdict step). Of a category's
overhead, 32-39 s is fixed per category (plan 2-4 s, record 3-4 s, cleanup 2-4 s, Argo's gaps between steps
1-8 s each, 6-8 s after cleanup), and the rest is per wave: a wave lasted 15 s longer than its workload with
one run-group pod (nccl-full: 2 s from the pod's start to its TrainJob, 1 s TrainJob start-up, 1 s completion,
10 s from `Complete` to the pod's end, the step polling every 10 s), 22-23 s with 8 step pods starting at once
and 32 s with 16 (pod start to TrainJob grows to 9 and 17 s: here every step pod is a local process sharing two
cores), plus 8 s between two waves. At 64 GPU nodes (24 s cluster start; nccl-full, nccl-pairs-mc8 and dcgm-mc8
only, 20 minutes): nccl-full 54 s (90 %) again; 32 pairs by 8, 4 waves, 153 s (64 %); 64 per-node groups by 8,
8 waves, 276 s (57 %): 23 s per wave beyond the workload and 8 s between waves, the same as at 16 nodes. There
a run-group pod's time split into 2 s pod start-up, 7-8 s step start-up, 1 s TrainJob start-up, 1 s
completion, 10 s seen late (the 10 s poll and the step's own finish) and under 1 s for Argo to notice its end.

Those figures were taken with a step pod per group (what `--pod-per-group` still compiles; the `*-pods`
runs). By default one `run-groups` pod runs every group, so the simulator no longer runs a step process per
group, and the exit steps run only when their Workflow did not succeed. Measured so, 16 nodes (`--runs
dcgm-mc0,dcgm-mc0-pods,nccl-full`, 8 minutes): dcgm-mc0 37 s over the ideal (62 %; 14 s of wave excess), the
same with a pod per group 58 s (97 %; 36 s), nccl-full 36 s (60 %: plan 4 s, Argo's gaps around the runner 6 s
each, the wave's excess 10 s, record 4 s, 6 s to end the Workflow); 5 step pods, 2 at once, against 20 and 17
with a pod per group. 256 nodes, dcgm-mc0 (7 minutes with a 23 s cluster start): 239-243 s over the ideal
(about 400 %), 199-201 s of it the one wave's excess, with the same 5 pods and 2 at once. Per group (mean /
max): 18.7 / 37 s from Argo creating its node to its TrainJob, 8.4 / 19 s to the workload running, 60 s of
workload, 4.2 / 9 s to `Complete` and 1.1 / 6 s until the runner completed its node (35 / 59 s while it
completed each node with a request of its own). Those parts add up to about 130 s at most, not the 259 s the
wave lasted: a third run (237 s) printed that Argo created the 256 group nodes 0 to 188 s after the runner's
pod started (the last completed at 253 s), so most of the wave is Argo creating the nodes, not the groups.

With a step pod per group the simulator runs every step pod and its executor as a local process; on 2 cores
it falls behind with 64 groups at once (node leases expire; see `tests/bench/scorecard.py`). With the shared
runner, 256 and 1,024 per-node groups run at once: `--sizes 1024 --runs dcgm-mc0 --duration 300` (the issue's
5-minute jobs) completes in about 15 minutes; its figures, and why its overhead stays far above 10 %, are in the
README's "How well it works".

Exit code: 0 when every run completed (whatever the figures), 1 when one could not (it is in the JSON with its
error). The cluster takes the machine's simulated-cluster lock, so it may wait for other users of it; SIGTERM
stops the cluster like Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Self

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import PODS, TRAINJOBS
from nvcre_argo.names import JOBSET_NAME_LABEL, LABEL_GROUP, LABEL_ROLE, ROLE_CATEGORY
from nvcre_argo.plan.grouping import OVERFLOW_SUFFIX
from tests.bench import bare_wave, cpu_use, footprint, overhead, probes
from tests.harness.namespaces import namespace_for_test
from tests.harness.versions import REPO_ROOT
from tests.sim import scenario
from tests.sim.cluster import SimCluster, gpu_nodes

PER_CLIQUE: Final = 8
DEFAULT_SIZES: Final = (16,)
DEFAULT_DURATION_S: Final = 60
ARGO_WORKFLOW_LABEL: Final = "workflows.argoproj.io/workflow"  # on every Argo step pod
LOCK_STEP: Final = "the machine's simulated-cluster lock"  # SimCluster.timings' name for the wait
NAMESPACE_GONE_TIMEOUT_S: Final = 300.0


@dataclass(frozen=True)
class RunSpec:
    """One Certification of one category: its name in the tables, the category and its `maxConcurrent`."""

    name: str
    domain: str
    variant: str
    options: Mapping[str, Any]
    max_concurrent: int
    pod_per_group: bool = False  # compiled with `--pod-per-group`, not the default shared runner

    def compile_options(self) -> list[str]:
        return ["--pod-per-group"] if self.pod_per_group else []


RUNS: Final = (
    RunSpec("dcgm-mc0", "diagnostics", "dcgm-level1", {}, 0),
    RunSpec("dcgm-mc8", "diagnostics", "dcgm-level1", {}, 8),
    RunSpec("dcgm-mc512", "diagnostics", "dcgm-level1", {}, 512),
    RunSpec("nccl-full", "communication", "nccl-all-reduce", {"testScale": "full-scale"}, 0),
    RunSpec("nccl-pairs-mc0", "communication", "nccl-all-reduce", {"nodesPerJob": 2}, 0),
    RunSpec("nccl-pairs-mc8", "communication", "nccl-all-reduce", {"nodesPerJob": 2}, 8),
    RunSpec("dcgm-mc0-pods", "diagnostics", "dcgm-level1", {}, 0, pod_per_group=True),
    RunSpec("dcgm-mc8-pods", "diagnostics", "dcgm-level1", {}, 8, pod_per_group=True),
    RunSpec("nccl-pairs-mc8-pods", "communication", "nccl-all-reduce", {"nodesPerJob": 2}, 8, pod_per_group=True),
)


def timeout_per_job(duration: float) -> str:
    """Well above the workload's duration, so no job is ever near its timeout."""
    return f"{max(300, int(5 * duration))}s"


def certification(namespace: str, spec: RunSpec, duration: float) -> dict[str, Any]:
    options: dict[str, Any] = {**spec.options, "timeoutPerJob": timeout_per_job(duration)}
    if spec.max_concurrent:
        options["maxConcurrent"] = spec.max_concurrent
    category = {"domain": spec.domain, "variant": spec.variant, "options": options}
    return scenario.example_certification(namespace, categories=[category])


def fault_plan(duration: float) -> str:
    """No fault: every workload succeeds after `duration` seconds."""
    return yaml.safe_dump({"defaults": {"durationSeconds": duration, "busBandwidthGBps": 380}}, sort_keys=False)


# ------------------------------------------------------------------------------------------- measuring


class Recorder:
    """Keeps the last state of every TrainJob, JobSet pod and Argo step pod of a namespace, each kind seen by a
    list + watch of its own (`probes.LastSeen`): the run step's cleanup deletes the first two before the run can
    be read back, pod GC the step pods. (Listing them every 2 s instead, as this did, cost more than the run
    itself at 4,096 nodes: 536 TrainJobs were already 1.5 MB and took 1.9 s to list.)"""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.trainjobs = probes.LastSeen(api, TRAINJOBS, namespace, what="TrainJobs")
        self.pods = probes.LastSeen(api, PODS, namespace, label_selector=JOBSET_NAME_LABEL, what="workload pods")
        self.step_pods = probes.LastSeen(api, PODS, namespace, label_selector=ARGO_WORKFLOW_LABEL, what="step pods")
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Self:
        for kept in (self.trainjobs, self.pods, self.step_pods):
            self._stack.enter_context(kept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def workloads(self) -> dict[str, overhead.WorkloadTimes]:
        """Per group, its TrainJob's times (the pods are the TrainJob's JobSet's, named after it)."""
        pods_of = overhead.pods_by_jobset(self.pods.values())
        return {
            overhead.group_of(trainjob): overhead.workload_times(trainjob, pods_of.get(name, []))
            for name, trainjob in self.trainjobs.objects.items()
        }

    def mains(self) -> dict[str, overhead.MainTimes]:
        """Per Argo node name, its step pod's `main` container times."""
        return dict(overhead.main_times(pod) for pod in self.step_pods.values())


@dataclass
class RunRecord:
    """One run's figures (seconds); `breakdown` and `phases` as `tests/bench/overhead.py` computes them."""

    name: str
    size: int
    domain: str
    variant: str
    max_concurrent: int
    duration: float
    namespace: str = ""
    phase: str = ""
    category_workflow: str = ""
    certification_wall: float | None = None
    breakdown: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, Any] = field(default_factory=dict)
    group_nodes: dict[str, Any] = field(default_factory=dict)  # a shared runner's `overhead.GroupNodeTimes`
    footprint: dict[str, Any] = field(default_factory=dict)
    api_requests: dict[str, int] = field(default_factory=dict)  # per service account, over the certification
    api_requests_per_minute: float | None = None
    largest_objects: list[dict[str, Any]] = field(default_factory=list)  # `footprint.LargestObject`s
    step_memory_mib: dict[str, float] = field(default_factory=dict)  # per step command, its peak RSS
    cpu: dict[str, Any] = field(default_factory=dict)  # `cpu_use.CpuUse` from submission to the run's end
    control: dict[str, Any] = field(default_factory=dict)  # `bare_wave.BareWave`, with `--control`
    control_cpu: dict[str, Any] = field(default_factory=dict)  # `cpu_use.CpuUse` over the control wave
    trainjobs_seen: int = 0
    seconds: float = 0.0
    error: str = ""


def _group_node_line(run: RunRecord) -> str:
    """A shared runner's wave on its pod's clock: Argo's creation of the group nodes, the last completion."""
    times = run.group_nodes
    return (
        f"{run.name}: Argo created its {times['nodes']} group nodes {_num(times['first_created'])}"
        f" to {_num(times['last_created'])} s after the run-groups pod started; the last was completed at"
        f" {_num(times['last_completed'])} s, the pod ended at {_num(times['runner_ended'])} s"
    )


def play(
    sim: SimCluster, api: k8s.ApiClient, spec: RunSpec, *, size: int, duration: float, control: bool = False
) -> RunRecord:
    """One run in a namespace of its own, then (`control`, one-wave runs only) its control wave there; errors
    end up in the record."""
    record = RunRecord(spec.name, size, spec.domain, spec.variant, spec.max_concurrent, duration)
    began = time.monotonic()
    namespace = ""
    try:
        with namespace_for_test(api, f"overhead-{spec.name}") as namespace:
            record.namespace = namespace
            trainjobs = _execute(sim, api, spec, namespace, record)
            if control and spec.max_concurrent == 0 and record.phase == "Succeeded":
                progress(f"{size} nodes: {spec.name}: its control wave ...")
                _play_control(sim, api, namespace, record, trainjobs)
    except (scenario.ScenarioError, ApiException, RuntimeError, OSError) as error:
        record.error = f"{type(error).__name__}: {str(error)[:2000]}"
    record.seconds = time.monotonic() - began
    if namespace:
        _wait_namespace_gone(api, namespace)
    return record


def _execute(
    sim: SimCluster, api: k8s.ApiClient, spec: RunSpec, namespace: str, record: RunRecord
) -> list[dict[str, Any]]:
    """Play the run and fill `record`; the run's TrainJobs as last seen."""
    scenario.install(sim.kubeconfig, namespace, submit=False)
    scenario.write_fault_plan(api, namespace, fault_plan(record.duration))
    document = certification(namespace, spec, record.duration)
    scenario.apply_certification(api, document)
    workflow = scenario.compile_workflow(sim.kubeconfig, document, options=spec.compile_options())
    with Recorder(api, namespace) as recorder, probes.StepMemory() as memory, probes.CpuSampler(sim) as cpu:
        parent = scenario.submit(api, workflow)
        record.phase = scenario.wait_workflow_done(api, namespace, parent, timeout_s=run_timeout_s(size=record.size))
    record.step_memory_mib = dict(sorted(memory.peaks_mib.items()))
    use = cpu_use.cpu_use(cpu.snapshots, cores=os.cpu_count() or 1)
    record.cpu = asdict(use) if use is not None else {}
    parent_workflow = overhead.with_plain_nodes(scenario.get_workflow(api, namespace, parent))
    record.certification_wall = overhead.seconds_between(*_bounds(parent_workflow))
    children = scenario.workflows(api, namespace, f"{LABEL_ROLE}={ROLE_CATEGORY}")
    if len(children) != 1:
        raise RuntimeError(f"expected one category Workflow, found {len(children)}")
    child = overhead.with_plain_nodes(children[0])
    record.category_workflow = child["metadata"]["name"]
    status = child.get("status") or {}
    if not status.get("finishedAt"):
        raise RuntimeError(f"category Workflow {record.category_workflow} did not finish")
    groups = {(item["metadata"].get("labels") or {}).get(LABEL_GROUP, "") for item in recorder.trainjobs.values()}
    overflow = sum(1 for group in groups if group.endswith(OVERFLOW_SUFFIX))
    result = overhead.breakdown(status, duration=record.duration, max_concurrent=spec.max_concurrent, overflow=overflow)
    record.breakdown = asdict(result)
    workloads = recorder.workloads()
    record.trainjobs_seen = len(workloads)
    phases = (
        overhead.shared_phases(status, workloads)
        if not spec.pod_per_group
        else overhead.run_phases(overhead.pod_spans(status), workloads, recorder.mains())
    )
    record.phases = asdict(phases)
    node_times = overhead.group_node_times(status)
    record.group_nodes = asdict(node_times) if node_times is not None else {}
    _measure_footprint(sim, record, parent=parent_workflow, child=child, recorder=recorder)
    largest = probes.largest_objects(api, namespace, recorder.trainjobs.values())
    record.largest_objects = [asdict(item) for item in largest]
    return recorder.trainjobs.values()


def _play_control(
    sim: SimCluster, api: k8s.ApiClient, namespace: str, record: RunRecord, trainjobs: list[dict[str, Any]]
) -> None:
    """The run's `trainjobs` again without Argo or nvcre-argo (`tests/bench/bare_wave.py`), with the CPU it
    took."""
    with probes.CpuSampler(sim) as cpu:
        try:
            wave = bare_wave.play(
                api, namespace, trainjobs, duration=record.duration, timeout_s=run_timeout_s(size=record.size)
            )
        except ApiError as error:
            wave = bare_wave.BareWave.unmeasured(len(trainjobs), f"ApiError: {str(error)[:2000]}")
    record.control = asdict(wave)
    use = cpu_use.cpu_use(cpu.snapshots, cores=os.cpu_count() or 1)
    record.control_cpu = asdict(use) if use is not None else {}


def _measure_footprint(
    sim: SimCluster,
    record: RunRecord,
    *,
    parent: Mapping[str, Any] | None,
    child: Mapping[str, Any],
    recorder: Recorder,
) -> None:
    """The run's step pods at their peak (both Workflows) and its service accounts' API requests over the
    certification Workflow's wall time, from the API server's audit log."""
    spans = [*overhead.pod_spans((parent or {}).get("status") or {}), *overhead.pod_spans(child["status"])]
    record.footprint = asdict(footprint.footprint(spans, footprint.requests_by_node(recorder.step_pods.values())))
    start, end = _bounds(parent)
    audit_log = sim.plane.audit_log
    if audit_log is None or not start or not end:
        return
    began, ended = overhead.parse_time(start), overhead.parse_time(end)
    with audit_log.open(encoding="utf-8") as lines:
        events = (json.loads(line) for line in lines if record.namespace in line)
        record.api_requests = footprint.api_requests(events, record.namespace, began, ended)
    record.api_requests_per_minute = footprint.per_minute(sum(record.api_requests.values()), began, ended)


def _bounds(workflow: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    status = (workflow or {}).get("status") or {}
    return status.get("startedAt"), status.get("finishedAt")


def run_timeout_s(*, size: int) -> float:
    """How long one run may take before it counts as one that could not complete: every group in a wave of its
    own at the longest timeoutPerJob, plus a margin for a loaded machine."""
    return 900.0 + 20.0 * size


def _wait_namespace_gone(api: k8s.ApiClient, namespace: str) -> None:
    """Let the last run's namespace go before the next run starts, so its teardown does not load the next
    run's measurement; a namespace that lingers is reported and left."""
    core = k8s.CoreV1Api(api)
    deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            core.read_namespace(namespace)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        time.sleep(2)
    progress(f"namespace {namespace} still terminating after {NAMESPACE_GONE_TIMEOUT_S:.0f} s; going on")


@dataclass
class SizeRecord:
    size: int
    duration: float
    lock_wait_seconds: float = 0.0
    cluster_start_seconds: float = 0.0
    runs: list[RunRecord] = field(default_factory=list)
    error: str = ""


def run_size(
    size: int,
    specs: Sequence[RunSpec],
    *,
    duration: float,
    save: Callable[[SizeRecord], None],
    control: bool = False,
) -> SizeRecord:
    """Start one cluster of `size` GPU nodes and play every run on it (each one-wave run followed by its
    control wave with `control`), saving after each."""
    record = SizeRecord(size=size, duration=duration)
    try:
        with SimCluster(nodes=gpu_nodes(size, per_clique=PER_CLIQUE), audit=True) as sim, sim.api_client() as api:
            record.lock_wait_seconds = sim.timings.get(LOCK_STEP, 0.0)
            record.cluster_start_seconds = sum(sim.timings.values()) - record.lock_wait_seconds
            for spec in specs:
                progress(f"{size} nodes: {spec.name} ...")
                run = play(sim, api, spec, size=size, duration=duration, control=control)
                record.runs.append(run)
                progress(f"{size} nodes: {spec.name}: {run.error or run.phase} in {run.seconds:.0f} s")
                save(record)
    except (scenario.ScenarioError, ApiException, RuntimeError, OSError) as error:
        record.error = f"{type(error).__name__}: {str(error)[:2000]}"
    save(record)
    return record


# ------------------------------------------------------------------------------------------- output


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def report(record: SizeRecord) -> list[str]:
    """The three tables of one size: totals, the category Workflow's breakdown, the run pods' phases."""
    runs = [run for run in record.runs if run.breakdown]
    title = (
        f"== {record.size} GPU nodes, workloads of {record.duration:g} s: {len(runs)} of {len(record.runs)} runs"
        f" measured (cluster start {record.cluster_start_seconds:.0f} s; not counted: waiting"
        f" {record.lock_wait_seconds:.0f} s for the machine's cluster lock)"
        + (f"; ERROR {record.error}" if record.error else "")
        + " =="
    )
    totals = [
        [
            run.name,
            str(run.breakdown["groups"] + run.breakdown["overflow_groups"]),
            str(run.max_concurrent),
            str(run.breakdown["waves"]),
            _num(run.breakdown["ideal"]),
            _num(run.breakdown["wall"]),
            _num(run.certification_wall),
            _num(run.breakdown["overhead"]),
            _ratio(run.breakdown["ratio"]),
            _num(None if run.certification_wall is None else run.certification_wall - run.breakdown["ideal"]),
            _ratio(overhead.overhead_ratio(run.certification_wall or 0.0, run.breakdown["ideal"])),
        ]
        for run in runs
    ]
    header = ["run", "groups", "maxConc", "waves", "ideal s", "wall s", "cert wall s", "overhead s", "ratio"]
    lines = [title, *footprint.table([*header, "cert overhead s", "cert ratio"], totals), ""]
    lines.append("category Workflow overhead by part (s; the parts add up to the overhead):")
    parts = [[run.name, *(_num(run.breakdown["parts"][name]) for name in overhead.PARTS)] for run in runs]
    lines += [*footprint.table(["run", *(name.replace("_", "-") for name in overhead.PARTS)], parts), ""]
    lines.append(
        "a run-group pod's time (s, mean / max over the groups whose TrainJob was seen whole), and its excess"
        " over the workload duration (a shared runner's group has no pod: from its node's creation to its TrainJob"
        " as step-startup, then its TrainJob, then the runner completing its node as seen-late):"
    )
    phases = [
        [
            run.name,
            f"{run.phases['groups_seen']}/{run.breakdown['groups'] + run.breakdown['overflow_groups']}",
            *(
                f"{_num(run.phases['mean'].get(name), 1)} / {_num(run.phases['max'].get(name))}"
                for name in overhead.PHASES
            ),
            f"{_num(run.breakdown['run_pod_excess_mean'], 1)} / {_num(run.breakdown['run_pod_excess_max'])}",
        ]
        for run in runs
    ]
    header = ["run", "seen", *(name.replace("_", "-") for name in overhead.PHASES), "pod excess"]
    lines += footprint.table(header, phases)
    lines += [_group_node_line(run) for run in runs if run.group_nodes]
    lines += [
        "",
        "orchestration footprint (step pods of both Workflows; API requests of the namespace's service"
        " accounts over the certification Workflow):",
    ]
    cost = [
        [
            run.name,
            str(run.footprint.get("pods", "")),
            str(run.footprint.get("peak_pods", "")),
            _num(run.footprint.get("peak", {}).get("cpu"), 2),
            _num(run.footprint.get("peak", {}).get("memory_mib")),
            str(sum(run.api_requests.values())),
            _num(run.api_requests_per_minute, 1),
            ", ".join(f"{account} {count}" for account, count in run.api_requests.items()),
        ]
        for run in runs
    ]
    header = ["run", "step pods", "peak at once", "peak CPU", "peak MiB", "API requests", "per min", "by account"]
    lines += footprint.table(header, cost)
    lines += ["", *footprint.object_size_lines([(run.name, run.largest_objects) for run in runs])]
    lines += ["", "step processes' peak resident memory (MiB, sampled every second) and the plan step's time:"]
    lines += [
        f"{run.name}: "
        + footprint.step_memory_text(run.step_memory_mib)
        + f"; plan step {_num(run.breakdown['parts']['plan'])} s"
        for run in runs
    ]
    lines += ["", "where the machine's CPU went from submission to the end (share of its cores' capacity):"]
    lines += [_cpu_line(run) for run in runs if run.cpu]
    controlled = [run for run in runs if run.control]
    if controlled:
        lines += ["", *_control_lines(controlled)]
    failed = [f"{run.name}: {run.error or run.phase}" for run in record.runs if run.error or run.phase != "Succeeded"]
    return [*lines, *(["", "runs that did not succeed:", *failed] if failed else [])]


def _control_lines(runs: Sequence[RunRecord]) -> list[str]:
    """The control waves next to their runs: what the cluster alone took, and the category's overhead beyond it
    (the orchestration's own share)."""
    lines = [
        "control wave: the run's TrainJobs created again straight from the benchmark, no Argo, no nvcre-argo"
        " (tests/bench/bare_wave.py); its excess is the cluster's own start-up and end of the wave; per TrainJob"
        " mean / max s:"
    ]
    rows = []
    for run in runs:
        wave = run.control
        beyond = None if wave["excess"] is None else run.breakdown["overhead"] - wave["excess"]
        rows.append([
            run.name,
            f"{wave['complete']}/{wave['trainjobs']}",
            _num(wave["creating"]),
            _num(wave["wall"]),
            _num(wave["excess"]),
            *(f"{_num(wave['mean'].get(name), 1)} / {_num(wave['max'].get(name))}" for name in bare_wave.PHASES),
            _num(run.breakdown["overhead"]),
            _num(beyond),
            _ratio(None if beyond is None else beyond / run.breakdown["ideal"]),
        ])  # fmt: skip
    header = [
        "run", "complete", "creating s", "wall s", "excess s", *(name.replace("_", "-") for name in bare_wave.PHASES),
        "category overhead s", "beyond the control s", "ratio beyond",
    ]  # fmt: skip
    lines += footprint.table(header, rows)
    lines += [f"{run.name}: control wave ERROR {run.control['error']}" for run in runs if run.control.get("error")]
    lines += [f"{run.name}: control wave CPU: {_cpu_text(run.control_cpu)}" for run in runs if run.control_cpu]
    return lines


def _cpu_line(run: RunRecord) -> str:
    return f"{run.name}: {_cpu_text(run.cpu)}"


def _cpu_text(use: Mapping[str, Any]) -> str:
    """How busy the cores were over a span and in its busiest minute, per simulated-cluster component."""

    def shares(of: Mapping[str, float]) -> str:
        return ", ".join(f"{name} {_ratio(share)}" for name, share in of.items() if share >= 0.005)

    return (
        f"{use['cores']} cores {_ratio(use['busy_share'])} busy over {use['seconds']:.0f} s"
        f" ({shares(use['component_shares'])}); in the busiest minute, from {use['busiest_minute_starts_s']:.0f} s,"
        f" {_ratio(use['busiest_minute_share'])} ({shares(use['busiest_minute_components'])})"
    )


def progress(message: str) -> None:
    """A line on stderr while the benchmark runs (the figures go to stdout)."""
    print(f"[overhead] {message}", file=sys.stderr, flush=True)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the benchmark like Ctrl-C, so the cluster is stopped: its components run in sessions of
    their own and would outlive a plain exit."""
    del signum, frame
    raise KeyboardInterrupt("SIGTERM")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make bench-overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="GPU node counts (default 16)")
    parser.add_argument(
        "--duration", type=float, default=DEFAULT_DURATION_S, help="workload seconds (default 60; 300 = the goal's)"
    )
    parser.add_argument(
        "--runs", help=f"only these runs, in this order, e.g. nccl-full,dcgm-mc8 (default all: {_run_names()})"
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="after each one-wave run, its TrainJobs again without Argo or nvcre-argo (the cluster's own floor)",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "overhead.json", help="the JSON file")
    args = parser.parse_args(argv)
    sizes = [int(item) for item in args.sizes.split(",") if item.strip()]
    known = {spec.name: spec for spec in RUNS}
    wanted = [name.strip() for name in args.runs.split(",") if name.strip()] if args.runs else list(known)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        parser.error(f"unknown run(s) {', '.join(unknown)}; known: {_run_names()}")
    specs = [known[name] for name in dict.fromkeys(wanted)]  # in the order given
    signal.signal(signal.SIGTERM, _interrupt)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records: list[SizeRecord] = []

    def save(current: SizeRecord) -> None:
        document = {"duration": args.duration, "sizes": [asdict(item) for item in [*records, current]]}
        args.out.write_text(json.dumps(document, indent=1, default=str) + "\n", encoding="utf-8")

    for size in sizes:
        record = run_size(size, specs, duration=args.duration, save=save, control=args.control)
        records.append(record)
        print("\n".join(["", *report(record)]), flush=True)
    print(f"\nwritten to {args.out}")
    incomplete = [f"{r.size}/{run.name}" for r in records for run in r.runs if run.error or not run.breakdown]
    incomplete += [f"{r.size}/({r.error[:80]})" for r in records if r.error]
    if incomplete or any(len(r.runs) < len(specs) for r in records):
        print(f"runs that could not complete: {', '.join(incomplete) or '(not started)'}", file=sys.stderr)
        return 1
    return 0


def _run_names() -> str:
    return ",".join(spec.name for spec in RUNS)


if __name__ == "__main__":
    sys.exit(main())
