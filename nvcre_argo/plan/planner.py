"""`plan_category`: one category's plan from the cluster's Node objects, in the reference's order (§7.2-§7.3).

target match -> cordoned out -> GPU-architecture vote -> the architecture's GPU values -> capacity filter ->
groups (under `testScale: diagnose`: the nodes' domains its rounds are planned from). The per-node GPU
request depends on the architecture the vote found (4 on GB200, 8 on H100, unless `gpusPerNode` is set), so
the capacity filter runs after the vote, never before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from nvcre_argo.plan.grouping import group_nodes, is_diagnose, isolation_of
from nvcre_argo.plan.model import Exclusion, Plan, PlanError, PlatformChoice
from nvcre_argo.plan.nodes import Node, node_name
from nvcre_argo.plan.platform import detect_nic_resource, platform_gpu_values, select_arms
from nvcre_argo.plan.selection import drop_cordoned, filter_gpu_capacity, select_candidates, vote_architecture
from nvcre_argo.platform.arms import PlatformArm
from nvcre_argo.platform.detect import PlatformError, common_instance_type, detect_platform
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.values import gpu_values


def plan_category(nodes: Iterable[Node], category: ResolvedCategory, *, arms: Sequence[PlatformArm] = ()) -> Plan:
    """The plan of one category over the listed nodes, with the platform and which of `arms` apply;
    PlanError (prefixed with `domain/variant`) when the nodes cannot run it."""
    try:
        return _plan(list(nodes), category, arms)
    except (PlanError, PlatformError) as error:
        raise PlanError(f"{category.key}: {error}") from None


def _plan(nodes: list[Node], category: ResolvedCategory, arms: Sequence[PlatformArm]) -> Plan:
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
        platform=_choose_platform(eligible, category, architecture, arms),
        architecture=architecture,
        candidates=tuple(node_name(node) for node in candidates),
        excluded=tuple(excluded),
        groups=() if diagnose else group_nodes(eligible, category, gpu),
        isolation=isolation_of(eligible, category) if diagnose else None,
    )


# Where the reference auto-detects an on-prem NIC resource (ADR-075, widened to x86 HGX by ADR-094): the GB and
# Blackwell HGX workloads that move data between nodes, never single-node DCGM.
NIC_DETECTION_ARCHITECTURES = ("gb200", "gb300", "b200", "b300")
NIC_DOMAINS = ("communication", "training")


def _choose_platform(
    nodes: list[Node], category: ResolvedCategory, architecture: str | None, arms: Sequence[PlatformArm]
) -> PlatformChoice | None:
    """Detected from the nodes that will run (a pinned platform skips the rules, not the instance type); the
    arms that match; on-prem GB200/GB300/B200/B300 collectives and training, the one NIC resource every node
    has enough of, unless nicResourceName is set."""
    detection = detect_platform(nodes) if category.platform is None else None
    if category.platform is None and detection is None:
        return None
    name = category.platform or (detection.platform if detection else "onprem")
    instance_type = detection.instance_type if detection else common_instance_type(nodes)
    applied = select_arms(category, arms, platform=name, architecture=architecture, instance_type=instance_type)
    nic = None
    if (
        name == "onprem"
        and category.options.nic_resource_name is None
        and category.domain in NIC_DOMAINS
        and architecture in NIC_DETECTION_ARCHITECTURES
    ):
        nic = detect_nic_resource(nodes, platform_gpu_values(category, architecture, applied).mlnx_per_node)
    return PlatformChoice(
        name=name,
        source="detected" if category.platform is None else "pinned",
        instance_type=instance_type,
        arms=tuple(arm.name for arm in applied),
        nic_resource=nic,
    )


def _count_reasons(excluded: list[Exclusion]) -> str:
    counts = Counter(item.reason for item in excluded)
    return ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
