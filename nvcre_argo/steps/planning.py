"""The plan step: find the category's nodes, decide the groups and the platform, create the TrainingRuntime
(with the platform's arms), for GB200/GB300 its ComputeDomain and, when the category checkpoints, its
checkpoint PVC; publish the plan.

Run time is where the cluster is known: which nodes match the target, which are excluded and why, which GPU
architecture they have (and so the GPU-dependent defaults), and how they split into groups. The full plan goes
to a ConfigMap owned by the Workflow (the reference's `group-nodes-<id>` layout plus our plan, both compressed,
see `plan.storage`); only group names go to Argo, so the Workflow's size does not grow with a group's nodes.

At 10,000 nodes the listing is what costs: the API server filters by the target's labels where it can, the
list is read a page at a time, and only the fields planning reads are kept of each Node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CONFIGMAPS, NODES, RESOURCE_SLICES
from nvcre_argo.names import LABEL_RECORD, checkpoint_claim_name, group_nodes_configmap, runtime_name
from nvcre_argo.plan.model import Plan, PlanError, PlatformChoice
from nvcre_argo.plan.nodes import node_labels, node_name, slim_node
from nvcre_argo.plan.planner import plan_category
from nvcre_argo.plan.platform import category_arms
from nvcre_argo.plan.platform import planned_gpu_values as platform_planned_gpu_values
from nvcre_argo.plan.selection import target_label_selector
from nvcre_argo.plan.slices import GPU_DRIVER, architecture_from_slices
from nvcre_argo.plan.storage import plan_binary_data, plan_from_configmap
from nvcre_argo.render.planned import render_planned_objects
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.gpu import GPU_PRODUCT_LABEL
from nvcre_argo.resolve.values import GpuValues
from nvcre_argo.results import RECORD_PLAN
from nvcre_argo.steps.context import StepContext

NODE_PAGE_SIZE = 500


def plan_step(
    kube: KubeClient,
    context: StepContext,
    *,
    report: Callable[[str], None] = print,
    page_size: int = NODE_PAGE_SIZE,
) -> Plan:
    """Plan the category on the live cluster; raises PlanError (with the selector) when nothing can run."""
    nodes = list(list_target_nodes(kube, context, page_size=page_size))
    category = with_slice_architecture(kube, context.category, nodes, report=report)
    plan = plan_category(nodes, category, arms=category_arms(category))
    largest = max((len(group.nodes) for group in plan.groups), default=1) or context.category.options.nodes_per_job or 1
    planned = render_planned_objects(
        category,
        plan,
        name=runtime_name(context.workflow_name),
        namespace=context.namespace,
        num_nodes=largest,
        owner_references=context.owner_references(),
        checkpoint_claim=checkpoint_claim_name(context.workflow_name),
    )
    gpu = planned.gpu
    if planned.compute_domain is not None:
        # Before the runtime: the workers' channel claim waits for the ComputeDomain's claim template.
        create_compute_domain(kube, planned.compute_domain)
    if planned.checkpoint_claim is not None:
        # Before the runtime, like the ComputeDomain: the ranks' pods cannot start without it.
        kube.create_if_absent(planned.checkpoint_claim)
    kube.create_if_absent(planned.runtime)
    kube.create_or_replace(plan_configmap(context, plan))
    grouping = (
        f"{len({domain for _, domain in plan.isolation.domains})} domain(s) to isolate faults in, round by round"
        if plan.isolation is not None
        else f"{len(plan.groups)} group(s)"
    )
    report(
        f"{context.category.domain}/{context.category.variant}: {len(plan.candidates)} node(s), "
        f"{len(plan.excluded)} excluded, {grouping}, GPU architecture "
        f"{plan.architecture or 'unknown'} ({gpu.gpus_per_node} GPUs per node)"
    )
    if plan.platform is not None:
        report(describe_platform(plan.platform))
    for exclusion in plan.excluded:
        report(f"excluded {exclusion.node}: {exclusion.reason}: {exclusion.message}")
    return plan


def create_compute_domain(kube: KubeClient, manifest: dict[str, Any]) -> None:
    """Create the ComputeDomain, or fail the plan naming the fix: without the DRA driver's API the workers'
    channel claim could never be met, and every group would time out Pending as if its nodes were at fault."""
    try:
        kube.create_if_absent(manifest)
    except ApiError as error:
        if not error.not_found:
            raise
        raise PlanError(
            "GB200/GB300 multi-node NVLink needs a ComputeDomain (resource.nvidia.com/v1beta1), which this cluster "
            "does not serve; install NVIDIA's DRA driver for GPUs, or set enableMNNVL: false"
        ) from None


def describe_platform(choice: PlatformChoice) -> str:
    """One line for the step's log: the platform, how it was decided, and the arms applied in order."""
    instance = f", instance type {choice.instance_type}" if choice.instance_type else ""
    nic = f", NIC resource {choice.nic_resource} (found on every node)" if choice.nic_resource else ""
    arms = ", ".join(choice.arms) or "none"
    return f"platform {choice.name} ({choice.source}{instance}{nic}); platform arms applied: {arms}"


def with_slice_architecture(
    kube: KubeClient, category: ResolvedCategory, nodes: list[dict[str, Any]], *, report: Callable[[str], None]
) -> ResolvedCategory:
    """The category with its GPU architecture taken from the nodes' DRA ResourceSlices when no node carries the
    GPU product label and none was given at compile time; unchanged otherwise (also when the cluster serves no
    `resource.k8s.io/v1` or the step may not list slices: the architecture then stays unknown, as before)."""
    if category.gpu_architecture or any(GPU_PRODUCT_LABEL in node_labels(node) for node in nodes) or not nodes:
        return category
    try:
        slices, _ = kube.list(RESOURCE_SLICES, field_selector=f"spec.driver={GPU_DRIVER}")
    except ApiError as error:
        report(f"no GPU product label on any node and ResourceSlices unreadable ({error}); GPU architecture unknown")
        return category
    architecture = architecture_from_slices(slices, [node_name(node) for node in nodes])
    if architecture is None:
        return category
    report(f"no GPU product label on any node: GPU architecture {architecture} from DRA ResourceSlices")
    return category.model_copy(update={"gpu_architecture": architecture})


def list_target_nodes(
    kube: KubeClient, context: StepContext, *, page_size: int = NODE_PAGE_SIZE
) -> Iterator[dict[str, Any]]:
    """The Nodes the plan step plans with: those of its category's target (see `list_nodes_for_target`)."""
    return list_nodes_for_target(kube, context.category.target, page_size=page_size)


def list_nodes_for_target(
    kube: KubeClient, target: TargetSpec, *, page_size: int = NODE_PAGE_SIZE
) -> Iterator[dict[str, Any]]:
    """The Nodes the target's label selector lets through (every Node when it has none), page by page, each
    cut down to what planning reads; `matches_target` still judges every one of them. `nvcre-argo plan`
    lists through here too, so its preview plans exactly the nodes the plan step would."""
    selector = target_label_selector(target)
    for page in kube.pages(NODES, label_selector=selector, limit=page_size):
        yield from (slim_node(node) for node in page.get("items", []))


def plan_configmap(context: StepContext, plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": group_nodes_configmap(context.workflow_uid),
            "namespace": context.namespace,
            "labels": context.labels(**{LABEL_RECORD: RECORD_PLAN}),
            "ownerReferences": context.owner_references(),
        },
        "binaryData": plan_binary_data(plan),
    }


def load_plan(kube: KubeClient, context: StepContext) -> Plan:
    """The plan the plan step published for this Workflow (the run and record steps read it)."""
    configmap = kube.get(CONFIGMAPS, group_nodes_configmap(context.workflow_uid), context.namespace)
    if configmap is None:
        raise LookupError(f"ConfigMap {group_nodes_configmap(context.workflow_uid)} (the plan) does not exist")
    try:
        return plan_from_configmap(configmap)
    except PlanError as error:
        raise PlanError(f"ConfigMap {group_nodes_configmap(context.workflow_uid)}: {error}") from None


def planned_gpu_values(kube: KubeClient, context: StepContext) -> GpuValues:
    return platform_planned_gpu_values(context.category, load_plan(kube, context))
