"""The control wave of the overhead benchmark: a category's TrainJobs created again straight from the benchmark,
without Argo or nvcre-argo, on the same simulated cluster, to measure what the cluster itself takes to start and
end them.

Why: the overhead of a one-wave category is Argo's and nvcre-argo's time plus the cluster's own start-up of the
wave's TrainJobs (the Trainer's reconciler, JobSet, the Job controller, the scheduler, the kubelets). The second
part is there for any tool that submits the same TrainJobs; on a small simulated control plane it can be most of
the overhead. Playing the same wave with nothing in between gives the cluster's floor, and the category's
overhead beyond that floor is what orchestrating costs.

The copies are the run's TrainJobs as last seen (same spec, runtime, nodes and labels but the group's, so that
no step takes them for its own), named `bare-NNNNN`, created from `CREATORS` threads at once (as the shared
runner creates its groups' TrainJobs, each from its own thread), in the run's namespace once its workload pods
are gone, and with the token of the runner's own service account: the benchmark's administrator is exempt
from the API server's priority and fairness queues, which the runner's requests wait in on a loaded server.
Times come from the objects themselves: the TrainJobs' `creationTimestamp` and `Complete` condition, the pods'
container states (`overhead.workload_times`), each to the second.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kubernetes import client as k8s

from nvcre_argo.contract import WORKFLOW_SERVICE_ACCOUNT
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import PODS, TRAINJOBS
from nvcre_argo.names import JOBSET_NAME_LABEL, LABEL_GROUP
from tests.bench import overhead, probes

BARE_LABEL: Final = "bench.nvcre.nvidia.com/control-wave"
NAME_PREFIX: Final = "bare-"
CREATORS: Final = 16
POLL_S: Final = 2.0
TOKEN_SECONDS: Final = 3600
PHASES: Final = ("to_running", "workload", "completion")
"""Per TrainJob: created -> its workload running -> the workload exited -> the TrainJob `Complete`."""


@dataclass(frozen=True)
class BareWave:
    """The control wave's figures (seconds); `wall` from the first TrainJob's creation to the last `Complete`,
    `excess` the part of it beyond the workload's duration."""

    trainjobs: int
    complete: int
    creating: float  # the benchmark's first create request to its last one returning (its own clock)
    wall: float | None
    excess: float | None
    mean: dict[str, float] = field(default_factory=dict)
    max: dict[str, float] = field(default_factory=dict)
    error: str = ""

    @classmethod
    def unmeasured(cls, trainjobs: int, error: str) -> BareWave:
        """A wave that could not be timed (nothing to copy, the run's pods never left, the API refused it):
        how many TrainJobs it had, and why."""
        return cls(trainjobs=trainjobs, complete=0, creating=0.0, wall=None, excess=None, error=error)


def bare_manifests(trainjobs: Iterable[Mapping[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """Copies of `trainjobs` (as a run left them) to create again: the spec as it was, the labels but the
    group's, a control-wave label, no owner, in name order."""
    ordered = sorted(trainjobs, key=lambda item: str(item["metadata"]["name"]))
    copies = []
    for index, trainjob in enumerate(ordered):
        labels = {k: v for k, v in (trainjob["metadata"].get("labels") or {}).items() if k != LABEL_GROUP}
        copies.append({
            "apiVersion": trainjob["apiVersion"],
            "kind": trainjob["kind"],
            "metadata": {
                "name": f"{NAME_PREFIX}{index:05d}",
                "namespace": namespace,
                "labels": {**labels, BARE_LABEL: "true"},
            },
            "spec": trainjob["spec"],
        })  # fmt: skip
    return copies


def summarize(times: Sequence[overhead.WorkloadTimes], *, duration: float, creating: float) -> BareWave:
    """The wave's figures from each TrainJob's times (`overhead.workload_times`); phases over those seen whole."""
    created = [t.created for t in times if t.created is not None]
    complete = [t.complete for t in times if t.complete is not None]
    wall = (max(complete) - min(created)).total_seconds() if created and len(complete) == len(times) else None
    rows = [
        {
            "to_running": (t.running - t.created).total_seconds(),
            "workload": (t.exited - t.running).total_seconds(),
            "completion": (t.complete - t.exited).total_seconds(),
        }
        for t in times
        if t.created is not None and t.running is not None and t.exited is not None and t.complete is not None
    ]
    return BareWave(
        trainjobs=len(times),
        complete=len(complete),
        creating=creating,
        wall=wall,
        excess=None if wall is None else wall - duration,
        mean={name: statistics.mean(row[name] for row in rows) for name in PHASES} if rows else {},
        max={name: max(row[name] for row in rows) for name in PHASES} if rows else {},
    )


def as_service_account(api: k8s.ApiClient, namespace: str, account: str) -> k8s.ApiClient:
    """A client like `api` that authenticates as the service account `namespace/account`, with a token the API
    server issues for it (close it when done)."""
    answer = k8s.CoreV1Api(api).create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": TOKEN_SECONDS}}
    )
    configuration = copy.deepcopy(api.configuration)
    configuration.api_key = {"authorization": f"Bearer {answer.status.token}"}
    configuration.api_key_prefix = {}
    configuration.connection_pool_maxsize = CREATORS
    return k8s.ApiClient(configuration)


def play(
    api: k8s.ApiClient, namespace: str, recorded: Iterable[Mapping[str, Any]], *, duration: float, timeout_s: float
) -> BareWave:
    """Wait for the run's workload pods to go, create the copies of `recorded` at once as the runner's service
    account, wait for every copy to end, and measure the wave; a wave that did not end in `timeout_s` is measured
    as far as it got."""
    kube = KubeClient(api)
    manifests = bare_manifests(recorded, namespace)
    if not manifests:
        return BareWave.unmeasured(0, "no TrainJob to copy")
    waited = _wait_pods_gone(kube, namespace, timeout_s=timeout_s)
    if waited:
        return BareWave.unmeasured(len(manifests), waited)
    trainjobs = probes.LastSeen(api, TRAINJOBS, namespace, label_selector=BARE_LABEL, what="control TrainJobs")
    pods = probes.LastSeen(api, PODS, namespace, label_selector=JOBSET_NAME_LABEL, what="control pods")
    with trainjobs, pods, as_service_account(api, namespace, WORKFLOW_SERVICE_ACCOUNT) as runner_account:
        creator = KubeClient(runner_account)
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=CREATORS, thread_name_prefix="control-create") as pool:
            list(pool.map(creator.create, manifests))
        creating = time.monotonic() - began
        deadline = began + timeout_s
        while time.monotonic() < deadline and _ended(trainjobs.values()) < len(manifests):
            time.sleep(POLL_S)
        pods_of = overhead.pods_by_jobset(pods.values())
        times = [overhead.workload_times(item, pods_of.get(name, [])) for name, item in trainjobs.objects.items()]
    wave = summarize(times, duration=duration, creating=creating)
    if wave.complete < len(manifests):
        return replace(wave, error=f"{wave.complete} of {len(manifests)} TrainJobs Complete")
    return wave


def _ended(trainjobs: Iterable[Mapping[str, Any]]) -> int:
    """How many of `trainjobs` carry a true `Complete` or `Failed` condition."""
    return sum(
        1
        for item in trainjobs
        if any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in (item.get("status") or {}).get("conditions") or []
        )
    )


def _wait_pods_gone(kube: KubeClient, namespace: str, *, timeout_s: float) -> str:
    """Wait until the namespace holds no running or pending workload pod (the category's are done); '' or why
    not."""
    deadline = time.monotonic() + timeout_s
    busy = 0
    while time.monotonic() < deadline:
        pods, _ = kube.list(PODS, namespace, label_selector=JOBSET_NAME_LABEL)
        busy = sum(1 for pod in pods if (pod.get("status") or {}).get("phase") in ("Pending", "Running"))
        if not busy:
            return ""
        time.sleep(POLL_S)
    return f"{busy} workload pod(s) of the category still pending or running after {timeout_s:.0f} s"
