"""The onExit step: delete this Workflow's TrainJobs that are still running.

Argo stopping, a deadline, or a failure does not stop a TrainJob (owner references only act when the Workflow
object is deleted), and a forgotten TrainJob keeps GPUs busy. Finished TrainJobs are kept for inspection.
Nodes are never touched.
"""

from __future__ import annotations

from collections.abc import Callable

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import TRAINJOBS, owned_by
from nvcre_argo.names import LABEL_CATEGORY_INDEX, LABEL_CERTIFICATION
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.workload import classify


def cleanup_step(kube: KubeClient, context: StepContext, *, report: Callable[[str], None] = print) -> list[str]:
    """Names of the TrainJobs deleted."""
    selector = f"{LABEL_CERTIFICATION}={context.certification},{LABEL_CATEGORY_INDEX}={context.category.index}"
    trainjobs, _ = kube.list(TRAINJOBS, context.namespace, label_selector=selector)
    deleted = []
    for trainjob in trainjobs:
        if not owned_by(trainjob, context.workflow_uid):
            continue
        if classify(trainjob, []).terminal:
            continue
        name = trainjob["metadata"]["name"]
        if kube.delete(TRAINJOBS, name, context.namespace):
            deleted.append(name)
            report(f"deleted unfinished TrainJob/{name}")
    if not deleted:
        report("no unfinished TrainJob to delete")
    return sorted(deleted)
