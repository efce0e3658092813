"""The plan step: find the category's nodes, decide the groups, create the TrainingRuntime, publish the plan.

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
from nvcre_argo.kube.resources import CONFIGMAPS, NODES
from nvcre_argo.names import LABEL_RECORD, group_nodes_configmap, runtime_name
from nvcre_argo.plan.model import Plan, PlanError
from nvcre_argo.plan.nodes import slim_node
from nvcre_argo.plan.planner import plan_category
from nvcre_argo.plan.selection import target_label_selector
from nvcre_argo.plan.storage import plan_binary_data, plan_from_configmap
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.resolve.values import GpuValues, gpu_values
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
    plan = plan_category(list_target_nodes(kube, context, page_size=page_size), context.category)
    gpu = gpu_values(context.category, plan.architecture)
    largest = max((len(group.nodes) for group in plan.groups), default=1) or context.category.options.nodes_per_job or 1
    runtime = render_runtime(
        context.category,
        gpu,
        name=runtime_name(context.workflow_name),
        namespace=context.namespace,
        num_nodes=largest,
        owner_references=context.owner_references(),
    )
    kube.create_if_absent(runtime)
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
    for exclusion in plan.excluded:
        report(f"excluded {exclusion.node}: {exclusion.reason}: {exclusion.message}")
    return plan


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
    return gpu_values(context.category, load_plan(kube, context).architecture)
