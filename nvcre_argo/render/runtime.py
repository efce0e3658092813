"""The category's Kubeflow `TrainingRuntime`: the catalog template with every certification rule applied.

Order matters and is fixed: placeholders, then the platform's arms (catalog → platform, `nvcre_argo.platform`),
then the user's options: GPU and NIC requests, training resources, host RDMA devices
(`rdmaDeviceAccess: hostPath`), the checkpoint PVC (`enableCheckpoint`), image, pull secrets, source
repository, tolerations, fail-fast, and last the gang scheduler (so it replaces whatever scheduler a catalog
entry pinned, as the reference does).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from nvcre_argo.catalog.placeholders import fill_placeholders
from nvcre_argo.names import LABEL_CATEGORY_INDEX, LABEL_MANAGED_BY, MANAGED_BY
from nvcre_argo.platform.apply import ArmValues, apply_arms
from nvcre_argo.platform.arms import PlatformArm
from nvcre_argo.podspec import set_env
from nvcre_argo.render import pods
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.values import GpuValues, placeholder_values

TRAINER_API_VERSION = "trainer.kubeflow.org/v1alpha1"
SOURCE_REPO_ENV = "NVCRE_SOURCE_REPO"


def render_runtime(
    category: ResolvedCategory,
    gpu: GpuValues,
    *,
    name: str,
    namespace: str | None,
    num_nodes: int,
    owner_references: list[dict[str, Any]] | None = None,
    arms: Sequence[PlatformArm] = (),
    checkpoint_claim: str | None = None,
) -> dict[str, Any]:
    """The TrainingRuntime manifest for one category (shared by all its groups), with the platform `arms`
    (already matched, in order) applied between the catalog template and the user's options; a checkpointing
    category's ranks mount `checkpoint_claim` (required for one)."""
    if category.checkpoint is not None and checkpoint_claim is None:
        raise ValueError(f"{category.key} checkpoints: its TrainingRuntime needs the checkpoint PVC's name")
    spec = fill_placeholders(copy.deepcopy(category.entry.runtime), placeholder_values(category, gpu, num_nodes))
    values = ArmValues(mlnx_per_node=gpu.mlnx_per_node, gpus_per_node=gpu.gpus_per_node, runtime_name=name)
    apply_arms(spec, arms, gpu_jobs=category.entry.gpu_replicated_jobs, values=values)
    for replicated_job in pods.replicated_jobs(spec):
        _apply_certification_rules(category, gpu, replicated_job, checkpoint_claim)
    if category.gang:
        # A gang admits all pods at once or none: a launcher gated on ready workers (dependsOn) or an ordered
        # startup would never be populated, so the gang never forms. The launcher waits for the workers'
        # sshd itself instead (see the nccl-mpi catalog fragment). Under every gang scheduler, not only KAI as
        # in the reference: Run:ai groups pods as KAI does (README, "Known differences from the reference").
        spec.get("template", {}).get("spec", {}).pop("startupPolicy", None)
        for replicated_job in pods.replicated_jobs(spec):
            replicated_job.pop("dependsOn", None)
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_CATEGORY_INDEX: str(category.index),
            "trainer.kubeflow.org/framework": "mpi" if "mpi" in spec.get("mlPolicy", {}) else "torch",
        },
    }
    if namespace:
        metadata["namespace"] = namespace
    if owner_references:
        metadata["ownerReferences"] = owner_references
    return {"apiVersion": TRAINER_API_VERSION, "kind": "TrainingRuntime", "metadata": metadata, "spec": spec}


def _apply_certification_rules(
    category: ResolvedCategory, gpu: GpuValues, replicated_job: dict[str, Any], checkpoint_claim: str | None
) -> None:
    job_name = replicated_job.get("name")
    pod_spec = pods.pod_spec(replicated_job)
    containers = pod_spec.get("containers") or []
    if job_name in category.entry.gpu_replicated_jobs and containers:
        _request_devices(category, gpu, containers[0])
        if category.options.rdma_device_access == "hostPath":
            # Only the ranks use RDMA: an MPI launcher starts them over ssh and touches no InfiniBand device.
            pods.mount_host_rdma_devices(pod_spec, containers[0])
        if checkpoint_claim is not None and category.checkpoint is not None:
            pods.mount_checkpoints(pod_spec, containers[0], checkpoint_claim)
    if category.image:
        pods.replace_image(replicated_job, category.image)
    if category.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in category.image_pull_secrets]
    if category.source_repo:
        for container in [*pod_spec.get("initContainers", []), *containers]:
            if any(item.get("name") == SOURCE_REPO_ENV for item in container.get("env", [])):
                set_env(container, SOURCE_REPO_ENV, category.source_repo)
    pod_spec["tolerations"] = pods.with_target_tolerations(pod_spec.get("tolerations") or [], category.target)
    pods.fail_fast(replicated_job)
    if category.gang:
        pod_spec["schedulerName"] = category.gang.scheduler_name
        pods.add_label(pods.job_template(replicated_job), category.gang.queue_label_key, category.gang.queue)
        pods.add_label(pods.pod_template(replicated_job), category.gang.queue_label_key, category.gang.queue)


def _request_devices(category: ResolvedCategory, gpu: GpuValues, container: dict[str, Any]) -> None:
    """GPUs (and RDMA NICs when named) as both request and limit; training containers get CPU/memory too."""
    devices: dict[str, Any] = {pods.GPU_RESOURCE: gpu.gpus_per_node}
    nic = category.options.nic_resource_name
    if nic and gpu.mlnx_per_node > 0:
        devices[nic] = gpu.mlnx_per_node
    limits, requests = dict(devices), dict(devices)
    if category.resources is not None:
        # A default CPU/memory never replaces one already there (a platform arm's, e.g. AWS p5); a value the
        # user set always does (catalog -> platform -> user options).
        explicit = set(category.resources.explicit or ())
        present = container.get("resources") or {}
        for side, chosen, values in (
            ("limits", limits, category.resources.limits),
            ("requests", requests, category.resources.requests),
        ):
            for key, value in values.items():
                if f"{side}.{key}" in explicit or key not in (present.get(side) or {}):
                    chosen[key] = value
    pods.set_resources(container, limits, requests)
