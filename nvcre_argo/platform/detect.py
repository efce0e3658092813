"""Which platform a category's nodes run on, read from `node.spec.providerID` and a few labels.

Why it matters: a collective on AWS without EFA, on GKE without TCPXO or on Azure without InfiniBand runs over
TCP at a fraction of the fabric's bandwidth, and a bandwidth threshold then fails healthy nodes. The rules are
the reference's (platforms.md (a)), in its order, including its traps: every `metal3://` node is `mistral`,
`kubevirt://` is `togetherai` only with the `node-role.together.ai/worker` label, and an empty providerID is
`forge` only on Forge's hostname or site label, `onprem` otherwise. Anything unlisted is `onprem`: the arms of
an unknown cloud are never guessed. Pure: Node objects in, a name out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre_argo.errors import NvcreError

PLATFORMS = ("aws", "azure", "forge", "gcp", "mistral", "nscale", "oci", "onprem", "togetherai")
HOSTNAME_LABEL = "kubernetes.io/hostname"
FORGE_SITE_LABEL = "nke.nvidia.com/site-name"
TOGETHER_WORKER_LABEL = "node-role.together.ai/worker"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# (providerID prefix, platform), checked in order; the first match wins.
_PREFIXES = (
    ("aws://", "aws"),
    ("gce://", "gcp"),
    ("azure://", "azure"),
    ("ocid1.", "oci"),
    ("nscale://", "nscale"),
    ("openstack://", "onprem"),
    ("metal3://", "mistral"),
)


class PlatformError(NvcreError):
    """The target's nodes disagree on their platform; the message lists each platform with a node of it."""


@dataclass(frozen=True)
class Detection:
    """The platform and the nodes' common instance type (None when they differ or are unlabelled)."""

    platform: str
    instance_type: str | None


def platform_of(node: Mapping[str, Any]) -> str:
    """One node's platform by the reference's rules."""
    provider_id = str((node.get("spec") or {}).get("providerID") or "")
    labels = _labels(node)
    if not provider_id:
        if "forge" in labels.get(HOSTNAME_LABEL, "") or FORGE_SITE_LABEL in labels:
            return "forge"
        return "onprem"
    if provider_id.startswith("kubevirt://"):
        return "togetherai" if TOGETHER_WORKER_LABEL in labels else "onprem"
    return next((platform for prefix, platform in _PREFIXES if provider_id.startswith(prefix)), "onprem")


def detect_platform(nodes: Iterable[Mapping[str, Any]]) -> Detection | None:
    """The platform every node agrees on (None without nodes); PlatformError when they disagree, since one
    TrainingRuntime serves the whole category and cannot be right for two fabrics at once."""
    ordered = sorted(nodes, key=_name)
    by_platform: dict[str, str] = {}
    for node in ordered:
        by_platform.setdefault(platform_of(node), _name(node))
    if not by_platform:
        return None
    if len(by_platform) > 1:
        listed = ", ".join(f"{platform} (e.g. node {node})" for platform, node in sorted(by_platform.items()))
        raise PlatformError(f"heterogeneous platforms detected: {listed}; target one platform per Certification")
    (platform,) = by_platform
    return Detection(platform=platform, instance_type=common_instance_type(ordered))


def common_instance_type(nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """The `node.kubernetes.io/instance-type` all nodes share, or None."""
    found = {_labels(node).get(INSTANCE_TYPE_LABEL) for node in nodes}
    return next(iter(found)) if len(found) == 1 else None


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")
