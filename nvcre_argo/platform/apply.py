"""Choose the arms that match a category and apply them to its rendered TrainingRuntime spec.

The order is fixed and documented (README, "Platform arms"): the catalog template first, then every matching
arm in load order (a later arm's value for the same key wins), then the user's options, then the gang
scheduler. So an explicit option such as `image` or `resources` always beats the platform's default, and the
scheduler is never something an arm can change. Pure: dicts in, dicts changed in place, names out.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre_argo.platform.arms import PlatformArm
from nvcre_argo.podspec import replace_pod_image, set_env

COMPUTE_DOMAIN_CLAIM = "compute-domain-channel"
_PLACEHOLDER = re.compile(r"%\{(mlnxPerNode|gpusPerNode|runtimeName)\}")


@dataclass(frozen=True)
class ArmContext:
    """What arms match on."""

    platform: str | None
    gpu_architecture: str | None
    instance_type: str | None
    domain: str
    mnnvl: bool = False
    gpus_per_node: int | None = None


@dataclass(frozen=True)
class ArmValues:
    """The numbers and names an arm's `%{...}` may use."""

    mlnx_per_node: int
    gpus_per_node: int
    runtime_name: str


def matching_arms(arms: Sequence[PlatformArm], context: ArmContext) -> tuple[PlatformArm, ...]:
    """The arms whose `when` holds, in load order. No platform (an offline render without `--platform`)
    matches no arm that names a platform."""
    return tuple(arm for arm in arms if _matches(arm, context))


def _matches(arm: PlatformArm, context: ArmContext) -> bool:
    when = arm.when
    checks = (
        (when.platform, context.platform),
        (when.gpu_architecture, context.gpu_architecture),
        (when.instance_type, context.instance_type),
        (when.domain, context.domain),
    )
    if when.mnnvl is not None and when.mnnvl != context.mnnvl:
        return False
    if when.gpus_per_node is not None and context.gpus_per_node not in when.gpus_per_node:
        return False
    return all(match is None or match.matches(value) for match, value in checks)


def placeholder_overrides(arms: Sequence[PlatformArm]) -> dict[str, str]:
    """The catalog placeholder values the arms set (`mpirun`, `ncclBinary`), the last arm winning."""
    values: dict[str, str] = {}
    for arm in arms:
        values.update(dict(arm.patch.values.items()))
    return values


def forwarded_env(arms: Sequence[PlatformArm]) -> tuple[str, ...]:
    """The environment variable names the arms set, sorted: what an MPI launcher forwards with `-x NAME`."""
    return tuple(sorted({name for arm in arms for name in [*arm.patch.env, *arm.patch.forward_env]}))


def apply_arms(
    spec: dict[str, Any], arms: Sequence[PlatformArm], *, gpu_jobs: Sequence[str], values: ArmValues
) -> None:
    """Apply each arm, in order, to the TrainingRuntime `spec`."""
    for arm in arms:
        patch = _fill(arm.patch.model_dump(by_alias=False), values)
        for job in _replicated_jobs(spec):
            pod = _pod_spec(job)
            containers = pod.get("containers") or []
            if not containers:
                continue
            if patch["image"]:
                replace_pod_image(pod, patch["image"])
            for name, value in patch["env"].items():
                set_env(containers[0], name, value)
            if job.get("name") in gpu_jobs:
                _patch_worker(job, pod, containers[0], patch, values)


def _patch_worker(
    job: dict[str, Any], pod: dict[str, Any], container: dict[str, Any], patch: Mapping[str, Any], values: ArmValues
) -> None:
    resources = patch["worker_resources"]
    if resources:
        for kind in ("limits", "requests"):
            wanted = {key: value for key, value in resources[kind].items() if str(value) != "0"}
            merged = {**container.setdefault("resources", {}).get(kind, {}), **wanted}
            container["resources"][kind] = dict(sorted(merged.items()))
    if patch["capabilities"]:
        added = container.setdefault("securityContext", {}).setdefault("capabilities", {}).setdefault("add", [])
        added += [capability for capability in patch["capabilities"] if capability not in added]
    pod_metadata = job["template"]["spec"]["template"].setdefault("metadata", {})
    annotations = dict(patch["pod_annotations"])
    if values.mlnx_per_node > 0:
        annotations |= {
            key: ",".join([value] * values.mlnx_per_node) for key, value in patch["pod_annotations_per_nic"].items()
        }
    if annotations:
        pod_metadata["annotations"] = dict(sorted({**pod_metadata.get("annotations", {}), **annotations}.items()))
    if patch["job_annotations"]:
        job_metadata = job["template"].setdefault("metadata", {})
        job_metadata["annotations"] = dict(
            sorted({**job_metadata.get("annotations", {}), **patch["job_annotations"]}.items())
        )
    for toleration in patch["tolerations"]:
        existing = pod.setdefault("tolerations", [])
        if toleration not in existing:
            existing.append(toleration)
    for volume in patch["volumes"]:
        _put_named(pod.setdefault("volumes", []), volume)
    for mount in patch["volume_mounts"]:
        _put_named(container.setdefault("volumeMounts", []), mount, key="mountPath")
    for init in patch["init_containers"]:
        _put_named(pod.setdefault("initContainers", []), init)
    if patch["compute_domain"]:
        claim = {"name": COMPUTE_DOMAIN_CLAIM, "resourceClaimTemplateName": compute_domain_channel(values.runtime_name)}
        _put_named(pod.setdefault("resourceClaims", []), claim)
        _put_named(container.setdefault("resources", {}).setdefault("claims", []), {"name": COMPUTE_DOMAIN_CLAIM})


def compute_domain_name(runtime_name: str) -> str:
    return f"{runtime_name}-compute-domain"


def compute_domain_channel(runtime_name: str) -> str:
    """The ResourceClaimTemplate the ComputeDomain driver creates for the channel (`channel.resourceClaimTemplate`)."""
    return f"{runtime_name}-channel"


def render_compute_domain(
    runtime_name: str, *, namespace: str | None, num_nodes: int, owner_references: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The category's ComputeDomain (`resource.nvidia.com/v1beta1`): one IMEX domain spanning a group's nodes,
    whose channel claim template the arm's `computeDomain: true` pods claim (platforms.md (b0))."""
    metadata: dict[str, Any] = {"name": compute_domain_name(runtime_name)}
    if namespace:
        metadata["namespace"] = namespace
    if owner_references:
        metadata["ownerReferences"] = owner_references
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": metadata,
        "spec": {
            "numNodes": num_nodes,
            "channel": {
                "allocationMode": "Single",
                "resourceClaimTemplate": {"name": compute_domain_channel(runtime_name)},
            },
        },
    }


def _fill(value: Any, values: ArmValues) -> Any:
    """`%{mlnxPerNode}`, `%{gpusPerNode}`, `%{runtimeName}` in a patch; a value that is exactly a number
    placeholder becomes the number, so `"0"` NIC requests can be recognised and left out."""
    table = {
        "mlnxPerNode": values.mlnx_per_node,
        "gpusPerNode": values.gpus_per_node,
        "runtimeName": values.runtime_name,
    }
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole and whole.group(1) != "runtimeName":
            return table[whole.group(1)]
        return _PLACEHOLDER.sub(lambda match: str(table[match.group(1)]), value)
    if isinstance(value, Mapping):
        return {key: _fill(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, values) for item in value]
    return copy.deepcopy(value)


def _replicated_jobs(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from spec.get("template", {}).get("spec", {}).get("replicatedJobs", [])


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = job.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    return template.setdefault("spec", {})  # type: ignore[no-any-return]


def _put_named(items: list[dict[str, Any]], item: dict[str, Any], *, key: str = "name") -> None:
    for index, existing in enumerate(items):
        if existing.get(key) == item.get(key):
            items[index] = item
            return
    items.append(item)
