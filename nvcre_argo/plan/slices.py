"""The GPU architecture from DRA ResourceSlices, for clusters whose nodes carry no `nvidia.com/gpu.product`
label (DRA-only GPU stacks without GPU Feature Discovery, e.g. Nscale).

The NVIDIA DRA driver (`gpu.nvidia.com`) publishes each GPU as a device with a `productName` attribute; the
name is sanitised the way GFD builds its label (spaces to hyphens) and voted on like the labels: one vote per
node (its most common product), `vfio` pass-through devices skipped. Pure: the plan step lists the slices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from nvcre_argo.resolve.gpu import architecture_of

GPU_DRIVER = "gpu.nvidia.com"


def slice_products(slices: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> dict[str, str]:
    """Each of `nodes` that has a GPU slice, with its most common GPU product (GFD spelling)."""
    wanted = set(nodes)
    found: dict[str, Counter[str]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != GPU_DRIVER or node not in wanted:
            continue
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            if _text(attributes.get("type")) == "vfio":
                continue
            product = _text(attributes.get("productName"))
            if product:
                found.setdefault(node, Counter())[product.strip().replace(" ", "-")] += 1
    return {node: counts.most_common(1)[0][0] for node, counts in sorted(found.items())}


def architecture_from_slices(slices: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> str | None:
    """The majority architecture of the nodes' GPU slices (a tie goes to the earliest node by name); None when
    no node has a GPU slice of a known architecture."""
    per_node = [architecture_of(product) for product in slice_products(slices, nodes).values()]
    votes = [arch for arch in per_node if arch is not None]
    if not votes:
        return None
    counts = Counter(votes)
    best = max(counts.values())
    return next(arch for arch in votes if counts[arch] == best)


def _text(attribute: Any) -> str | None:
    """A DRA device attribute's string (`{"string": "..."}`), or None."""
    if isinstance(attribute, Mapping) and isinstance(attribute.get("string"), str):
        return str(attribute["string"])
    return None
