"""Play a workload pod from its fault-plan script: the sim kubelet's stand-in for a GPU container.

``tests/sim/workload.py`` decides what the pod does (pure); this module carries it out on a
:class:`~tests.sim.pods.PodRunner`: init containers complete at once, the containers run, log lines are
appended to the first container's log as the script emits them, waits honour deletion and
``activeDeadlineSeconds``, and node effects go through the kubelet. The script is computed once every
pod of the pod's own Job is bound, so it knows which nodes its group really runs on.

Checkpoints go through the kubelet's :class:`~tests.sim.checkpoints.CheckpointStore`: a checkpointing
training pod whose checkpoint directory is on a claim it mounts resumes from the claim's latest checkpoint
there, and its saves are recorded there; a pod whose directory is anywhere else starts from scratch and its
saves are printed but lost with it (``checkpoint_location`` decides, from the pod alone).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.sim import podspec
from tests.sim.checkpoints import CheckpointStore, checkpoint_location
from tests.sim.faults import DOMAIN_LABEL, FaultPlan, load_fault_plan
from tests.sim.pods import PodRunner, now_rfc3339
from tests.sim.workload import Exit, Log, MarkNode, Ready, RunForever, SaveCheckpoint, Wait, script_for

JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LAUNCHER = "launcher"
PEER_WAIT_SECONDS = 30.0
PEER_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class BoundPod:
    """A pod of a JobSet bound to a node: where it runs and its labels (its Job, its replicated job)."""

    node: str
    labels: Mapping[str, str]


class Kubelet(Protocol):
    def mark(self, node: str, namespace: str, change: Mapping[str, Any]) -> None: ...

    def bound_pods(self, namespace: str, jobset: str) -> list[BoundPod]: ...

    def next_attempt(self, namespace: str, node: str) -> int: ...

    def attempts_so_far(self, namespace: str, node: str) -> int: ...


def group_nodes(core: k8s.CoreV1Api, pod: dict[str, Any], kubelet: Kubelet) -> list[str]:
    """The nodes of the pod's group: where the JobSet's ranks (every pod but an MPI launcher) are bound.

    Waits, bounded, until every pod it depends on is bound, so ranks started a moment apart agree: a rank
    waits for its own Job's pods; the MPI launcher, which the real one gates on reaching every worker's sshd,
    waits for the pods of every rank Job of its JobSet. The bound pods come from the kubelet's pod watch
    (`bound_pods`): listed from the API server by every waiting rank twice a second, as they were, 4,096 ranks
    starting at once kept the API server busier than the workloads they played.
    """
    labels = pod["metadata"].get("labels", {})
    jobset, job = labels.get(JOBSET_LABEL), labels.get(JOB_NAME_LABEL)
    namespace = pod["metadata"]["namespace"]
    if not jobset:
        return [pod["spec"]["nodeName"]]
    launcher = labels.get(REPLICATED_JOB_LABEL) == LAUNCHER
    batch = k8s.BatchV1Api(core.api_client)
    expected = _rank_pods(batch, namespace, jobset) if launcher else _parallelism(batch, namespace, job) if job else 1
    deadline = time.monotonic() + PEER_WAIT_SECONDS
    while True:
        pods = kubelet.bound_pods(namespace, jobset)
        ranks = [p.node for p in pods if p.labels.get(REPLICATED_JOB_LABEL) != LAUNCHER]
        mine = [p for p in pods if p.labels.get(JOB_NAME_LABEL) == job]
        awaited = ranks if launcher else mine
        if len(awaited) >= expected or time.monotonic() > deadline:
            return sorted(set(ranks)) or [pod["spec"]["nodeName"]]
        time.sleep(PEER_POLL_SECONDS)


def _rank_pods(batch: k8s.BatchV1Api, namespace: str, jobset: str) -> int:
    """How many rank pods the JobSet runs: the summed parallelism of its Jobs other than the launcher."""
    try:
        jobs = batch.list_namespaced_job(namespace, label_selector=f"{JOBSET_LABEL}={jobset}").items
    except ApiException:
        return 1
    ranks = [job for job in jobs if (job.metadata.labels or {}).get(REPLICATED_JOB_LABEL) != LAUNCHER]
    return sum(int(job.spec.parallelism or 1) for job in ranks) or 1


def node_domains(core: k8s.CoreV1Api, nodes: Iterable[str]) -> dict[str, str]:
    """The NVLink domain (`DOMAIN_LABEL`) of each of `nodes` that has one, which the plan's links are matched
    against. One read per node rather than a list of all nodes: a group has at most a few dozen nodes, the
    simulated cluster may have thousands. A node that is gone or unlabelled is in no domain."""
    found = {}
    for name in sorted(set(nodes)):
        try:
            node = core.read_node(name)
        except ApiException:
            continue
        domain = ((node.metadata.labels if node.metadata else None) or {}).get(DOMAIN_LABEL)
        if domain:
            found[name] = str(domain)
    return found


def _parallelism(batch: k8s.BatchV1Api, namespace: str, job: str) -> int:
    try:
        found = batch.read_namespaced_job(job, namespace)
    except ApiException:
        return 1
    return int(found.spec.parallelism or 1)


def play_workload(runner: PodRunner, *, plan_text: str, kubelet: Kubelet, checkpoints: CheckpointStore) -> None:
    plan = load_fault_plan(plan_text) if plan_text.strip() else FaultPlan()
    runner.logs_refused = not plan.defaults.logs_readable
    now = now_rfc3339()
    for run in runner.init_containers:
        run.started_at = now
        run.state = podspec.terminated(0, started_at=now, finished_at=now)
    peers = group_nodes(runner.core, runner.pod, kubelet)
    if runner.pod["metadata"].get("labels", {}).get(REPLICATED_JOB_LABEL) == LAUNCHER:
        # The launcher starts after its ranks: their attempt (already counted) is the one it plays out.
        attempt = max((kubelet.attempts_so_far(runner.namespace, node) for node in peers), default=1) - 1
    else:
        attempt = kubelet.next_attempt(runner.namespace, runner.node)
    # Domains matter only to link faults; without any, spare the API server the reads.
    domains = node_domains(runner.core, [*peers, runner.node]) if plan.links else {}
    location = checkpoint_location(runner.pod)
    resume_from = checkpoints.latest(location) if location is not None else None
    script = script_for(
        runner.pod, peers=peers, plan=plan, attempt=max(attempt, 0), domains=domains, resume_from=resume_from
    )
    for run in runner.containers:
        run.started_at = now_rfc3339()
        run.state = podspec.running(run.started_at)
        run.ready = True
    runner.phase = "Running"
    runner.publish()
    log_path = runner.containers[0].log_path
    for step in script.steps:
        if runner.stopping.is_set() or runner.deadline_exceeded():
            break
        if isinstance(step, Log):
            with log_path.open("a", encoding="utf-8") as handle:
                handle.write(step.text if step.text.endswith("\n") else step.text + "\n")
        elif isinstance(step, Wait):
            _sleep(runner, step.seconds)
        elif isinstance(step, Ready):
            runner.publish()
        elif isinstance(step, MarkNode):
            kubelet.mark(step.node, runner.namespace, step.change)
        elif isinstance(step, SaveCheckpoint):
            if location is not None:
                checkpoints.record(location, step.iteration)
        elif isinstance(step, RunForever):
            _sleep(runner, float("inf"))
        elif isinstance(step, Exit):
            _terminate_all(runner, step.code, step.reason)
            runner.finish()
            return
    _terminate_all(runner, 143 if runner.stopping.is_set() else 137)
    runner.finish()


def _sleep(runner: PodRunner, seconds: float) -> None:
    """Sleep, waking for deletion or the pod's deadline."""
    end = time.monotonic() + seconds
    while not runner.stopping.is_set() and not runner.deadline_exceeded():
        left = end - time.monotonic()
        if left <= 0:
            return
        runner.stopping.wait(min(left, 0.5))


def _terminate_all(runner: PodRunner, code: int, reason: str = "") -> None:
    finished = now_rfc3339()
    for run in runner.containers:
        if not run.finished:
            started = run.started_at or finished
            run.state = podspec.terminated(code, started_at=started, finished_at=finished, reason=reason)
            run.ready = False
