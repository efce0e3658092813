"""Builders for the step tests: Nodes, a Workflow to own things, TrainJob and Pod status as the kubelet and the
Trainer controller would write it, and a clock the test drives.

No kubelet and no controllers run against the test control plane, so the tests play them: they create Node
and Pod objects and write `status` through the status subresource, exactly the requests those components make.
Nodes are cluster-scoped while every test has its own namespace, so each test's nodes carry the label
`SELECTOR_LABEL=<namespace>` and its Certification targets exactly that: no test ever plans another's nodes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import NODES, PODS, TRAINJOBS, WORKFLOWS
from nvcre_argo.loading import load_certifications
from nvcre_argo.resolve.category import ResolvedCategory, resolve_certification
from nvcre_argo.steps.context import StepContext

SELECTOR_LABEL = "steps.nvcre.test/namespace"
GPU_PRODUCT = "nvidia.com/gpu.product"
CLIQUE = "nvidia.com/gpu.clique"
H100 = "NVIDIA-H100-80GB-HBM3"
B200 = "NVIDIA-B200"
GB200 = "NVIDIA-GB200"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
CERTIFICATION = "fleet-cert"


def node_manifest(
    name: str,
    *,
    selector: str,
    product: str | None = H100,
    gpus: str | None = "8",
    clique: str | None = None,
    unschedulable: bool = False,
    provider_id: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as GPU Feature Discovery and the device plugin leave it: product label, allocatable GPUs (and,
    when given, the cloud's providerID and labels)."""
    labels = {SELECTOR_LABEL: selector, "kubernetes.io/hostname": name, **(labels or {})}
    if product is not None:
        labels[GPU_PRODUCT] = product
    if clique is not None:
        labels[CLIQUE] = clique
    allocatable = {"cpu": "64", "memory": "512Gi"} | ({"nvidia.com/gpu": gpus} if gpus is not None else {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": ({"unschedulable": True} if unschedulable else {})
        | ({"providerID": provider_id} if provider_id else {}),
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


@dataclass
class NodeSet:
    """This test's Nodes: short names (`n0`) in the test, cluster-unique names (`s<hex>-n0`) on the server.

    The prefix is the namespace's random suffix: node names are host names (a 63-character label value), too
    short for the whole namespace name; a clash between two tests would fail loudly (AlreadyExists).
    """

    kube: KubeClient
    namespace: str
    created: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"s{self.namespace.rsplit('-', 1)[-1]}"

    def name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def names(self, shorts: Iterable[str]) -> list[str]:
        return [self.name(short) for short in shorts]

    def short(self, name: str) -> str:
        return name.removeprefix(f"{self.prefix}-")

    def add(self, short: str, *, selector: str | None = None, **fields: Any) -> str:
        manifest = node_manifest(self.name(short), selector=selector or self.namespace, **fields)
        self.kube.create(manifest)
        self.created.append(manifest["metadata"]["name"])
        return str(manifest["metadata"]["name"])

    def add_many(self, count: int, **fields: Any) -> list[str]:
        return [self.add(f"n{index}", **fields) for index in range(count)]

    def cordon(self, short: str) -> None:
        self.kube.merge_patch(NODES, self.name(short), {"spec": {"unschedulable": True}})

    def delete_all(self) -> None:
        for name in self.created:
            self.kube.delete(NODES, name)


def resolve_category(
    category: dict[str, Any], *, selector: str, options: dict[str, Any] | None = None
) -> ResolvedCategory:
    """One category of a Certification targeting this test's nodes, loaded and resolved as the compiler does."""
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": CERTIFICATION},
        "spec": {
            "target": {"nodeSelector": {SELECTOR_LABEL: selector}},
            "categories": [category],
            **(options or {}),
        },
    }
    (loaded,) = load_certifications(json.dumps(document), "t.yaml")
    resolved, errors = resolve_certification(loaded.certification.spec, load_catalog())
    assert not errors, errors
    return resolved[0]


def workflow_manifest(name: str, namespace: str) -> dict[str, Any]:
    """The smallest Workflow the Argo CRD accepts; nothing runs it, it only owns what the steps create."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"entrypoint": "main", "templates": [{"name": "main", "suspend": {}}]},
    }


def create_context(kube: KubeClient, namespace: str, category: ResolvedCategory, workflow: str) -> StepContext:
    """A StepContext for a real Workflow object (so owner references name a real uid)."""
    created = kube.create(workflow_manifest(workflow, namespace))
    return StepContext(
        category=category,
        certification=CERTIFICATION,
        workflow_name=workflow,
        workflow_uid=created["metadata"]["uid"],
        namespace=namespace,
    )


def owner_reference(context: StepContext) -> dict[str, Any]:
    """What every object a step creates must carry (written out, not taken from StepContext)."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "name": context.workflow_name,
        "uid": context.workflow_uid,
        "blockOwnerDeletion": True,
    }


def uid8(context: StepContext) -> str:
    """The reference's ConfigMap suffix: the first 8 characters of the Workflow's UID (its first UUID block)."""
    return context.workflow_uid.split("-")[0]


# --- the Trainer controller and the kubelet, played by the test ------------------------------------------------


def set_trainjob_condition(
    kube: KubeClient, namespace: str, name: str, condition: str, reason: str, *, message: str = ""
) -> None:
    """What the Trainer controller writes when the JobSet finishes (`Complete` or `Failed`, status True)."""
    entry = {
        "type": condition,
        "status": "True",
        "reason": reason,
        "message": message or reason,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    kube.merge_patch(TRAINJOBS, name, {"status": {"conditions": [entry]}}, namespace, subresource="status")


def complete_trainjob(kube: KubeClient, namespace: str, name: str) -> None:
    set_trainjob_condition(kube, namespace, name, "Complete", "AllJobsCompleted", message="jobset completed")


def suspend_trainjob(kube: KubeClient, namespace: str, name: str, *, suspended: bool) -> None:
    """Kueue sets `spec.suspend`; the Trainer controller mirrors it in a `Suspended` condition."""
    kube.merge_patch(TRAINJOBS, name, {"spec": {"suspend": suspended}}, namespace)
    condition = {
        "type": "Suspended",
        "status": "True" if suspended else "False",
        "reason": "Suspended" if suspended else "Resumed",
        "message": "TrainJob is suspended" if suspended else "TrainJob is resumed",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    kube.merge_patch(TRAINJOBS, name, {"status": {"conditions": [condition]}}, namespace, subresource="status")


def create_rank_pod(
    kube: KubeClient,
    namespace: str,
    *,
    name: str,
    trainjob: str,
    node: str,
    exit_code: int,
    reason: str = "Error",
    finished_at: str = "2026-01-01T00:00:00Z",
    replicated_job: str = "node",
    being_deleted: bool = False,
) -> None:
    """A pod of the TrainJob's JobSet (a rank of `replicated_job`) on `node` whose container terminated with
    `exit_code` at `finished_at`; `being_deleted`: deleted, and held Terminating by a finalizer (with its
    `deletionTimestamp`) until `release_pod`."""
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {JOBSET_NAME: trainjob, "jobset.sigs.k8s.io/replicatedjob-name": replicated_job},
                **({"finalizers": [TEST_FINALIZER]} if being_deleted else {}),
            },
            "spec": {"nodeName": node, "containers": [{"name": "node", "image": "nccl-tests:test"}]},
        }
    )
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "node",
                "image": "nccl-tests:test",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": finished_at}},
            }
        ],
    }
    kube.merge_patch(PODS, name, {"status": status}, namespace, subresource="status")
    if being_deleted:
        kube.delete(PODS, name, namespace)


TEST_FINALIZER = "nvcre.nvidia.com/test-hold"


def release_pod(kube: KubeClient, namespace: str, name: str) -> None:
    """Let a pod held Terminating by `create_rank_pod(being_deleted=True)` go."""
    kube.merge_patch(PODS, name, {"metadata": {"finalizers": None}}, namespace)


def trainjobs(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    items, _ = kube.list(TRAINJOBS, namespace)
    return items


def workflow_exists(kube: KubeClient, namespace: str, name: str) -> bool:
    return kube.get(WORKFLOWS, name, namespace) is not None


# --- time, driven by the test ------------------------------------------------------------------------------------


@dataclass
class FakeClock:
    """A monotonic clock that only moves when the test says so."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptExhaustedError(AssertionError):
    """The step kept polling after the script's last action: it missed the end of the workload."""


class StepInterruptedError(Exception):
    """Raised from a scripted sleep to stop a step mid-run, as a killed pod would."""


@dataclass
class Script:
    """The `sleep` of RunSettings: poll N runs action N (the cluster changes between polls), then the clock
    advances by that action's seconds. Polling past the last action fails the test instead of hanging."""

    clock: FakeClock
    actions: list[tuple[float, Callable[[], None]]]
    calls: int = 0

    def __call__(self, _seconds: float) -> None:
        if self.calls >= len(self.actions):
            raise ScriptExhaustedError(f"the step polled {self.calls + 1} times; the script has {len(self.actions)}")
        advance, action = self.actions[self.calls]
        self.calls += 1
        action()
        self.clock.now += advance


def nothing() -> None:
    """A poll where nothing changes."""


def interrupt() -> None:
    raise StepInterruptedError("the step's pod was killed")


def create_pending_pod(kube: KubeClient, namespace: str, *, name: str, trainjob: str, message: str) -> None:
    """A rank pod the scheduler could not place: `PodScheduled=False`, reason `Unschedulable`."""
    _create_rank_pod(kube, namespace, name=name, trainjob=trainjob)
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    status = {"phase": "Pending", "conditions": [condition]}
    kube.merge_patch(PODS, name, {"status": status}, namespace, subresource="status")


def create_running_pod(kube: KubeClient, namespace: str, *, name: str, trainjob: str) -> None:
    """A rank pod the scheduler placed and the kubelet started."""
    _create_rank_pod(kube, namespace, name=name, trainjob=trainjob)
    schedule_pod(kube, namespace, name=name)


def _create_rank_pod(kube: KubeClient, namespace: str, *, name: str, trainjob: str) -> None:
    """A pod of the TrainJob's JobSet, as its Job controller creates it; the callers then set its status."""
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {JOBSET_NAME: trainjob}},
            "spec": {"containers": [{"name": "node", "image": "nccl-tests:test"}]},
        }
    )


def schedule_pod(kube: KubeClient, namespace: str, *, name: str) -> None:
    """The scheduler placed the pod after all: `PodScheduled=True`, running."""
    status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    kube.merge_patch(PODS, name, {"status": status}, namespace, subresource="status")
