"""Confirmation of unattributed failures: the pure planner (`plan.confirmation`) and what the plan-round and
record steps make of it (`steps.confirming`)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

from nvcre_argo.plan.confirmation import (
    MAX_CONFIRMATION_ROUNDS,
    Blame,
    confirmation_state,
    plan_confirmation_round,
)
from nvcre_argo.plan.model import Isolation, NodeGroup, Plan, PlanError
from nvcre_argo.results import HARDWARE_FAILURE_DETECTED, THRESHOLD_VIOLATION, WORKLOAD_FAILED, GroupResultRecord
from nvcre_argo.steps.confirming import (
    blame_of,
    confirmed_failures,
    decide_confirmation_round,
    may_need_confirmation,
)

PAIRS = (NodeGroup("g0", ("a", "b")), NodeGroup("g1", ("c", "d")), NodeGroup("g2", ("e", "f")))
WHOLE = "TrainJob/t failed: WorkloadStalled: no training iteration within 20 s"


def whole_group(*nodes: str) -> Blame:
    return Blame(passed=False, blamed=frozenset(nodes), unattributed=True)


PASSED = Blame(passed=True)


def test_a_pair_that_failed_as_a_whole_has_each_node_confirmed_with_a_node_of_a_passed_pair() -> None:
    blames = {"g0": whole_group("a", "b"), "g1": PASSED, "g2": PASSED}

    groups = plan_confirmation_round(PAIRS, blames, 1)

    assert [(group.name, group.nodes, group.round, group.stage) for group in groups] == [
        ("c1-g0", ("a", "c"), 1, "confirmation"),
        ("c1-g1", ("b", "d"), 1, "confirmation"),
    ]


def test_a_failed_confirmation_convicts_its_suspect_and_a_passed_one_clears_it() -> None:
    planned = (*PAIRS, NodeGroup("c1-g0", ("a", "c"), round=1), NodeGroup("c1-g1", ("b", "d"), round=1))
    blames = {"g0": whole_group("a", "b"), "g1": PASSED, "g2": PASSED}
    blames |= {"c1-g0": whole_group("a", "c"), "c1-g1": PASSED}

    state = confirmation_state(planned, blames)

    assert dict(state.convicted_by) == {"a": "c1-g0"}
    assert dict(state.cleared_by) == {"b": "c1-g1"}
    assert state.open == ()
    assert "a" not in state.healthy
    assert {"b", "c", "d"} <= state.healthy
    assert plan_confirmation_round(planned, blames, 2) == ()


@pytest.mark.parametrize(
    "blame",
    [
        Blame(passed=False, blamed=frozenset({"a"})),  # a's rank crashed first: the result names it
        Blame(passed=False, blamed=frozenset()),  # nobody blamed (an unreadable measurement)
    ],
)
def test_a_failure_the_result_attributes_or_blames_nobody_for_is_not_confirmed(blame: Blame) -> None:
    blames = {"g0": blame, "g1": PASSED, "g2": PASSED}

    assert confirmation_state(PAIRS, blames).suspects == frozenset()
    assert plan_confirmation_round(PAIRS, blames, 1) == ()


def test_without_a_passed_group_there_is_no_partner_and_the_suspects_stay_open() -> None:
    blames = {name: whole_group(*group.nodes) for name, group in zip(("g0", "g1", "g2"), PAIRS, strict=True)}

    assert plan_confirmation_round(PAIRS, blames, 1) == ()
    assert confirmation_state(PAIRS, blames).open == ("a", "b", "c", "d", "e", "f")


def test_suspects_beyond_the_partners_wait_and_suspects_cleared_in_a_round_partner_the_next() -> None:
    groups = (NodeGroup("g0", ("a", "b")), NodeGroup("g1", ("c", "d")), NodeGroup("g2", ("e", "f")))
    blames = {"g0": whole_group("a", "b"), "g1": whole_group("c", "d"), "g2": PASSED}

    first = plan_confirmation_round(groups, blames, 1)
    assert [group.nodes for group in first] == [("a", "e"), ("b", "f")]
    blames |= {"c1-g0": whole_group("a", "e"), "c1-g1": PASSED}
    second = plan_confirmation_round((*groups, *first), blames, 2)

    assert [group.nodes for group in second] == [("c", "b"), ("d", "e")]


def test_a_partner_blamed_by_its_own_evidence_leaves_the_suspect_open_for_another_partner() -> None:
    first = (NodeGroup("c1-g0", ("a", "c"), round=1), NodeGroup("c1-g1", ("b", "d"), round=1))
    blames = {"g0": whole_group("a", "b"), "g1": PASSED, "g2": PASSED}
    blames |= {"c1-g0": Blame(passed=False, blamed=frozenset({"c"})), "c1-g1": PASSED}

    state = confirmation_state((*PAIRS, *first), blames)
    second = plan_confirmation_round((*PAIRS, *first), blames, 2)

    assert state.open == ("a",)
    assert "c" in state.attributed
    assert "c" not in state.healthy
    assert [group.nodes for group in second] == [("a", "b")]


def test_partners_come_from_the_suspects_own_nvlink_domain_first_then_from_any() -> None:
    groups = (
        NodeGroup("g0", ("a", "b"), domain="clique-x"),
        NodeGroup("g1", ("c", "d"), domain="clique-x"),
        NodeGroup("g2", ("e", "f"), domain="clique-y"),
        NodeGroup("g3", ("g", "h"), domain="clique-y"),
        NodeGroup("g4", ("i", "j")),  # a cross-domain remainder: its nodes' domains are unknown
    )
    blames = {"g0": PASSED, "g1": PASSED, "g2": PASSED, "g3": whole_group("g", "h"), "g4": whole_group("i", "j")}

    first = plan_confirmation_round(groups, blames, 1)

    # g and h take e and f, their own domain's healthy nodes, although a..d come first by name; the suspects of
    # the cross-domain pair take what is left, in name order.
    assert [(group.nodes, group.domain) for group in first] == [
        (("g", "e"), "clique-y"),
        (("h", "f"), "clique-y"),
        (("i", "a"), None),
        (("j", "b"), None),
    ]


def test_a_suspect_whose_domain_has_no_healthy_node_left_is_confirmed_across_domains() -> None:
    groups = (NodeGroup("g0", ("a", "b"), domain="clique-x"), NodeGroup("g1", ("c", "d"), domain="clique-y"))
    blames = {"g0": PASSED, "g1": whole_group("c", "d")}

    assert [(group.nodes, group.domain) for group in plan_confirmation_round(groups, blames, 1)] == [
        (("c", "a"), None),
        (("d", "b"), None),
    ]


def test_groups_of_three_are_confirmed_in_groups_of_three() -> None:
    groups = (NodeGroup("g0", ("a", "b", "c")), NodeGroup("g1", ("d", "e", "f")), NodeGroup("g2", ("g", "h", "i")))
    blames = {"g0": whole_group("a", "b", "c"), "g1": PASSED, "g2": PASSED}

    assert [group.nodes for group in plan_confirmation_round(groups, blames, 1)] == [
        ("a", "d", "e"),
        ("b", "f", "g"),
        ("c", "h", "i"),
    ]


def test_only_a_plan_with_a_pinned_group_of_two_or_more_nodes_may_need_confirmation() -> None:
    singles = plan_of(NodeGroup("g0", ("a",)), NodeGroup("g1", ("b",)))
    unpinned = plan_of(NodeGroup("g0", ("a", "b"), pinned=False))
    diagnose = Plan(
        "hopper", ("a", "b"), (), (NodeGroup("r1-g0", ("a", "b"), round=1),), isolation=Isolation((("a", "d0"),), 2)
    )

    assert may_need_confirmation(plan_of(*PAIRS))
    assert not may_need_confirmation(singles)
    assert not may_need_confirmation(unpinned)
    assert not may_need_confirmation(diagnose)


def test_unpinned_groups_are_not_confirmed_and_the_round_limit_ends_confirmation() -> None:
    unpinned = (NodeGroup("g0", ("a", "b"), pinned=False), NodeGroup("g1", ("c", "d"), pinned=False))
    blames = {"g0": whole_group("a", "b"), "g1": PASSED}

    assert plan_confirmation_round(unpinned, blames, 1) == ()
    assert (
        plan_confirmation_round(PAIRS, {"g0": whole_group("a", "b"), "g1": PASSED}, MAX_CONFIRMATION_ROUNDS + 1) == ()
    )


def simulate(groups: Sequence[NodeGroup], faulty: frozenset[str], transient: frozenset[str]) -> Mapping[str, Blame]:
    """A synchronous job: it fails as a whole when it holds a faulty node; a transient node fails its first job."""
    spent: set[str] = set()
    blames: dict[str, Blame] = {}
    for group in groups:
        fails = bool(faulty.intersection(group.nodes)) or bool(transient.intersection(group.nodes) - spent)
        spent.update(transient.intersection(group.nodes))
        blames[group.name] = whole_group(*group.nodes) if fails else PASSED
    return blames


@pytest.mark.parametrize("seed", range(40))
def test_any_seeded_fault_set_convicts_exactly_the_faulty_nodes_and_every_round_is_node_disjoint(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [f"n{i:02d}" for i in range(rng.choice((8, 12, 16, 32)))]
    size = rng.choice((2, 2, 3))
    groups: tuple[NodeGroup, ...] = tuple(
        NodeGroup(f"g{i}", tuple(nodes[i * size : (i + 1) * size])) for i in range(len(nodes) // size)
    )
    tested = {node for group in groups for node in group.nodes}
    faulty = frozenset(rng.sample(sorted(tested), rng.randint(0, len(tested) // 4)))
    transient = frozenset(rng.sample(sorted(tested - faulty), rng.randint(0, 2)))
    blames = dict(simulate(groups, faulty, transient))
    for number in range(1, MAX_CONFIRMATION_ROUNDS + 2):
        planned = plan_confirmation_round(groups, blames, number)
        members = [node for group in planned for node in group.nodes]
        assert len(members) == len(set(members)), planned
        groups += planned
        blames |= simulate(planned, faulty, frozenset())  # a transient node fails its first job only
    state = confirmation_state(groups, blames)
    first_wave = [group for group in groups if group.round is None]
    healthy_at_first = {node for group in first_wave if blames[group.name].passed for node in group.nodes}

    assert set(state.convicted_by) <= faulty
    assert not set(state.cleared_by) & faulty
    assert faulty & state.suspects <= set(state.convicted_by) | set(state.open)
    if len(state.suspects) * (size - 1) <= len(healthy_at_first):  # partners for all in round 1: all decided
        assert state.open == ()


def group_result(
    group: str,
    nodes: Sequence[str],
    failed: Sequence[tuple[str, str]],
    message: str,
    *,
    succeeded: bool | None = None,
) -> GroupResultRecord:
    """A one-iteration group result blaming `failed` (name, reason) with `message`; it succeeded when nothing
    was blamed and no message given, unless `succeeded` says otherwise."""
    return {
        "group": group,
        "nodes": list(nodes),
        "attempt": 1,
        "iterations": [
            {
                "iteration": 0,
                "trainjob": f"t-{group}",
                "succeeded": (not failed and not message) if succeeded is None else succeeded,
                "message": message,
                "failed_nodes": [{"name": name, "reason": reason, "message": message} for name, reason in failed],
                "measurements": {},
                "restarts": [],
                "never_ran": False,
            }
        ],
    }


def test_a_result_is_unattributed_only_when_it_blames_every_node_and_no_health_check_fired() -> None:
    pair = NodeGroup("g0", ("a", "b"))
    stalled = group_result("g0", ("a", "b"), [("a", WORKLOAD_FAILED), ("b", WORKLOAD_FAILED)], WHOLE)
    slow = group_result("g0", ("a", "b"), [("a", THRESHOLD_VIOLATION), ("b", THRESHOLD_VIOLATION)], "slow")
    sick = group_result("g0", ("a", "b"), [("a", HARDWARE_FAILURE_DETECTED), ("b", HARDWARE_FAILURE_DETECTED)], "hc")
    crashed = group_result("g0", ("a", "b"), [("a", WORKLOAD_FAILED)], "a crashed")

    assert blame_of(pair, stalled) == Blame(passed=False, blamed=frozenset({"a", "b"}), unattributed=True)
    assert blame_of(pair, slow) == Blame(passed=False, blamed=frozenset({"a", "b"}), unattributed=True)
    assert blame_of(pair, sick) == Blame(passed=False, blamed=frozenset({"a", "b"}), unattributed=False)
    assert blame_of(pair, crashed) == Blame(passed=False, blamed=frozenset({"a"}), unattributed=False)
    assert blame_of(NodeGroup("g0", ("a",)), group_result("g0", ("a",), [("a", WORKLOAD_FAILED)], "x")) == Blame(
        passed=False, blamed=frozenset({"a"}), unattributed=False
    )
    assert blame_of(pair, None) is None


def plan_of(*groups: NodeGroup) -> Plan:
    nodes = tuple(sorted({node for group in groups for node in group.nodes}))
    return Plan(architecture="hopper", candidates=nodes, excluded=(), groups=groups)


def stalled_pair_results() -> dict[str, GroupResultRecord]:
    return {
        "g0": group_result("g0", ("a", "b"), [("a", WORKLOAD_FAILED), ("b", WORKLOAD_FAILED)], WHOLE),
        "g1": group_result("g1", ("c", "d"), [], ""),
        "g2": group_result("g2", ("e", "f"), [], ""),
    }


def test_plan_round_plans_confirmation_into_the_plan_and_re_emits_a_planned_round() -> None:
    plan = plan_of(*PAIRS)
    results = stalled_pair_results()

    updated, groups, progress = decide_confirmation_round(plan, results, 1)
    again, same, _ = decide_confirmation_round(updated, results, 1)

    assert [group.name for group in groups] == ["c1-g0", "c1-g1"]
    assert updated.groups == (*PAIRS, *groups)
    assert progress == "confirmation round 1: 2 suspect(s), each with known-healthy partners"
    assert again is updated
    assert same == groups
    with pytest.raises(PlanError, match="confirmation round 3 cannot be planned: the plan's last round is 1"):
        decide_confirmation_round(updated, results, 3)


def test_plan_round_says_done_at_once_when_no_failure_needs_confirming() -> None:
    results = stalled_pair_results()
    results["g0"] = group_result("g0", ("a", "b"), [], "")
    plan = plan_of(*PAIRS)

    updated, groups, progress = decide_confirmation_round(plan, results, 1)

    assert (updated, groups, progress) == (plan, (), "no unattributed failure to confirm")


def test_the_record_step_blames_the_convicted_suspect_alone_and_certifies_the_cleared_one() -> None:
    plan = plan_of(*PAIRS, NodeGroup("c1-g0", ("a", "c"), round=1), NodeGroup("c1-g1", ("b", "d"), round=1))
    results = stalled_pair_results()
    results["c1-g0"] = group_result("c1-g0", ("a", "c"), [("a", WORKLOAD_FAILED), ("c", WORKLOAD_FAILED)], WHOLE)
    results["c1-g1"] = group_result("c1-g1", ("b", "d"), [], "")

    confirmed = confirmed_failures(plan, results)

    assert confirmed.decided == {"a", "b"}
    assert [(node.name, node.reason) for node in confirmed.failed] == [("a", WORKLOAD_FAILED)]
    assert confirmed.failed[0].message == (
        f"failed in g0, then again in confirmation job c1-g0 with known-healthy c: {WHOLE}"
    )
    assert confirmed.passed == {"b", "d"}
    assert confirmed.lines == [
        f"confirmed a: {confirmed.failed[0].message}",
        "cleared b: failed in g0, passed in c1-g1",
    ]


def test_the_record_step_keeps_the_blame_of_a_partner_that_failed_by_its_own_evidence() -> None:
    plan = plan_of(*PAIRS, NodeGroup("c1-g0", ("a", "c"), round=1), NodeGroup("c1-g1", ("b", "d"), round=1))
    results = stalled_pair_results()
    results["c1-g0"] = group_result("c1-g0", ("a", "c"), [("c", HARDWARE_FAILURE_DETECTED)], "health check")
    results["c1-g1"] = group_result("c1-g1", ("b", "d"), [], "")

    confirmed = confirmed_failures(plan, results)

    assert confirmed.decided == {"b"}
    assert [(node.name, node.reason) for node in confirmed.failed] == [("c", HARDWARE_FAILURE_DETECTED)]


def test_a_confirmation_round_never_makes_a_host_of_an_overflow_group() -> None:
    overflow = NodeGroup("g3", ("e", "a"), overflow=True)
    plan = plan_of(*PAIRS, overflow, NodeGroup("c1-g0", ("a", "c"), round=1))

    assert plan.host_of(overflow) == "g2"
