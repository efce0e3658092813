"""The category's run-time objects from its plan: the TrainingRuntime with the plan's platform arms and, when
an arm asks for multi-node NVLink (GB200/GB300), the ComputeDomain its pods claim, and, when the category
checkpoints, the PVC its ranks mount.

One function for the plan step and the tests, so what is pinned by the golden tests is what the plan step
creates: the arms the plan recorded, the platform's GPU values (NIC count), and an on-prem NIC resource the
plan found on the nodes standing in for an unset `nicResourceName`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre_argo.plan.model import Plan
from nvcre_argo.plan.platform import planned_arms, platform_gpu_values
from nvcre_argo.platform.apply import render_compute_domain
from nvcre_argo.render.checkpoint import render_checkpoint_claim
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.values import GpuValues


@dataclass(frozen=True)
class PlannedObjects:
    gpu: GpuValues
    runtime: dict[str, Any]
    compute_domain: dict[str, Any] | None
    checkpoint_claim: dict[str, Any] | None = None


def render_planned_objects(
    category: ResolvedCategory,
    plan: Plan,
    *,
    name: str,
    namespace: str | None,
    num_nodes: int,
    owner_references: list[dict[str, Any]] | None = None,
    checkpoint_claim: str | None = None,
) -> PlannedObjects:
    applied = planned_arms(category, plan)
    gpu = platform_gpu_values(category, plan.architecture, applied)
    if plan.platform is not None and plan.platform.nic_resource is not None:
        options = category.options.model_copy(update={"nic_resource_name": plan.platform.nic_resource})
        category = category.model_copy(update={"options": options})
    runtime = render_runtime(
        category,
        gpu,
        name=name,
        namespace=namespace,
        num_nodes=num_nodes,
        owner_references=owner_references,
        arms=applied,
        checkpoint_claim=checkpoint_claim,
    )
    domain = None
    if any(arm.patch.compute_domain for arm in applied):
        domain = render_compute_domain(
            name, namespace=namespace, num_nodes=num_nodes, owner_references=owner_references
        )
    claim = None
    if category.checkpoint is not None and checkpoint_claim is not None:
        claim = render_checkpoint_claim(
            category.checkpoint,
            name=checkpoint_claim,
            namespace=namespace,
            category_index=category.index,
            owner_references=owner_references,
        )
    return PlannedObjects(gpu=gpu, runtime=runtime, compute_domain=domain, checkpoint_claim=claim)
