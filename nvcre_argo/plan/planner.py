"""`plan_category`: one category's plan from the cluster's Node objects, in the reference's order (§7.2-§7.3).

target match -> cordoned out -> GPU-architecture vote -> the architecture's GPU values -> capacity filter ->
groups (under `testScale: diagnose`: the nodes' domains its rounds are planned from). The per-node GPU
request depends on the architecture the vote found (4 on GB200, 8 on H100, unless `gpusPerNode` is set), so
the capacity filter runs after the vote, never before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from nvcre_argo.plan.grouping import group_nodes, is_diagnose, isolation_of
from nvcre_argo.plan.model import Exclusion, Plan, PlanError
from nvcre_argo.plan.nodes import Node, node_name
from nvcre_argo.plan.selection import drop_cordoned, filter_gpu_capacity, select_candidates, vote_architecture
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.values import gpu_values


def plan_category(nodes: Iterable[Node], category: ResolvedCategory) -> Plan:
    """The plan of one category over the listed nodes; PlanError (prefixed with `domain/variant`) when the
    nodes cannot run it."""
    try:
        return _plan(list(nodes), category)
    except PlanError as error:
        raise PlanError(f"{category.key}: {error}") from None


def _plan(nodes: list[Node], category: ResolvedCategory) -> Plan:
    candidates = select_candidates(nodes, category.target)
    schedulable, cordoned = drop_cordoned(candidates, category.target)
    architecture, same_gpu, minority = vote_architecture(schedulable, category.gpu_architecture)
    gpu = gpu_values(category, architecture)
    eligible, short = filter_gpu_capacity(same_gpu, gpu.gpus_per_node)
    excluded = sorted([*cordoned, *minority, *short], key=lambda item: item.node)
    if not eligible:
        raise PlanError(f"all {len(candidates)} node(s) matching the target were excluded ({_count_reasons(excluded)})")
    diagnose = is_diagnose(category)
    return Plan(
        architecture=architecture,
        candidates=tuple(node_name(node) for node in candidates),
        excluded=tuple(excluded),
        groups=() if diagnose else group_nodes(eligible, category, gpu),
        isolation=isolation_of(eligible, category) if diagnose else None,
    )


def _count_reasons(excluded: list[Exclusion]) -> str:
    counts = Counter(item.reason for item in excluded)
    return ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
