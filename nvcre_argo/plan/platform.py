"""The platform half of a plan: which platform the nodes are on, which arms apply, and what that changes in
the GPU-dependent values (the NIC count, the placeholders an image change moves, the variables MPI forwards).

The plan step decides this once on the live nodes and records it in the plan; the run step and `nvcre-argo
resolve --platform` recompute the same arms from the recorded (or given) platform with the same functions, so
the TrainJob always agrees with the TrainingRuntime it runs on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from nvcre_argo.plan.model import Plan
from nvcre_argo.plan.nodes import Node, is_rdma_nic
from nvcre_argo.platform.apply import ArmContext, forwarded_env, matching_arms, placeholder_overrides
from nvcre_argo.platform.arms import PlatformArm, load_builtin_arms, merge_arms
from nvcre_argo.quantity import parse_quantity
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.values import GpuValues, gpu_values


def category_arms(category: ResolvedCategory) -> tuple[PlatformArm, ...]:
    """Every arm this category may use: the built-in ones with the compiled-in `--catalog` arms on top."""
    return merge_arms(load_builtin_arms(), category.platform_arms or ())


def select_arms(
    category: ResolvedCategory,
    arms: Sequence[PlatformArm],
    *,
    platform: str | None,
    architecture: str | None,
    instance_type: str | None = None,
) -> tuple[PlatformArm, ...]:
    gpu = gpu_values(category, architecture)
    context = ArmContext(
        platform=platform,
        gpu_architecture=architecture,
        instance_type=instance_type,
        domain=category.domain,
        mnnvl=gpu.mnnvl,
        gpus_per_node=gpu.gpus_per_node,
    )
    return matching_arms(arms, context)


def platform_gpu_values(category: ResolvedCategory, architecture: str | None, arms: Sequence[PlatformArm]) -> GpuValues:
    """`gpu_values` with the applied arms' changes: the platform's NIC count (unless mlnxPerNode is set; the
    last arm that names one wins), the placeholders and the forwarded variables."""
    gpu = gpu_values(category, architecture)
    mlnx = gpu.mlnx_per_node
    if category.options.mlnx_per_node is None:
        for arm in arms:
            if arm.patch.mlnx_per_node is not None:
                mlnx = arm.patch.mlnx_per_node
    return dataclasses.replace(
        gpu,
        mlnx_per_node=mlnx,
        placeholder_overrides=tuple(sorted(placeholder_overrides(arms).items())),
        forwarded_env=forwarded_env(arms),
    )


def detect_nic_resource(nodes: Iterable[Node], count: int) -> str | None:
    """The on-prem NIC resource to request: the one `rdma/*` or `nvidia.com/mlnxnics` name every node has at
    least `count` of allocatable; None when there is none, or more than one (never a guess between two)."""
    if count <= 0:
        return None
    common: set[str] | None = None
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        names = {name for name, value in allocatable.items() if is_rdma_nic(name) and _at_least(value, count)}
        common = names if common is None else common & names
    return next(iter(common)) if common is not None and len(common) == 1 else None


def _at_least(value: object, count: int) -> bool:
    parsed = parse_quantity(value if isinstance(value, (int, str)) else str(value))
    return parsed is not None and parsed >= count


def planned_arms(category: ResolvedCategory, plan: Plan) -> tuple[PlatformArm, ...]:
    """The arms the plan step applied, by the names it recorded, in load order: what the run step renders the
    TrainJob with, so both halves of a workload agree even if a later package version matches differently."""
    applied = set(plan.platform.arms) if plan.platform is not None else set()
    return tuple(arm for arm in category_arms(category) if arm.name in applied)


def planned_gpu_values(category: ResolvedCategory, plan: Plan) -> GpuValues:
    """The GPU values of a recorded plan, its platform arms included."""
    return platform_gpu_values(category, plan.architecture, planned_arms(category, plan))
