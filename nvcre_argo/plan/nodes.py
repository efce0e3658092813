"""Read the few fields of a Kubernetes Node (as the API's JSON) that planning depends on.

Nodes arrive as plain dicts straight from the API, where any optional field may be absent; every access goes
through here so an absent label map, taint list or allocatable map means "none", never a KeyError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvcre_argo.plan.model import PlanError
from nvcre_argo.quantity import parse_quantity

Node = Mapping[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def slim_node(node: Node) -> dict[str, Any]:
    """Only what planning reads (name, labels, taints, unschedulable, providerID for the platform, allocatable
    GPUs and RDMA NICs): a listed Node carries images, conditions and managed fields worth tens of KiB, and the
    plan step holds thousands of them."""
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    slim: dict[str, Any] = {"metadata": {"name": metadata.get("name"), "labels": metadata.get("labels") or {}}}
    slim["spec"] = {key: spec[key] for key in ("taints", "unschedulable", "providerID") if key in spec}
    kept = {name: value for name, value in allocatable.items() if name == GPU_RESOURCE or is_rdma_nic(name)}
    if kept:
        slim["status"] = {"allocatable": dict(sorted(kept.items()))}
    return slim


def is_rdma_nic(name: str) -> bool:
    """The extended resources on-prem NIC auto-detection chooses from (`nvidia.com/mlnxnics`, `rdma/*`)."""
    return name == "nvidia.com/mlnxnics" or name.startswith("rdma/")


def node_name(node: Node) -> str:
    name = (node.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise PlanError("a Node object without metadata.name was listed; cannot plan with it")
    return name


def node_labels(node: Node) -> Mapping[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def node_taints(node: Node) -> list[Mapping[str, Any]]:
    taints = (node.get("spec") or {}).get("taints") or []
    return [taint for taint in taints if isinstance(taint, Mapping)]


def is_cordoned(node: Node) -> bool:
    return (node.get("spec") or {}).get("unschedulable") is True


def allocatable_gpus(node: Node) -> int | None:
    """`status.allocatable["nvidia.com/gpu"]` as a whole number; None when absent or not a quantity."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
    if value is None:
        return None
    parsed = parse_quantity(value if isinstance(value, (int, str)) else str(value))
    return None if parsed is None else int(parsed)


def clique_of(node: Node) -> str | None:
    """The node's NVLink domain (`nvidia.com/gpu.clique`, set by GPU Feature Discovery), if labelled."""
    value = node_labels(node).get(CLIQUE_LABEL)
    return value if value else None
