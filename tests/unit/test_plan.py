"""Planning: which nodes run a category, which are left out and why, and how the rest are grouped.

Expected values come from the reference (`nvcre-contract.md` §7.2 discovery and filtering, §7.3 grouping,
§7.5 test scales, §6.4 GPU defaults), worked out by hand on small node lists built with `make_node`.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.loading import load_certifications
from nvcre_argo.plan.model import Exclusion, NodeGroup, Plan, PlanError
from nvcre_argo.plan.nodes import slim_node
from nvcre_argo.plan.planner import plan_category
from nvcre_argo.plan.selection import describe_target, target_label_selector
from nvcre_argo.plan.storage import plan_binary_data, plan_from_configmap
from nvcre_argo.resolve.category import ResolvedCategory, resolve_certification

H100 = "NVIDIA-H100-80GB-HBM3"
B200 = "NVIDIA-B200"
GB200 = "NVIDIA-GB200"
GPU_PRESENT = {"nvidia.com/gpu.present": "true"}
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}
NEMOTRON_8B = {"domain": "training", "variant": "nemotron5-8b"}
NEMOTRON_56B = {"domain": "training", "variant": "nemotron5-56b"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


# --- helpers -------------------------------------------------------------------------------------------------


def make_node(
    name: str,
    *,
    product: str | None = H100,
    gpus: str | None = "8",
    clique: str | None = None,
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as the API returns it, with only the fields planning reads."""
    all_labels = {**GPU_PRESENT, **(labels or {})}
    if product is not None:
        all_labels["nvidia.com/gpu.product"] = product
    if clique is not None:
        all_labels["nvidia.com/gpu.clique"] = clique
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": all_labels}}
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    node["spec"] = spec
    node["status"] = {"allocatable": {"cpu": "64"} | ({"nvidia.com/gpu": gpus} if gpus is not None else {})}
    return node


def make_nodes(count: int, **fields: Any) -> list[dict[str, Any]]:
    return [make_node(f"n{index:02d}", **fields) for index in range(count)]


@cache
def _catalog() -> Catalog:
    return load_catalog()


def resolve(category: dict[str, Any], *, target: dict[str, Any] | None = None, **spec: Any) -> ResolvedCategory:
    """One category of a minimal Certification, resolved against the built-in catalog."""
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "t"},
        "spec": {"target": target or {"nodeSelector": GPU_PRESENT}, "categories": [category], **spec},
    }
    loaded = load_certifications(json.dumps(document), "t.yaml")
    resolved, errors = resolve_certification(loaded[0].certification.spec, _catalog())
    assert not errors, [error.render() for error in errors]
    return resolved[0]


def with_options(category: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {**category, "options": options}


def edited_by_hand(category: ResolvedCategory, **options: Any) -> ResolvedCategory:
    """A category argument changed after compiling (e.g. in the Argo UI), so the compiler's checks were skipped:
    the plan step must still refuse what it cannot honour."""
    changed = category.options.model_copy(update=options)
    return category.model_copy(update={"options": changed})


def group_nodes(plan: Plan) -> list[list[str]]:
    return [list(group.nodes) for group in plan.groups]


def reasons(plan: Plan) -> dict[str, str]:
    return {item.node: item.reason for item in plan.excluded}


# --- target matching -----------------------------------------------------------------------------------------


def test_candidates_are_the_nodes_matching_the_node_selector_sorted_by_name() -> None:
    nodes = [make_node("n2"), make_node("cpu-1", labels={"nvidia.com/gpu.present": "false"}), make_node("n1")]
    plan = plan_category(nodes, resolve(ALL_REDUCE))
    assert plan.candidates == ("n1", "n2")
    assert group_nodes(plan) == [["n1", "n2"]]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param({"key": "pool", "operator": "In", "values": ["a", "b"]}, ["in-a", "in-b"], id="In"),
        pytest.param({"key": "pool", "operator": "NotIn", "values": ["a"]}, ["in-b", "in-c", "none"], id="NotIn"),
        pytest.param({"key": "pool", "operator": "Exists"}, ["in-a", "in-b", "in-c"], id="Exists"),
        pytest.param({"key": "pool", "operator": "DoesNotExist"}, ["none"], id="DoesNotExist"),
    ],
)
def test_match_expressions_follow_kubernetes_selector_semantics(
    expression: dict[str, Any], expected: list[str]
) -> None:
    nodes = [
        make_node("in-a", labels={"pool": "a"}),
        make_node("in-b", labels={"pool": "b"}),
        make_node("in-c", labels={"pool": "c"}),
        make_node("none"),
    ]
    plan = plan_category(nodes, resolve(ALL_REDUCE, target={"matchExpressions": [expression]}))
    assert list(plan.candidates) == expected


def test_node_names_restrict_the_candidates() -> None:
    plan = plan_category(make_nodes(4), resolve(ALL_REDUCE, target={"nodeNames": ["n03", "n01"]}))
    assert plan.candidates == ("n01", "n03")


def test_taint_selectors_require_every_listed_taint_and_empty_value_or_effect_match_any() -> None:
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    team_taint = {"key": "team", "value": "a", "effect": "NoExecute"}
    nodes = [
        make_node("both", taints=[gpu_taint, team_taint]),
        make_node("gpu-only", taints=[gpu_taint]),
        make_node("other-team", taints=[gpu_taint, {**team_taint, "value": "b"}]),
        make_node("plain"),
    ]
    any_value = {"taintSelectors": [{"key": "nvidia.com/gpu"}, {"key": "team", "value": "a"}]}
    assert plan_category(nodes, resolve(ALL_REDUCE, target=any_value)).candidates == ("both",)
    wrong_effect = {"taintSelectors": [{"key": "nvidia.com/gpu", "value": "", "effect": "NoExecute"}]}
    with pytest.raises(PlanError, match="no node matches the target"):
        plan_category(nodes, resolve(ALL_REDUCE, target=wrong_effect))


def test_every_target_filter_must_hold_at_once() -> None:
    nodes = [
        make_node("a", labels={"pool": "x"}),
        make_node("b", labels={"pool": "x"}),
        make_node("c", labels={"pool": "y"}),
    ]
    target = {
        "nodeSelector": GPU_PRESENT,
        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}],
        "nodeNames": ["b", "c"],
    }
    assert plan_category(nodes, resolve(ALL_REDUCE, target=target)).candidates == ("b",)


def test_no_matching_node_is_an_error_naming_the_category_and_the_selector() -> None:
    nodes = [make_node("cpu-1", labels={"nvidia.com/gpu.present": "false"}), make_node("cpu-2", labels={})]
    nodes[1]["metadata"]["labels"] = {}
    with pytest.raises(PlanError) as raised:
        plan_category(nodes, resolve(ALL_REDUCE))
    assert str(raised.value) == (
        "communication/nccl-all-reduce: no node matches the target "
        "(nodeSelector nvidia.com/gpu.present=true); 2 node(s) listed"
    )


def test_no_matching_node_error_lists_node_names_that_do_not_exist() -> None:
    target = {"nodeSelector": GPU_PRESENT, "nodeNames": ["n01", "ghost"]}
    with pytest.raises(PlanError) as raised:
        plan_category(
            [make_node("n01", labels={"nvidia.com/gpu.present": "false"})], resolve(ALL_REDUCE, target=target)
        )
    assert str(raised.value).endswith(
        "(nodeSelector nvidia.com/gpu.present=true; nodeNames n01,ghost); 1 node(s) listed; nodeNames not found: ghost"
    )


def test_a_target_renders_compactly_for_messages() -> None:
    target = resolve(
        ALL_REDUCE,
        target={
            "nodeSelector": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["x", "y"]},
                {"key": "z", "operator": "Exists"},
            ],
            "nodeNames": [f"n{index}" for index in range(7)],
            "taintSelectors": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, {"key": "t"}],
        },
    ).target
    assert describe_target(target) == (
        "nodeSelector a=1,b=2; matchExpressions pool In (x,y), z Exists; nodeNames n0,n1,n2,n3,n4 (+2 more); "
        "taintSelectors dedicated=gpu:NoSchedule,t"
    )


# --- exclusions ----------------------------------------------------------------------------------------------


def test_cordoned_nodes_are_excluded_and_reported() -> None:
    nodes = [make_node("n1"), make_node("n2", unschedulable=True), make_node("n3")]
    plan = plan_category(nodes, resolve(ALL_REDUCE))
    assert plan.candidates == ("n1", "n2", "n3")
    assert reasons(plan) == {"n2": "Cordoned"}
    assert "spec.unschedulable" in plan.excluded[0].message
    assert group_nodes(plan) == [["n1", "n3"]]


def test_cordoned_nodes_are_kept_when_the_target_taint_selects_unschedulable() -> None:
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    nodes = [make_node("n1", unschedulable=True, taints=[unschedulable]), make_node("n2")]
    target = {"taintSelectors": [{"key": "node.kubernetes.io/unschedulable"}]}
    plan = plan_category(nodes, resolve(ALL_REDUCE, target=target))
    assert plan.excluded == ()
    assert group_nodes(plan) == [["n1"]]


def test_minority_gpu_architecture_nodes_are_excluded_and_unlabelled_nodes_neither_vote_nor_leave() -> None:
    nodes = [
        make_node("a", product=B200),
        make_node("b", product=H100),
        make_node("c", product="NVIDIA-H100-NVL"),
        make_node("d", product=None),
        make_node("e", product=None),
        make_node("f", product=None),
    ]
    plan = plan_category(nodes, resolve(ALL_REDUCE))
    assert plan.architecture == "h100"
    assert reasons(plan) == {"a": "MinorityGPUArchitecture"}
    assert plan.excluded[0].message == (
        "GPU NVIDIA-B200 (nvidia.com/gpu.product) is architecture b200, not the majority architecture h100 "
        "(2 of 3 labelled nodes)"
    )
    assert group_nodes(plan) == [["b", "c", "d", "e", "f"]]


def test_a_gpu_architecture_tie_goes_to_the_earliest_node_by_name() -> None:
    nodes = [make_node("z", product=H100), make_node("b", product=B200), make_node("y", product=H100)]
    nodes.append(make_node("a", product=B200))
    plan = plan_category(nodes, resolve(ALL_REDUCE))
    assert plan.architecture == "b200"
    assert reasons(plan) == {"y": "MinorityGPUArchitecture", "z": "MinorityGPUArchitecture"}


def test_a_compile_time_gpu_architecture_wins_over_the_vote() -> None:
    nodes = [make_node("a", product=H100), make_node("b", product=H100), make_node("c", product=B200)]
    category = resolve(ALL_REDUCE).model_copy(update={"gpu_architecture": "b200"})
    plan = plan_category(nodes, category)
    assert plan.architecture == "b200"
    assert reasons(plan) == {"a": "MinorityGPUArchitecture", "b": "MinorityGPUArchitecture"}
    assert "set at compile time" in plan.excluded[0].message


def test_nodes_with_fewer_allocatable_gpus_than_requested_are_excluded() -> None:
    nodes = [make_node("full"), make_node("half", gpus="4"), make_node("over", gpus="16")]
    plan = plan_category(nodes, resolve(ALL_REDUCE))
    assert reasons(plan) == {"half": "InsufficientGPUs"}
    assert plan.excluded[0].message == "allocatable nvidia.com/gpu is 4, below the 8 requested per node"
    assert group_nodes(plan) == [["full", "over"]]


@pytest.mark.parametrize("gpus", [pytest.param(None, id="missing"), pytest.param("0", id="zero")])
def test_nodes_without_allocatable_gpus_are_kept_as_device_plugin_restarting(gpus: str | None) -> None:
    plan = plan_category([make_node("n1", gpus=gpus), make_node("n2")], resolve(ALL_REDUCE))
    assert plan.excluded == ()
    assert group_nodes(plan) == [["n1", "n2"]]


def test_the_gpu_request_follows_gpus_per_node_and_the_architecture_defaults() -> None:
    four = [make_node("n1", gpus="4"), make_node("n2", gpus="4")]
    assert plan_category(four, resolve(with_options(ALL_REDUCE, gpusPerNode=4))).excluded == ()
    gb200 = [make_node("n1", product=GB200, gpus="4"), make_node("n2", product=GB200, gpus="4")]
    plan = plan_category(gb200, resolve(ALL_REDUCE))
    assert (plan.architecture, plan.excluded) == ("gb200", ())


def test_no_node_with_enough_gpus_is_an_error_naming_required_and_best_available() -> None:
    nodes = [make_node("a", gpus="2"), make_node("b", gpus="4"), make_node("c", gpus="4")]
    with pytest.raises(PlanError) as raised:
        plan_category(nodes, resolve(ALL_REDUCE))
    assert str(raised.value) == (
        "communication/nccl-all-reduce: no node can supply the 8 GPUs requested per node (gpusPerNode); "
        "best available is 4 allocatable nvidia.com/gpu (node b)"
    )


def test_a_target_whose_nodes_are_all_excluded_is_an_error_counting_the_reasons() -> None:
    nodes = [make_node("a", unschedulable=True), make_node("b", unschedulable=True)]
    with pytest.raises(PlanError, match=r"all 2 node\(s\) matching the target were excluded \(2 Cordoned\)"):
        plan_category(nodes, resolve(ALL_REDUCE))


# --- grouping ------------------------------------------------------------------------------------------------


def test_full_scale_puts_every_node_in_one_group() -> None:
    plan = plan_category(make_nodes(5), resolve(ALL_REDUCE))
    assert plan.groups == (NodeGroup("g0", ("n00", "n01", "n02", "n03", "n04")),)


def test_nodes_per_job_chunks_the_nodes_into_groups_of_that_size() -> None:
    plan = plan_category(make_nodes(6), resolve(with_options(ALL_REDUCE, nodesPerJob=2)))
    assert [group.name for group in plan.groups] == ["g0", "g1", "g2"]
    assert group_nodes(plan) == [["n00", "n01"], ["n02", "n03"], ["n04", "n05"]]
    assert not any(group.overflow for group in plan.groups)


def test_a_short_last_chunk_borrows_from_the_first_groups_as_an_overflow_group() -> None:
    plan = plan_category(make_nodes(10), resolve(with_options(ALL_REDUCE, nodesPerJob=4)))
    assert [group.name for group in plan.groups] == ["g0", "g1", "g2-overflow"]
    assert group_nodes(plan) == [
        ["n00", "n01", "n02", "n03"],
        ["n04", "n05", "n06", "n07"],
        ["n00", "n01", "n08", "n09"],
    ]
    assert [group.overflow for group in plan.groups] == [False, False, True]
    assert {node for group in plan.groups for node in group.nodes} == set(plan.candidates)


def test_nodes_per_job_larger_than_the_node_count_is_clamped_to_one_group() -> None:
    plan = plan_category(make_nodes(3), resolve(with_options(ALL_REDUCE, nodesPerJob=8)))
    assert plan.groups == (NodeGroup("g0", ("n00", "n01", "n02")),)


def test_chunks_are_packed_into_nvlink_domains_rather_than_name_order() -> None:
    nodes = [make_node(f"n{index}", product=GB200, gpus="4", clique="A" if index % 2 else "B") for index in range(8)]
    plan = plan_category(nodes, resolve(with_options(ALL_REDUCE, nodesPerJob=4)))
    assert [(group.name, group.domain) for group in plan.groups] == [("g0", "A"), ("g1", "B")]
    assert group_nodes(plan) == [["n1", "n3", "n5", "n7"], ["n0", "n2", "n4", "n6"]]


def test_an_overflow_group_borrows_from_its_own_domain_first() -> None:
    # A has 4 nodes, B has 6: g0 = A, g1 = b1..b4, and b5, b6 borrow b1, b2 rather than the earlier a1, a2.
    nodes = [make_node(f"a{index}", clique="A") for index in range(1, 5)]
    nodes += [make_node(f"b{index}", clique="B") for index in range(1, 7)]
    plan = plan_category(nodes, resolve(with_options(ALL_REDUCE, nodesPerJob=4)))
    assert [(group.name, group.domain, group.overflow) for group in plan.groups] == [
        ("g0", "A", False),
        ("g1", "B", False),
        ("g2-overflow", "B", True),
    ]
    assert group_nodes(plan)[2] == ["b1", "b2", "b5", "b6"]


def test_domain_remainders_share_a_group_largest_first() -> None:
    nodes = [make_node(f"a{index}", clique="A") for index in range(3)]
    nodes += [make_node(f"b{index}", clique="B") for index in range(5)]
    plan = plan_category(nodes, resolve(with_options(ALL_REDUCE, nodesPerJob=4)))
    assert group_nodes(plan) == [["b0", "b1", "b2", "b3"], ["a0", "a1", "a2", "b4"]]
    assert [group.domain for group in plan.groups] == ["B", None]


def test_intra_rack_makes_one_group_per_clique_and_one_per_unlabelled_node() -> None:
    nodes = [
        make_node("n1", clique="rack-2"),
        make_node("n2", clique="rack-1"),
        make_node("n3", clique="rack-2"),
        make_node("n4"),
        make_node("n5", clique="rack-1"),
    ]
    plan = plan_category(nodes, resolve(with_options(ALL_REDUCE, testScale="intra-rack", nodesPerJob=1)))
    assert [(group.name, group.domain, group.nodes) for group in plan.groups] == [
        ("g0", "rack-1", ("n2", "n5")),
        ("g1", "rack-2", ("n1", "n3")),
        ("g2", None, ("n4",)),
    ]


def test_intra_node_tests_every_node_alone() -> None:
    plan = plan_category(make_nodes(3), resolve(with_options(ALL_REDUCE, testScale="intra-node")))
    assert group_nodes(plan) == [["n00"], ["n01"], ["n02"]]
    assert [group.name for group in plan.groups] == ["g0", "g1", "g2"]


def test_per_node_entries_get_one_group_per_node_whatever_nodes_per_job_says() -> None:
    plan = plan_category(make_nodes(3), resolve(with_options(DCGM, nodesPerJob=2)))
    assert group_nodes(plan) == [["n00"], ["n01"], ["n02"]]


def test_a_diagnose_plan_has_no_groups_but_every_eligible_node_with_its_domain() -> None:
    nodes = make_nodes(4)
    category = edited_by_hand(resolve(ALL_REDUCE), test_scale="diagnose", min_group_size=3)

    plan = plan_category(nodes, category)

    assert plan.groups == ()
    assert plan.isolation is not None
    assert plan.isolation.min_group_size == 3
    assert [node for node, _ in plan.isolation.domains] == ["n00", "n01", "n02", "n03"]
    assert Plan.from_json(plan.to_json()) == plan


def test_training_uses_every_node_when_the_gpus_divide_by_the_parallelism() -> None:
    # nemotron5-56b: minGPUs 32, tensor parallelism 8 on h100 (§6.3); 5 nodes x 8 GPUs = 40.
    plan = plan_category(make_nodes(5), resolve(NEMOTRON_56B))
    assert group_nodes(plan) == [["n00", "n01", "n02", "n03", "n04"]]


def test_training_picks_the_largest_divisible_group_and_chunks_the_rest_with_overflow() -> None:
    # b200: tensor parallelism 4; 6 GPUs per node: 7 nodes = 42 GPUs (not divisible), 6 nodes = 36 (divisible).
    nodes = make_nodes(7, product=B200)
    plan = plan_category(nodes, resolve(with_options(NEMOTRON_56B, gpusPerNode=6)))
    assert [(group.name, len(group.nodes)) for group in plan.groups] == [("g0", 6), ("g1-overflow", 6)]
    assert "n06" in plan.groups[1].nodes


def test_training_on_too_few_gpus_is_an_error_with_the_arithmetic() -> None:
    with pytest.raises(PlanError) as raised:
        plan_category(make_nodes(3), resolve(NEMOTRON_56B))
    assert str(raised.value) == (
        "training/nemotron5-56b: needs at least 32 GPUs (minGPUs); 3 eligible node(s) x 8 GPUs per node = 24"
    )


def test_a_training_nodes_per_job_below_min_gpus_is_an_error() -> None:
    with pytest.raises(PlanError, match="16 GPUs is below minGPUs 32"):
        plan_category(make_nodes(8), resolve(with_options(NEMOTRON_56B, nodesPerJob=2)))


def test_training_nodes_per_job_chunks_like_any_other_entry() -> None:
    plan = plan_category(make_nodes(5), resolve(with_options(NEMOTRON_8B, nodesPerJob=2)))
    assert [group.name for group in plan.groups] == ["g0", "g1", "g2-overflow"]


def test_unpinned_placement_plans_one_unpinned_group_of_nodes_per_job() -> None:
    plan = plan_category(make_nodes(5), resolve(with_options(ALL_REDUCE, placement="Unpinned", nodesPerJob=3)))
    assert plan.groups == (NodeGroup("g0", (), pinned=False),)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({}, "placement Unpinned needs nodesPerJob", id="without-nodesPerJob"),
        pytest.param({"nodes_per_job": 6}, "asks for nodesPerJob 6 nodes, only 5 eligible", id="more-than-eligible"),
        pytest.param({"nodes_per_job": 1, "test_scale": "intra-rack"}, "with testScale intra-rack", id="intra-rack"),
    ],
)
def test_unpinned_placement_rejects_what_it_cannot_honour(options: dict[str, Any], message: str) -> None:
    category = edited_by_hand(resolve(ALL_REDUCE), placement="Unpinned", **options)
    with pytest.raises(PlanError, match=message):
        plan_category(make_nodes(5), category)


def test_group_names_are_dns_labels() -> None:
    plan = plan_category(make_nodes(11), resolve(with_options(ALL_REDUCE, nodesPerJob=3)))
    assert [group.name for group in plan.groups] == ["g0", "g1", "g2", "g3-overflow"]
    assert all(DNS_LABEL.match(group.name) for group in plan.groups)


# --- the plan as data ----------------------------------------------------------------------------------------


def sample_plan() -> Plan:
    return Plan(
        architecture="h100",
        candidates=("a", "b", "c", "d"),
        excluded=(Exclusion("d", "Cordoned", "node is cordoned"),),
        groups=(NodeGroup("g0", ("a", "b"), domain="rack-1"), NodeGroup("g1-overflow", ("a", "c"), overflow=True)),
    )


def test_a_plan_round_trips_through_json_deterministically() -> None:
    plan = sample_plan()
    text = plan.to_json()
    assert Plan.from_json(text) == plan
    assert Plan.from_json(text).to_json() == text
    assert json.loads(text)["groups"][1] == {
        "domain": None,
        "name": "g1-overflow",
        "nodes": ["a", "c"],
        "overflow": True,
        "pinned": True,
    }
    assert list(json.loads(text)) == ["architecture", "candidates", "excluded", "groups"]


def test_withparam_items_carry_the_names_of_groups_with_a_step_of_their_own() -> None:
    plan = sample_plan()
    assert plan.withparam_items() == ["g0"]
    assert plan.eligible == ("a", "b", "c")


def test_an_overflow_group_is_run_by_the_step_of_the_group_it_borrows_from() -> None:
    plan = plan_category(make_nodes(10), resolve(with_options(ALL_REDUCE, nodesPerJob=4)))
    assert [group.name for group in plan.hosted_by("g0")] == ["g2-overflow"]
    assert plan.hosted_by("g1") == ()
    assert plan.hosted_by("g2-overflow") == ()


def test_an_overflow_group_sharing_nodes_with_several_groups_is_run_by_the_last_of_them_only() -> None:
    overflow = NodeGroup("g2-overflow", ("a", "c", "e"), overflow=True)
    plan = Plan(None, (), (), (NodeGroup("g0", ("a", "b")), NodeGroup("g1", ("c", "d")), overflow))
    assert [plan.hosted_by(name) for name in ("g0", "g1")] == [(), (overflow,)]


@pytest.mark.parametrize("count", range(5, 40))
def test_an_overflow_group_borrows_from_exactly_one_group(count: int) -> None:
    nodes = [make_node(f"n{index:02}", clique="ABC"[index % 3]) for index in range(count)]
    plan = plan_category(nodes, resolve(with_options(ALL_REDUCE, nodesPerJob=4)))
    for overflow in (group for group in plan.groups if group.overflow):
        lenders = [group.name for group in plan.groups if not group.overflow and set(group.nodes) & set(overflow.nodes)]
        assert len(lenders) == 1, plan.groups
        assert len(overflow.nodes) == 4
    assert sum(len(plan.hosted_by(name)) for name in plan.withparam_items()) == sum(g.overflow for g in plan.groups)


def test_a_group_is_found_by_name_and_an_unknown_name_is_an_error_listing_the_groups() -> None:
    plan = sample_plan()
    assert plan.group("g1-overflow").nodes == ("a", "c")
    with pytest.raises(PlanError, match=r"the plan has no group 'g7'; its groups: g0, g1-overflow"):
        plan.group("g7")


def test_the_fan_out_items_are_the_same_bytes_for_8_and_10000_nodes_per_group() -> None:
    def one_group(size: int) -> Plan:
        names = tuple(f"gpu-node-{index:05d}.cluster.example.internal.x" for index in range(size))
        return Plan("b200", names, (), (NodeGroup("g0", names),))

    small, large = (json.dumps(one_group(size).withparam_items()).encode() for size in (8, 10_000))
    assert small == large == b'["g0"]'


def test_a_stored_plan_is_compressed_and_reads_back() -> None:
    plan = sample_plan()
    binary = plan_binary_data(plan)
    assert sorted(binary) == ["group-nodes.json.gz", "plan.json.gz"]
    assert plan_from_configmap({"binaryData": binary}) == plan
    assert plan_binary_data(plan) == binary  # deterministic: a re-run plan step writes the same object


def test_a_plan_stored_uncompressed_by_an_older_version_still_reads_back() -> None:
    plan = sample_plan()
    assert plan_from_configmap({"data": {"plan.json": plan.to_json()}}) == plan


@pytest.mark.parametrize(
    ("configmap", "message"),
    [
        pytest.param({"data": {}}, r"holds neither binaryData\['plan.json.gz'\] nor data\['plan.json'\]", id="empty"),
        pytest.param(
            {"binaryData": {"plan.json.gz": "bm90IGd6aXA="}}, r"binaryData\['plan.json.gz'\]: not gzip", id="not-gzip"
        ),
        pytest.param({"binaryData": {"plan.json.gz": "%%%"}}, r"not gzip JSON in base64", id="not-base64"),
    ],
)
def test_a_configmap_without_a_readable_plan_is_a_plan_error(configmap: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        plan_from_configmap(configmap)


def test_a_slim_node_keeps_exactly_what_planning_reads() -> None:
    node = make_node("n00", clique="rack-1", unschedulable=True, taints=[{"key": "k", "effect": "NoSchedule"}])
    node["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    node["status"]["images"] = [{"names": ["big"], "sizeBytes": 1}]
    node["spec"]["podCIDR"] = "127.1.0.0/24"
    assert slim_node(node) == {
        "metadata": {"name": "n00", "labels": node["metadata"]["labels"]},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }
    category = resolve(ALL_REDUCE)
    nodes = [*make_nodes(3), make_node("n03", unschedulable=True), make_node("n04", gpus="2")]
    assert plan_category([slim_node(item) for item in nodes], category) == plan_category(nodes, category)


@pytest.mark.parametrize(
    ("target", "selector"),
    [
        pytest.param({"nodeSelector": GPU_PRESENT}, "nvidia.com/gpu.present=true", id="node-selector"),
        pytest.param({"nodeSelector": {"b": "2", "a": ""}}, "a=,b=2", id="sorted-keys-and-an-empty-value"),
        pytest.param(
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["z2", "z1"]},
                    {"key": "pool", "operator": "NotIn", "values": ["spare"]},
                    {"key": "nvidia.com/gpu.clique", "operator": "Exists"},
                    {"key": "drained", "operator": "DoesNotExist"},
                ]
            },
            "zone in (z1,z2),pool notin (spare),nvidia.com/gpu.clique,!drained",
            id="match-expressions",
        ),
        pytest.param({"nodeNames": ["n00"]}, None, id="node-names-are-not-label-selectable"),
        pytest.param({"taintSelectors": [{"key": "gpu"}]}, None, id="taints-are-not-label-selectable"),
        pytest.param(
            {"nodeSelector": {"bad key": "x", "ok": "has space"}, "matchExpressions": [{"key": "e", "operator": "In"}]},
            None,
            id="what-the-syntax-cannot-express-is-left-to-the-python-match",
        ),
    ],
)
def test_the_target_label_selector_prefilters_what_the_api_server_can(
    target: dict[str, Any], selector: str | None
) -> None:
    assert target_label_selector(TargetSpec.model_validate(target)) == selector


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{", "plan is not valid JSON", id="not-json"),
        pytest.param("[]", "plan: expected an object, got list", id="not-an-object"),
        pytest.param(
            '{"architecture": null, "candidates": [], "excluded": [], "groups": [{"name": "g0"}]}',
            r"plan\.groups\[0\]\.nodes: missing",
            id="group-without-nodes",
        ),
        pytest.param(
            '{"architecture": null, "candidates": [], "groups": [],'
            ' "excluded": [{"node": "a", "reason": "Tired", "message": ""}]}',
            r"plan\.excluded\[0\]\.reason: unknown exclusion reason 'Tired'",
            id="unknown-reason",
        ),
    ],
)
def test_a_malformed_plan_document_is_an_error_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        Plan.from_json(text)


def test_an_empty_node_names_list_does_not_filter() -> None:
    plan = plan_category(make_nodes(2), resolve(ALL_REDUCE, target={"nodeSelector": GPU_PRESENT, "nodeNames": []}))
    assert plan.candidates == ("n00", "n01")
