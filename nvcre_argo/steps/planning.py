"""The plan step: find the category's nodes, decide the groups, create the TrainingRuntime, publish the plan.

Run time is where the cluster is known: which nodes match the target, which are excluded and why, which GPU
architecture they have (and so the GPU-dependent defaults), and how they split into groups. The full plan goes
to a ConfigMap owned by the Workflow (the reference's `group-nodes-<id>` layout plus our `plan.json`); only
group and node names go to Argo, to keep the Workflow object small.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import CONFIGMAPS, NODES
from nvcre_argo.names import LABEL_RECORD, group_nodes_configmap, runtime_name
from nvcre_argo.plan.model import Plan
from nvcre_argo.plan.planner import plan_category
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.resolve.values import GpuValues, gpu_values
from nvcre_argo.results import base64_text, gzip_bytes
from nvcre_argo.steps.context import StepContext

GROUP_NODES_KEY = "group-nodes.json.gz"
PLAN_KEY = "plan.json"
RECORD_PLAN = "plan"


def plan_step(kube: KubeClient, context: StepContext, *, report: Callable[[str], None] = print) -> Plan:
    """Plan the category on the live cluster; raises PlanError (with the selector) when nothing can run."""
    nodes, _ = kube.list(NODES)
    plan = plan_category(nodes, context.category)
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
    report(
        f"{context.category.domain}/{context.category.variant}: {len(plan.candidates)} node(s), "
        f"{len(plan.excluded)} excluded, {len(plan.groups)} group(s), GPU architecture "
        f"{plan.architecture or 'unknown'} ({gpu.gpus_per_node} GPUs per node)"
    )
    for exclusion in plan.excluded:
        report(f"excluded {exclusion.node}: {exclusion.reason}: {exclusion.message}")
    return plan


def plan_configmap(context: StepContext, plan: Plan) -> dict[str, Any]:
    group_nodes = {group.name: list(group.nodes) for group in plan.groups}
    compressed = gzip_bytes(json.dumps(group_nodes, sort_keys=True).encode())
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": group_nodes_configmap(context.workflow_uid),
            "namespace": context.namespace,
            "labels": context.labels(**{LABEL_RECORD: RECORD_PLAN}),
            "ownerReferences": context.owner_references(),
        },
        "data": {PLAN_KEY: plan.to_json()},
        "binaryData": {GROUP_NODES_KEY: base64_text(compressed)},
    }


def load_plan(kube: KubeClient, context: StepContext) -> Plan:
    """The plan the plan step published for this Workflow (the run and record steps read it)."""
    configmap = kube.get(CONFIGMAPS, group_nodes_configmap(context.workflow_uid), context.namespace)
    if configmap is None:
        raise LookupError(f"ConfigMap {group_nodes_configmap(context.workflow_uid)} (the plan) does not exist")
    return Plan.from_json(configmap["data"][PLAN_KEY])


def planned_gpu_values(kube: KubeClient, context: StepContext) -> GpuValues:
    return gpu_values(context.category, load_plan(kube, context).architecture)
