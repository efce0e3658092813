"""The `TrainJob` of one node group (Kubeflow Trainer v2.2+/v2.3 API).

Labels: the resolved workload labels (catalog → global → category → queue), plus the controller-owned keys
linking it to its certification, category and group. The group is pinned to its nodes with a required
`kubernetes.io/hostname` node affinity through `runtimePatches` (the v2.2+ way to patch pod templates), on the
replicated jobs the catalog entry names.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.catalog.placeholders import fill_placeholders
from nvcre_argo.names import (
    LABEL_CATEGORY_INDEX,
    LABEL_CERTIFICATION,
    LABEL_GROUP,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    PATCH_MANAGER,
)
from nvcre_argo.podspec import set_env
from nvcre_argo.render.runtime import TRAINER_API_VERSION
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.values import GpuValues, placeholder_values

HOSTNAME_LABEL = "kubernetes.io/hostname"
# Where a checkpointing training script saves and loads (`--save`/`--load`), set per TrainJob.
CHECKPOINT_DIR_ENV = "CHECKPOINT_DIR"


def render_trainjob(
    category: ResolvedCategory,
    gpu: GpuValues,
    *,
    name: str,
    namespace: str | None,
    certification: str,
    runtime_name: str,
    group: str,
    nodes: Sequence[str],
    owner_references: list[dict[str, Any]] | None = None,
    checkpoint_dir: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The TrainJob manifest for one group of `nodes`; a checkpointing category's trainer gets
    `CHECKPOINT_DIR`, the directory of this test of the group (its restarts resume from there)."""
    # An unpinned group names no nodes: the scheduler picks exactly nodesPerJob of them.
    num_nodes = len(nodes) or category.options.nodes_per_job or 1
    trainer = fill_placeholders(copy.deepcopy(category.entry.trainer), placeholder_values(category, gpu, num_nodes))
    trainer["numNodes"] = num_nodes
    if gpu.forwarded_env and "mpi" in category.entry.runtime.get("mlPolicy", {}):
        # The ranks start over ssh and inherit none of the worker container's environment: mpirun forwards the
        # platform arms' variables from the launcher, which holds them (`-x NAME` exports the launcher's value).
        forwarded = [item for name in gpu.forwarded_env for item in ("-x", name)]
        trainer["args"] = [*forwarded, *trainer.get("args", [])]
    if category.image:
        trainer["image"] = category.image
    if category.checkpoint is not None and checkpoint_dir is not None:
        set_env(trainer, CHECKPOINT_DIR_ENV, checkpoint_dir)
    labels = {
        **category.workload_labels,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_CERTIFICATION: certification,
        LABEL_CATEGORY_INDEX: str(category.index),
        LABEL_GROUP: group,
    }
    metadata: dict[str, Any] = {"name": name, "labels": dict(sorted(labels.items()))}
    if namespace:
        metadata["namespace"] = namespace
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    if owner_references:
        metadata["ownerReferences"] = owner_references
    spec: dict[str, Any] = {
        "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": runtime_name},
        "trainer": trainer,
    }
    placement = _place(category, nodes)
    if placement is not None:
        spec["runtimePatches"] = [placement]
    return {"apiVersion": TRAINER_API_VERSION, "kind": "TrainJob", "metadata": metadata, "spec": spec}


def _target_requirements(target: TargetSpec) -> list[dict[str, Any]]:
    """The Certification's target as node-affinity requirements (taints are matched by tolerations)."""
    requirements: list[dict[str, Any]] = [
        {"key": key, "operator": "In", "values": [value]} for key, value in sorted((target.node_selector or {}).items())
    ]
    for expression in target.match_expressions or []:
        requirement: dict[str, Any] = {"key": expression.key, "operator": expression.operator}
        if expression.values is not None:
            requirement["values"] = list(expression.values)
        requirements.append(requirement)
    if target.node_names:
        requirements.append({"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(target.node_names)})
    return requirements


def _place(category: ResolvedCategory, nodes: Sequence[str]) -> dict[str, Any] | None:
    """Pinned groups: exactly their nodes. Unpinned: any node of the target, the scheduler chooses. None when
    there is nothing to require (an empty node selector term would match no node at all)."""
    if category.options.placement != "Unpinned" and nodes:
        requirements = [{"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(nodes)}]
    else:
        requirements = _target_requirements(category.target)
    if not requirements:
        return None
    affinity: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": requirements}]
            }
        }
    }
    replicated_jobs = category.entry.pinned_replicated_jobs
    return {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": job, "template": {"spec": {"template": {"spec": {"affinity": affinity}}}}}
                        for job in replicated_jobs
                    ]
                }
            }
        },
    }
