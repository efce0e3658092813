"""Which nodes run a category: the target match, then the reference's three exclusions (§7.2), in order.

1. Candidates: nodes matching every filter the target sets (nodeSelector AND matchExpressions AND nodeNames
   AND taintSelectors), sorted by name. None at all is an error that names the selector.
2. Cordoned nodes (`spec.unschedulable`) are left out, unless the target taint-selects
   `node.kubernetes.io/unschedulable` (then cordoned nodes are exactly what the user asked for).
3. GPU architecture: a majority vote over the `nvidia.com/gpu.product` label; nodes of another architecture
   are left out. A compile-time architecture (`--gpu-arch`) wins over the vote.
4. GPU capacity: a node whose allocatable `nvidia.com/gpu` is a positive number below the per-node request is
   left out. Missing or zero allocatable is kept: that is what a restarting device plugin looks like, and the
   workload will wait for it. If every node is short, the run cannot start: an error names both counts.

Left-out nodes are reported as `Exclusion`s (the run is then INCOMPLETE, not FAILED); they are never
attributed a failure, because nothing ran on them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nvcre_argo.api.spec import NodeSelectorRequirement, TaintSelector, TargetSpec
from nvcre_argo.plan.model import Exclusion, PlanError
from nvcre_argo.plan.nodes import (
    GPU_RESOURCE,
    UNSCHEDULABLE_TAINT,
    Node,
    allocatable_gpus,
    is_cordoned,
    node_labels,
    node_name,
    node_taints,
)
from nvcre_argo.resolve.gpu import GPU_PRODUCT_LABEL, architecture_of

NAMES_SHOWN = 5
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}")
_LABEL_VALUE = re.compile(rf"({_LABEL_NAME})?")


def matches_target(node: Node, target: TargetSpec) -> bool:
    """Whether the node satisfies every filter the target sets; an unset or empty filter (`nodeNames: []`)
    does not filter, as in the reference's Go (`len(...) > 0`), so an empty target matches every node."""
    labels = node_labels(node)
    if any(labels.get(key) != value for key, value in (target.node_selector or {}).items()):
        return False
    if not all(_matches_expression(labels, requirement) for requirement in target.match_expressions or []):
        return False
    if target.node_names and node_name(node) not in target.node_names:
        return False
    taints = node_taints(node)
    return all(any(_matches_taint(taint, selector) for taint in taints) for selector in target.taint_selectors or [])


def target_label_selector(target: TargetSpec) -> str | None:
    """A Kubernetes label selector the API server can filter Nodes with before they are listed, or None.

    Only a pre-filter: it selects a superset of what `matches_target` accepts (nodeNames and taints are not
    label-selectable, and a requirement the selector syntax cannot express is left out), and `matches_target`
    stays the judge. Same semantics as the Python match: `NotIn` also selects nodes without the label.
    """
    parts = [
        f"{key}={value}"
        for key, value in sorted((target.node_selector or {}).items())
        if _LABEL_KEY.fullmatch(key) and _LABEL_VALUE.fullmatch(value)
    ]
    for requirement in target.match_expressions or []:
        values = requirement.values or []
        if not _LABEL_KEY.fullmatch(requirement.key) or not all(_LABEL_VALUE.fullmatch(value) for value in values):
            continue
        if requirement.operator in ("In", "NotIn") and values:
            parts.append(f"{requirement.key} {requirement.operator.lower()} ({','.join(sorted(values))})")
        elif requirement.operator == "Exists":
            parts.append(requirement.key)
        elif requirement.operator == "DoesNotExist":
            parts.append(f"!{requirement.key}")
    return ",".join(parts) or None


def _matches_expression(labels: Mapping[str, str], requirement: NodeSelectorRequirement) -> bool:
    """Kubernetes label-selector semantics: NotIn also matches a node without the label."""
    present = requirement.key in labels
    values = requirement.values or []
    if requirement.operator == "In":
        return present and labels[requirement.key] in values
    if requirement.operator == "NotIn":
        return not present or labels[requirement.key] not in values
    if requirement.operator == "Exists":
        return present
    return not present


def _matches_taint(taint: Mapping[str, Any], selector: TaintSelector) -> bool:
    """Same key; an empty (or unset) value or effect in the selector matches any."""
    if taint.get("key") != selector.key:
        return False
    if selector.value and (taint.get("value") or "") != selector.value:
        return False
    return not selector.effect or taint.get("effect") == selector.effect


def describe_target(target: TargetSpec) -> str:
    """The target in one line, for messages: `nodeSelector nvidia.com/gpu.present=true; nodeNames a,b`."""
    parts = []
    if target.node_selector:
        parts.append(
            "nodeSelector " + ",".join(f"{key}={value}" for key, value in sorted(target.node_selector.items()))
        )
    if target.match_expressions:
        parts.append("matchExpressions " + ", ".join(_describe_expression(item) for item in target.match_expressions))
    if target.node_names:
        parts.append("nodeNames " + shorten_names(target.node_names))
    if target.taint_selectors:
        parts.append("taintSelectors " + ",".join(_describe_taint(item) for item in target.taint_selectors))
    return "; ".join(parts) or "an empty target (every node)"


def _describe_expression(requirement: NodeSelectorRequirement) -> str:
    if requirement.operator in ("In", "NotIn"):
        return f"{requirement.key} {requirement.operator} ({','.join(requirement.values or [])})"
    return f"{requirement.key} {requirement.operator}"


def _describe_taint(selector: TaintSelector) -> str:
    text = selector.key + (f"={selector.value}" if selector.value else "")
    return text + (f":{selector.effect}" if selector.effect else "")


def shorten_names(names: Sequence[str], shown: int = NAMES_SHOWN) -> str:
    """`a,b,c,d,e (+7 more)`: node lists in messages stay one readable line at any cluster size."""
    head = ",".join(names[:shown])
    return head + (f" (+{len(names) - shown} more)" if len(names) > shown else "")


def select_candidates(nodes: Iterable[Node], target: TargetSpec) -> list[Node]:
    """The nodes matching the target, sorted by name; PlanError naming the selector when none does."""
    listed = list(nodes)
    candidates = sorted((node for node in listed if matches_target(node, target)), key=node_name)
    if candidates:
        return candidates
    message = f"no node matches the target ({describe_target(target)}); {len(listed)} node(s) listed"
    if target.node_names:
        known = {node_name(node) for node in listed}
        missing = [name for name in target.node_names if name not in known]
        if missing:
            message += f"; nodeNames not found: {shorten_names(missing)}"
    raise PlanError(message)


def drop_cordoned(nodes: Sequence[Node], target: TargetSpec) -> tuple[list[Node], list[Exclusion]]:
    """Cordoned nodes out, unless the target opts in by taint-selecting `node.kubernetes.io/unschedulable`."""
    if any(selector.key == UNSCHEDULABLE_TAINT for selector in target.taint_selectors or []):
        return list(nodes), []
    kept, excluded = [], []
    for node in nodes:
        if is_cordoned(node):
            message = (
                "node is cordoned (spec.unschedulable); taint-select "
                f"{UNSCHEDULABLE_TAINT} in spec.target to certify cordoned nodes"
            )
            excluded.append(Exclusion(node_name(node), "Cordoned", message))
        else:
            kept.append(node)
    return kept, excluded


def gpu_architecture_of(node: Node) -> str | None:
    """The node's architecture key from `nvidia.com/gpu.product`, or None when the node is unlabelled.

    A product no known architecture matches is keyed by its own (lower-cased) name, so two different
    unknown GPUs still count as different architectures; their defaults are the unknown-GPU fallback.
    """
    product = node_labels(node).get(GPU_PRODUCT_LABEL)
    if not product:
        return None
    return architecture_of(product) or product.lower()


def vote_architecture(
    nodes: Sequence[Node], compile_time: str | None = None
) -> tuple[str | None, list[Node], list[Exclusion]]:
    """(architecture, kept nodes, minority exclusions).

    Labelled nodes vote; unlabelled nodes neither vote nor get excluded. A tie goes to the architecture of
    the earliest voting node by name. `compile_time` (the compiler's `--gpu-arch`) decides instead of the vote.
    """
    ordered = sorted(nodes, key=node_name)
    votes = [(node, gpu_architecture_of(node)) for node in ordered]
    counts = Counter(arch for _, arch in votes if arch is not None)
    if compile_time:
        winner: str | None = compile_time
        why = f"the architecture {compile_time} set at compile time (--gpu-arch)"
    elif counts:
        best = max(counts.values())
        winner = next(arch for _, arch in votes if arch is not None and counts[arch] == best)
        why = f"the majority architecture {winner} ({counts[winner]} of {sum(counts.values())} labelled nodes)"
    else:
        return None, list(ordered), []
    kept, excluded = [], []
    for node, arch in votes:
        if arch is None or arch == winner:
            kept.append(node)
            continue
        product = node_labels(node)[GPU_PRODUCT_LABEL]
        message = f"GPU {product} ({GPU_PRODUCT_LABEL}) is architecture {arch}, not {why}"
        excluded.append(Exclusion(node_name(node), "MinorityGPUArchitecture", message))
    return winner, kept, excluded


def filter_gpu_capacity(nodes: Sequence[Node], gpus_per_node: int) -> tuple[list[Node], list[Exclusion]]:
    """Nodes short of the per-node GPU request out; PlanError when that leaves none (required vs best)."""
    kept, excluded = [], []
    best: tuple[int, str] | None = None
    for node in nodes:
        available = allocatable_gpus(node)
        if available is None or available <= 0 or available >= gpus_per_node:
            kept.append(node)
            continue
        name = node_name(node)
        if best is None or available > best[0]:
            best = (available, name)  # nodes come sorted by name: the earliest of equal counts stays
        message = f"allocatable {GPU_RESOURCE} is {available}, below the {gpus_per_node} requested per node"
        excluded.append(Exclusion(name, "InsufficientGPUs", message))
    if nodes and not kept and best is not None:
        raise PlanError(
            f"no node can supply the {gpus_per_node} GPUs requested per node (gpusPerNode); best available is "
            f"{best[0]} allocatable {GPU_RESOURCE} (node {best[1]})"
        )
    return kept, excluded
