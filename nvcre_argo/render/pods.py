"""Walking the pod templates of a TrainingRuntime spec, and the edits every certification pod gets.

A TrainingRuntime's `template.spec.replicatedJobs[]` each hold a Job template whose `spec.template` is a pod
template. Every transformation here (scheduler, queue labels, restart policy, tolerations, image, GPUs) is a
function over those, applied in one fixed order by the runtime renderer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.names import CHECKPOINT_MOUNT
from nvcre_argo.podspec import replace_pod_image

GPU_RESOURCE = "nvidia.com/gpu"
RDMA_DEVICE_DIR = "/dev/infiniband"
RDMA_VOLUME = "host-infiniband"
CATCH_ALL_TOLERATION = {"operator": "Exists"}


def replicated_jobs(runtime_spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from runtime_spec.get("template", {}).get("spec", {}).get("replicatedJobs", [])


def _child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child: dict[str, Any] = parent.setdefault(key, {})
    return child


def job_template(replicated_job: dict[str, Any]) -> dict[str, Any]:
    return _child(replicated_job, "template")


def pod_template(replicated_job: dict[str, Any]) -> dict[str, Any]:
    return _child(_child(job_template(replicated_job), "spec"), "template")


def pod_spec(replicated_job: dict[str, Any]) -> dict[str, Any]:
    return _child(pod_template(replicated_job), "spec")


def add_label(template: dict[str, Any], key: str, value: str) -> None:
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels[key] = value
    template["metadata"]["labels"] = dict(sorted(labels.items()))


def fail_fast(replicated_job: dict[str, Any]) -> None:
    """A broken node must fail the TrainJob at once, not be retried in place (JobSet's defaults retry)."""
    job_template(replicated_job).setdefault("spec", {})["backoffLimit"] = 0
    pod_spec(replicated_job)["restartPolicy"] = "Never"


def tolerations_for(target: TargetSpec) -> list[dict[str, Any]]:
    """Tolerate exactly the selected taints; without taint selectors, tolerate everything (GPU taints vary)."""
    if not target.taint_selectors:
        return [dict(CATCH_ALL_TOLERATION)]
    tolerations = []
    for selector in target.taint_selectors:
        toleration: dict[str, Any] = {"key": selector.key}
        if selector.value:
            toleration |= {"operator": "Equal", "value": selector.value}
        else:
            toleration["operator"] = "Exists"
        if selector.effect:
            toleration["effect"] = selector.effect
        tolerations.append(toleration)
    return tolerations


def with_target_tolerations(platform: list[dict[str, Any]], target: TargetSpec) -> list[dict[str, Any]]:
    """The platform arms' tolerations followed by the target's, each once; the target's catch-all alone when it
    tolerates everything. A platform that taints its GPU nodes (arm64, `nvidia.com/gpu`) needs its tolerations
    exactly when the target selects nodes by another taint: the pods must tolerate every taint a node has."""
    chosen = tolerations_for(target)
    if CATCH_ALL_TOLERATION in chosen:
        return chosen
    return [*platform, *[toleration for toleration in chosen if toleration not in platform]]


def replace_image(replicated_job: dict[str, Any], image: str) -> None:
    """The primary container, and init containers that shared its original image, get the new image."""
    replace_pod_image(pod_spec(replicated_job), image)


def set_resources(container: dict[str, Any], limits: dict[str, Any], requests: dict[str, Any]) -> None:
    resources = container.setdefault("resources", {})
    resources["limits"] = dict(sorted({**resources.get("limits", {}), **limits}.items()))
    resources["requests"] = dict(sorted({**resources.get("requests", {}), **requests}.items()))


def mount_host_rdma_devices(spec: dict[str, Any], container: dict[str, Any]) -> None:
    """`rdmaDeviceAccess: hostPath`: the node's `/dev/infiniband` in the container, which runs privileged.

    For sites without an RDMA device plugin: the kubelet's device cgroup only lets a container open a device
    node it was allocated through a resource request, or any device when privileged, so the mount alone would
    show the device files and fail every open (nvcre-contract.md §3.3). `type: Directory` makes a node without
    InfiniBand fail the pod at mount time instead of running a collective that silently falls back to TCP.
    """
    volume = {"name": RDMA_VOLUME, "hostPath": {"path": RDMA_DEVICE_DIR, "type": "Directory"}}
    _put_named(spec.setdefault("volumes", []), volume)
    _put_named(container.setdefault("volumeMounts", []), {"name": RDMA_VOLUME, "mountPath": RDMA_DEVICE_DIR})
    container.setdefault("securityContext", {})["privileged"] = True


def _put_named(items: list[dict[str, Any]], item: dict[str, Any]) -> None:
    """Replace the entry of the same name, or append: rendering twice never lists a volume twice."""
    for index, existing in enumerate(items):
        if existing.get("name") == item["name"]:
            items[index] = item
            return
    items.append(item)


CHECKPOINT_VOLUME = "checkpoints"


def mount_checkpoints(spec: dict[str, Any], container: dict[str, Any], claim: str) -> None:
    """`enableCheckpoint: true`: the category's checkpoint PVC at `CHECKPOINT_MOUNT` in a rank container.

    Only the checkpoint directory is on the shared volume; the workspace (the Megatron-LM source each pod
    clones or copies at start) stays the pod's own memory-backed one. The reference mounts the PVC as the whole
    workspace, so on a fresh PVC every rank of a multi-node group runs its `git clone` into one shared
    directory at the same time, and all but the first fail.
    """
    volume = {"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
    _put_named(spec.setdefault("volumes", []), volume)
    mount = {"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_MOUNT}
    _put_named(container.setdefault("volumeMounts", []), mount)
