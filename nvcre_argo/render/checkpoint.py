"""The checkpoint PVC of a category that sets `enableCheckpoint: true` (nvcre-contract.md §7.10).

ReadWriteMany, because every rank of a multi-node group writes its shard of a Megatron-LM checkpoint into
the same directory; `storageSize` (10Ti by default) and `storageClassName` (the cluster's default class when
unset). It is owned by the category Workflow, so deleting the run deletes it; what then happens to the volume
is the StorageClass's reclaim policy. nvcre-argo never touches PersistentVolumes (the reference patches
Released ones to be deleted; that needs cluster-wide write access to volumes, which this tool does not take).
"""

from __future__ import annotations

from typing import Any

from nvcre_argo.names import LABEL_CATEGORY_INDEX, LABEL_MANAGED_BY, MANAGED_BY
from nvcre_argo.resolve.category import ResolvedCheckpoint


def render_checkpoint_claim(
    checkpoint: ResolvedCheckpoint,
    *,
    name: str,
    namespace: str | None,
    category_index: int,
    owner_references: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The PersistentVolumeClaim manifest."""
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {LABEL_CATEGORY_INDEX: str(category_index), LABEL_MANAGED_BY: MANAGED_BY},
    }
    if namespace:
        metadata["namespace"] = namespace
    if owner_references:
        metadata["ownerReferences"] = owner_references
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": checkpoint.storage_size}},
    }
    if checkpoint.storage_class_name:
        spec["storageClassName"] = checkpoint.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}
