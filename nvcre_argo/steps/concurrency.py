"""How many node groups of a category run at once (`maxConcurrent`) with a pod per group: the limit of an
Argo semaphore. (A shared runner holds the limit itself; see `steps.shared_runner`.)

The run-group template acquires a semaphore whose limit Argo reads from a ConfigMap named after the category
Workflow (`{{workflow.name}}-concurrency`, key `max-concurrent`); the plan step writes that ConfigMap before
any group starts. Why not the Workflow's `spec.parallelism`: a Workflow submitted under Argo's
`templateReferencing: Strict` may set only the fields Argo allows a submitter to override, and parallelism is
not one of them; template-level `parallelism` is a fixed integer in a template shared by every certification.
A semaphore's ConfigMap reference is substituted like the rest of the template, so the limit is per
Workflow and still chosen by the Certification, and it also counts the diagnose rounds' groups (an overflow
group runs in its host's step, so in the host's slot). The ConfigMap is owned by the Workflow, so it goes with it.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo import contract
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.names import concurrency_configmap
from nvcre_argo.plan.model import Plan
from nvcre_argo.steps.context import StepContext


def concurrency_limit(plan: Plan, max_concurrent: int | None) -> int:
    """`maxConcurrent`, or when unset a limit no fan-out reaches: every group holds at least one of the
    plan's nodes, and the groups running at once never share one."""
    if max_concurrent:
        return max_concurrent
    return max(1, len(plan.candidates), len(plan.groups))


def concurrency_configmap_manifest(context: StepContext, plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": concurrency_configmap(context.workflow_name),
            "namespace": context.namespace,
            "labels": context.labels(),
            "ownerReferences": context.owner_references(),
        },
        "data": {contract.CONCURRENCY_KEY: str(concurrency_limit(plan, context.category.options.max_concurrent))},
    }


def publish_concurrency(kube: KubeClient, context: StepContext, plan: Plan) -> int:
    """Write the limit the group semaphore reads (before any group starts); returns it."""
    manifest = concurrency_configmap_manifest(context, plan)
    kube.create_or_replace(manifest)
    return int(manifest["data"][contract.CONCURRENCY_KEY])
