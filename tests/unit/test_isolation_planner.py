"""The isolation planner (testScale: diagnose) on hand-made clusters, stage by stage, and as a loop against
simulated faults (hypothesis): exact verdicts, node-disjoint rounds, bounded rounds."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre_argo.plan.isolation import (
    Candidate,
    Group,
    JobResult,
    Outcome,
    Round,
    Settings,
    Verdict,
    assign_domains,
    plan_baseline_round,
    plan_isolation_round,
)
from nvcre_argo.plan.isolation.knowledge import NOT_RUN_LIMIT, derive_knowledge
from nvcre_argo.plan.isolation.link_blocks import components, cut_blocks, split_sides
from nvcre_argo.plan.isolation.links import (
    BlockRounds,
    _avoid_faulty_links,
    _focus,
    _link_evidence,
    _one_by_one,
    _sweep_tests,
    count_block_rounds,
    plan_link_groups,
)
from nvcre_argo.plan.isolation.verdict import NEVER_RAN
from tests.bench.isolation_sim import FaultOracle, Planner, Scenario, is_exact, run_planner

A = [f"a{i}" for i in range(8)]
B = [f"b{i}" for i in range(8)]
TWO_DOMAINS = tuple(Candidate(n, "A") for n in A) + tuple(Candidate(n, "B") for n in B)


def play(
    candidates: Sequence[Candidate], outcome: Callable[[Group], Outcome], planner: Planner = plan_isolation_round
) -> tuple[Verdict, list[Round], list[JobResult]]:
    """Run planner -> outcome -> planner to the verdict, keeping every round."""
    results: list[JobResult] = []
    rounds: list[Round] = []
    for _ in range(50):
        step = planner(candidates, tuple(results), Settings())
        if isinstance(step, Verdict):
            return step, rounds, results
        rounds.append(step)
        results.extend(JobResult(step.number, g, outcome(g)) for g in step.groups)
    raise AssertionError("no verdict within 50 rounds")


def oracle(**faults: object) -> Callable[[Group], Outcome]:
    """Outcomes of the simulated cluster with the given faults over TWO_DOMAINS."""
    return FaultOracle(Scenario(candidates=TWO_DOMAINS, **faults)).run  # type: ignore[arg-type]


def stages(rounds: list[Round]) -> list[set[str]]:
    return [{g.stage for g in r.groups} for r in rounds]


def test_a_healthy_cluster_is_certified_in_one_round_with_domains_and_links_screened_together() -> None:
    verdict, rounds, _ = play(TWO_DOMAINS, oracle())
    assert verdict.rounds == 1
    assert verdict.faulty == ()
    assert verdict.healthy == tuple(sorted(A + B))
    assert stages(rounds) == [{"intra-screening", "inter-screening"}]
    (inter,) = [g for g in rounds[0].groups if g.stage == "inter-screening"]
    assert inter.nodes == ("a0", "a1", "b0", "b1")  # two per domain, so NVLink is exercised too


@pytest.mark.parametrize(
    ("kind", "node"),
    [
        pytest.param("node_faults", "a5", id="node fault"),
        pytest.param("nvlink_faults", "a5", id="NVLink-only fault"),
        pytest.param("slow_nodes", "a5", id="slow node below the bandwidth threshold"),
        pytest.param("node_faults", "a0", id="node fault in a representative"),
    ],
)
def test_a_faulty_node_is_split_out_of_its_domain_and_confirmed_with_a_healthy_peer(kind: str, node: str) -> None:
    verdict, rounds, results = play(TWO_DOMAINS, oracle(**{kind: frozenset({node})}))
    assert verdict.faulty == (node,)
    assert node not in verdict.healthy
    assert len(verdict.healthy) == len(TWO_DOMAINS) - 1
    assert verdict.infrastructure_faults == ()
    assert stages(rounds)[1] >= {"bisection"}
    confirmation = [r for r in results if r.group.stage == "confirmation" and node in r.group.nodes]
    assert confirmation
    assert all(r.failed for r in confirmation)
    assert all(len(r.group.nodes) == 2 for r in confirmation)
    assert all(r.group.nodes[0][0] == r.group.nodes[1][0] for r in confirmation)  # a peer of its own domain
    assert verdict.rounds == 3  # screen, split into pairs, confirm


def test_a_below_threshold_result_counts_as_a_failure() -> None:
    verdict, _, results = play(TWO_DOMAINS, oracle(slow_nodes=frozenset({"b4"})))
    assert any(r.outcome == "below-threshold" for r in results)
    assert verdict.faulty == ("b4",)


def test_a_link_fault_between_two_domains_is_reported_as_infrastructure_not_as_nodes() -> None:
    three = TWO_DOMAINS + tuple(Candidate(f"c{i}", "C") for i in range(8))
    scenario = Scenario(candidates=three, link_faults=frozenset({("A", "C")}))
    verdict, rounds, _ = play(three, FaultOracle(scenario).run)
    assert verdict.faulty == ()
    (fault,) = verdict.infrastructure_faults
    assert fault.domain == "A|C"
    assert {n[0] for n in fault.group_a} == {"a"}
    assert {n[0] for n in fault.group_b} == {"c"}
    assert "inter-screening" in stages(rounds)[1]  # the re-screen runs alongside the split of the representatives


def test_a_transient_failure_is_cleared_by_confirmation_not_blamed() -> None:
    # a2 is faulty; a4 fails its second job (the split of domain A) once, then passes its confirmation.
    # That shows a transient (a4 and its pair-mate both cleared after their pair failed), so a2's split, whose
    # pair-mate a3 was cleared only afterwards, no longer counts: a2 is confirmed a second time in round 4.
    verdict, rounds, results = play(TWO_DOMAINS, oracle(node_faults=frozenset({"a2"}), transients=(("a4", 1),)))
    assert verdict.faulty == ("a2",)
    assert "a4" in verdict.healthy
    split = next(r for r in results if r.group.stage == "bisection" and "a4" in r.group.nodes)
    assert split.failed
    confirmation = next(r for r in results if r.group.stage == "confirmation" and "a4" in r.group.nodes)
    assert not confirmation.failed
    assert [(g.stage, "a2" in g.nodes) for g in rounds[3].groups] == [("confirmation", True)]
    assert verdict.rounds == 4


def test_without_a_transient_seen_a_faulty_node_is_named_after_one_confirmation() -> None:
    # a2 is faulty and nothing failed transiently: its split and one confirmation beside a node cleared before
    # are its two isolating failures.
    verdict, _, _ = play(TWO_DOMAINS, oracle(node_faults=frozenset({"a2"})))
    assert verdict.faulty == ("a2",)
    assert verdict.rounds == 3


def test_once_a_transient_was_seen_two_partners_failing_once_each_do_not_blame_a_healthy_node() -> None:
    # a6 is faulty. a3 is healthy, but its split pair-mate a2 fails that job transiently and so does its
    # confirmation partner a1 (each failing once). b3's transient failure of domain B's screening (its split
    # all passes) shows that nodes here fail once now and then, so a3's split, whose pair-mate was cleared only
    # afterwards, does not count; a3 is confirmed again and passes. (With no transient seen anywhere else, the
    # same two failures would blame a3: the results of a faulty a3 would look the same.)
    transients = (("a2", 1), ("a1", 1), ("b3", 0))
    verdict, rounds, results = play(TWO_DOMAINS, oracle(node_faults=frozenset({"a6"}), transients=transients))
    assert [r.failed for r in results if r.round in (2, 3) and "a3" in r.group.nodes] == [True, True]
    assert verdict.faulty == ("a6",)
    assert "a3" in verdict.healthy
    assert {tuple(g.nodes) for g in rounds[3].groups} == {("a0", "a3"), ("a5", "a6")}
    assert verdict.rounds == 4


def test_a_suspect_failing_its_confirmation_once_is_confirmed_again_before_being_blamed() -> None:
    # a2 is faulty and shares its split pair with a3; a3 fails its third job (the confirmation) transiently.
    # Both suspects now have one isolating failure, either of which could be a transient: both are confirmed
    # once more (a fault takes two), a2 fails again and a3 passes.
    verdict, rounds, results = play(TWO_DOMAINS, oracle(node_faults=frozenset({"a2"}), transients=(("a3", 2),)))
    assert verdict.faulty == ("a2",)
    assert "a3" in verdict.healthy
    last = {r.group.nodes: r.failed for r in results if r.round == 4}
    assert {nodes: failed for nodes, failed in last.items() if "a2" in nodes} == {("a0", "a2"): True}
    assert [failed for nodes, failed in last.items() if "a3" in nodes] == [False]
    assert all(g.stage == "confirmation" for g in rounds[3].groups)
    assert verdict.rounds == 4


def test_a_transient_screening_failure_is_cleared_by_one_cross_boundary_probe() -> None:
    verdict, rounds, _ = play(TWO_DOMAINS, oracle(transients=(("a3", 0),)))
    assert verdict.faulty == ()
    assert verdict.infrastructure_faults == ()
    assert stages(rounds)[2] == {"cross-boundary"}
    assert verdict.rounds == 3


def test_a_fault_between_two_nodes_of_one_domain_is_found_by_cross_boundary_probing() -> None:
    # Outside the OR model: a3 and a6 only fail together (a cable between their NVSwitch trays, say).
    def outcome(group: Group) -> Outcome:
        return "failed" if {"a3", "a6"} <= set(group.nodes) else "passed"

    verdict, rounds, _ = play(TWO_DOMAINS, outcome)
    assert verdict.faulty == ()
    (fault,) = verdict.infrastructure_faults
    assert fault.stage == "cross-boundary"
    assert fault.domain == "A"
    assert set(fault.group_a + fault.group_b) == set(A[2:])
    assert stages(rounds)[2:] == [{"cross-boundary"}, {"cross-boundary"}]


def test_a_faulty_link_is_proven_by_two_direct_tests_in_the_same_round() -> None:
    three = TWO_DOMAINS + tuple(Candidate(f"c{i}", "C") for i in range(8))
    scenario = Scenario(candidates=three, link_faults=frozenset({("A", "C")}))
    verdict, _, results = play(three, FaultOracle(scenario).run)
    domain = {c.node: c.domain for c in three}
    direct = [r for r in results if {domain[n] for n in r.group.nodes} == {"A", "C"} and len(r.group.nodes) == 2]
    (last,) = {r.round for r in direct}  # both copies run at once, on different nodes
    assert len(direct) == 2
    assert not set(direct[0].group.nodes) & set(direct[1].group.nodes)
    assert all(r.failed for r in direct)
    assert last == verdict.rounds
    assert [f.domain for f in verdict.infrastructure_faults] == ["A|C"]


def test_suspects_without_a_cleared_peer_run_alone_and_the_last_healthy_node_is_cleared_by_its_pass() -> None:
    # Domain S: s0 and s1 broken, s2 slow, s3 healthy. No node of S can be cleared by a peer: each suspect runs
    # alone, the broken and slow ones fail twice, and s3 passes alone with every peer faulty.
    candidates = TWO_DOMAINS + tuple(Candidate(f"s{i}", "S") for i in range(4))
    scenario = Scenario(candidates=candidates, node_faults=frozenset({"s0", "s1"}), slow_nodes=frozenset({"s2"}))
    verdict, _, results = play(candidates, FaultOracle(scenario).run)
    assert verdict.faulty == ("s0", "s1", "s2")
    assert "s3" in verdict.healthy
    assert verdict.untested == ()
    alone = [r for r in results if r.group.nodes in {("s0",), ("s1",), ("s2",), ("s3",)}]
    assert {r.group.nodes[0] for r in alone} == {"s0", "s1", "s2", "s3"}
    assert all(r.group.stage == "confirmation" for r in alone)


def test_a_node_whose_peers_are_all_faulty_is_cleared_by_any_pass() -> None:
    candidates = (Candidate("x", "X"), Candidate("y", "X"), Candidate("z", "Z"))
    isolated = [JobResult(1, Group(("y",), mnnvl=True, stage="confirmation"), "failed") for _ in range(2)]
    passed = JobResult(2, Group(("x",), mnnvl=True, stage="confirmation"), "passed")
    knowledge = derive_knowledge(candidates, [*isolated, passed], min_group_size=2)
    assert knowledge.faulty == {"y"}
    assert "x" in knowledge.cleared
    assert knowledge.passed_alone == {"x"}
    alone = derive_knowledge(candidates, [passed], min_group_size=2)
    assert "x" not in alone.cleared  # y may be healthy: x still needs a pass with it


def test_an_nvlink_fault_whose_only_peer_is_healthy_cannot_be_told_apart_and_neither_node_is_blamed() -> None:
    # Domain X: x0 broken, so x1 and x2 can exercise NVLink only with each other. A job holding both fails
    # whichever of them has the NVLink fault, and a job holding one of them without the other passes either way:
    # no strategy can tell the two clusters apart, so the verdict must leave both untested, never guess.
    candidates = tuple(Candidate(f"x{i}", "X") for i in range(3)) + tuple(Candidate(f"y{i}", "Y") for i in range(4))
    verdicts = []
    histories = []
    for nvlink in ("x1", "x2"):
        scenario = Scenario(candidates=candidates, node_faults=frozenset({"x0"}), nvlink_faults=frozenset({nvlink}))
        verdict, _, results = play(candidates, FaultOracle(scenario).run)
        verdicts.append(verdict)
        histories.append([(r.round, r.group.nodes, r.outcome) for r in results])
    assert histories[0] == histories[1]
    assert verdicts[0] == verdicts[1]
    assert verdicts[0].faulty == ("x0",)
    assert [u.node for u in verdicts[0].untested] == ["x1", "x2"]


def many_domains(count: int) -> tuple[Candidate, ...]:
    return tuple(Candidate(f"m{d:02d}n{i}", f"m{d:02d}") for d in range(count) for i in range(6))


def failing_wide_rescreens(failures: int, broken: str = "m00n0") -> Callable[[Group], Outcome]:
    """Node `broken` is broken, and the first `failures` groups of many domains' cleared nodes fail too
    (transient nodes met by chance)."""
    seen = [0]

    def outcome(group: Group) -> Outcome:
        if broken in group.nodes:
            return "failed"
        if group.stage == "inter-screening" and len(group.nodes) >= 32:
            seen[0] += 1
            return "failed" if seen[0] <= failures else "passed"
        return "passed"

    return outcome


def inter_screening(rounds: list[Round]) -> list[list[Group]]:
    return [[g for g in r.groups if g.stage == "inter-screening"] for r in rounds]


def test_across_many_domains_round_1_screens_whole_domains_and_links_wait_for_one_batch() -> None:
    # 40 domains: no representatives' group in round 1. Domain m00 fails its screening (m00n0 is broken) and has
    # no cleared node in round 2 while it is split, so the link screen waits and runs once, over all 40 domains,
    # in round 3 beside the confirmation, instead of over 39 domains now and again for m00 later.
    verdict, rounds, _ = play(many_domains(40), failing_wide_rescreens(0))
    assert [{g.stage for g in r.groups} for r in rounds] == [
        {"intra-screening"},
        {"bisection"},
        {"confirmation", "inter-screening"},
    ]
    assert len(rounds[0].groups) == 40
    assert [len(g.nodes) for g in inter_screening(rounds)[2]] == [40]
    assert verdict.faulty == ("m00n0",)
    assert verdict.untested == ()


def test_a_healthy_cluster_of_many_domains_is_certified_in_two_rounds() -> None:
    verdict, rounds, _ = play(many_domains(40), failing_wide_rescreens(0, broken=""))
    assert [len(groups) for groups in inter_screening(rounds)] == [0, 1]
    assert len(verdict.healthy) == 240


def test_the_link_screen_waits_for_a_late_domain_only_while_other_tests_run() -> None:
    candidates = many_domains(40)
    screening = plan_isolation_round(candidates, [])
    assert isinstance(screening, Round)
    results = [JobResult(1, g, "failed" if "m00n0" in g.nodes else "passed") for g in screening.groups]
    k = derive_knowledge(candidates, results, min_group_size=2)
    spare = {f"m{d:02d}": [n for n in k.cleared if n.startswith(f"m{d:02d}")] for d in range(40)}
    assert plan_link_groups(k, spare, set(), BlockRounds(), can_wait=True) == []  # m00 has no cleared node yet
    (alone,) = plan_link_groups(k, spare, set(), BlockRounds(), can_wait=False)
    assert len(alone.nodes) == 39


def test_a_domain_whose_cleared_nodes_are_busy_does_not_hold_the_link_screen_back() -> None:
    candidates = many_domains(40)
    screening = plan_isolation_round(candidates, [])
    assert isinstance(screening, Round)
    results = [JobResult(1, g, "passed") for g in screening.groups]
    k = derive_knowledge(candidates, results, min_group_size=2)
    spare = {f"m{d:02d}": sorted(n for n in k.cleared if n.startswith(f"m{d:02d}")) for d in range(40)}
    busy = set(spare["m05"])  # m05 lends its nodes elsewhere this round
    (screen,) = plan_link_groups(k, spare, busy, BlockRounds(), can_wait=True)
    assert len(screen.nodes) == 39


def test_from_sixteen_domains_a_late_domain_joins_the_link_rescreen_of_the_others() -> None:
    # 20 domains: representatives in round 1. m00n0 (a representative) and m01n3 are broken, so the
    # representatives' group and m01's screening fail. m01 has no cleared node while it is split, so the
    # re-screen of links waits for it and runs once, over all 20 domains, in round 3.
    candidates = many_domains(20)

    def outcome(group: Group) -> Outcome:
        return "failed" if {"m00n0", "m01n3"} & set(group.nodes) else "passed"

    verdict, rounds, _ = play(candidates, outcome)
    inter = inter_screening(rounds)
    assert [len(groups) for groups in inter[:3]] == [1, 0, 1]
    assert [len({g_node[:3] for g_node in g.nodes}) for g in inter[2]] == [20]
    assert verdict.faulty == ("m00n0", "m01n3")
    assert verdict.untested == ()


def test_across_many_domains_a_failed_rescreen_is_confirmed_by_a_round_of_three_blocks() -> None:
    # The first link screen of cleared nodes (round 3) fails: across many domains that is as often a transient
    # node as a link fault, so round 4 confirms it with three blocks tested pair by pair (two nodes per domain),
    # which also narrows a link fault down, rather than lending five nodes per domain to a block search. All
    # three pass and every pair is verified. The failed re-screen was then a transient, so m00n0's split, whose
    # pair-mate was cleared only afterwards, no longer counts: round 5 confirms it a second time.
    verdict, rounds, _ = play(many_domains(40), failing_wide_rescreens(1))
    inter = inter_screening(rounds)
    assert [len(groups) for groups in inter] == [0, 0, 1, 3, 0]
    assert [(g.stage, "m00n0" in g.nodes) for g in rounds[4].groups] == [("confirmation", True)]
    assert sorted(len(g.nodes) for g in inter[3]) == [26, 27, 27]
    assert verdict.faulty == ("m00n0",)
    assert verdict.infrastructure_faults == ()
    assert verdict.untested == ()


def test_across_many_domains_a_link_fault_is_searched_among_the_likeliest_pairs_only() -> None:
    # 40 domains, one faulty link between two of the three blocks of round 3: only the test of those two blocks
    # fails. Round 4 cuts only its domains apart (the pairs that failure holds, the rest being verified), not
    # every domain again, and round 5 proves the link with two direct tests.
    candidates = many_domains(40)
    scenario = Scenario(candidates=candidates, link_faults=frozenset({("m01", "m05")}))
    verdict, rounds, results = play(candidates, FaultOracle(scenario).run)
    inter = inter_screening(rounds)
    assert [len(groups) for groups in inter[:3]] == [0, 1, 3]
    (failed,) = [r.group for r in results if r.round == 3 and r.failed]
    assert {n[:3] for g in inter[3] for n in g.nodes} == {n[:3] for n in failed.nodes}
    assert len(rounds) == 5
    assert [f.domain for f in verdict.infrastructure_faults] == ["m01|m05"]
    assert verdict.faulty == ()
    assert verdict.untested == ()


def test_across_very_many_domains_a_third_failed_rescreen_starts_the_block_search() -> None:
    # 130 domains: a re-screen is large enough that two transients in a row are common.
    verdict, rounds, _ = play(many_domains(130), failing_wide_rescreens(3))
    inter = inter_screening(rounds)
    assert [len(groups) for groups in inter[:5]] == [0, 0, 1, 1, 1]
    assert len(inter[5]) > 1
    assert verdict.faulty == ("m00n0",)
    assert verdict.infrastructure_faults == ()


@pytest.mark.parametrize(
    ("members", "faulty"),
    [
        pytest.param(["A", "B", "C"], {("A", "C")}, id="one faulty pair"),
        pytest.param(["A", "B", "C", "D"], {("A", "C"), ("B", "D")}, id="two disjoint faulty pairs"),
        pytest.param(["A", "B", "C", "D", "E"], {("A", "B"), ("A", "C")}, id="a star of faulty pairs"),
    ],
)
def test_tests_around_known_faulty_links_cover_every_other_pair_and_no_faulty_one(
    members: list[str], faulty: set[tuple[str, str]]
) -> None:
    tests = _avoid_faulty_links(members, faulty)
    covered = {(a, b) for t in tests for a in t for b in t if a < b}
    assert not covered & faulty
    assert covered == {(a, b) for a in members for b in members if a < b} - faulty


def test_tests_around_a_known_faulty_link_hold_only_the_pairs_still_open() -> None:
    # A late domain's pairs are all that is open: the test that leaves the faulty link's cover domain out
    # holds them, and the cover domain is tested with the late domain alone, not with every other domain again.
    members = ["a", "b", "c", "d", "e"]
    wanted = {("a", "b"), ("a", "c"), ("a", "d"), ("a", "e")}
    tests = _avoid_faulty_links(members, {("b", "c")}, wanted)
    assert tests == [["a", "c", "d", "e"], ["a", "b"]]
    # Without the faulty link, a domain holding no open pair inside the test is left out of it.
    assert _avoid_faulty_links(members, set(), {("a", "b"), ("b", "c")}) == [["a", "b", "c"]]


def test_open_pairs_between_two_sides_are_searched_with_blocks_of_each_side() -> None:
    sides = [f"a{i}" for i in range(6)], [f"b{i}" for i in range(6)]
    pairs = {(a, b) for a in sides[0] for b in sides[1]}
    assert split_sides(sorted(sides[0] + sides[1]), pairs) == sides
    blocks = cut_blocks(sorted(sides[0] + sides[1]), pairs, count=6, rotation=0, digit_blocks=6)
    assert blocks == [["a0", "a1"], ["a2", "a3"], ["a4", "a5"], ["b0", "b1"], ["b2", "b3"], ["b4", "b5"]]
    triangle = {("a0", "a1"), ("a1", "a2"), ("a0", "a2")}
    assert split_sides(["a0", "a1", "a2"], triangle) is None  # no two sides: the rotating digit layout


def test_faulty_links_far_apart_are_searched_group_by_group() -> None:
    # Two separate groups of open pairs: each side of each group is cut on its own, so no test mixes them.
    pairs = {(a, b) for a in ("a0", "a1", "a2") for b in ("b0", "b1", "b2")}
    pairs |= {(c, d) for c in ("c0", "c1", "c2") for d in ("d0", "d1", "d2")}
    domains = sorted({x for p in pairs for x in p} | {"e0"})
    assert components(domains, pairs) == [["a0", "a1", "a2", "b0", "b1", "b2"], ["c0", "c1", "c2", "d0", "d1", "d2"]]
    blocks = cut_blocks(domains, pairs, count=6, rotation=0, digit_blocks=6)
    assert len(blocks) == 12
    assert all(len(b) == 1 for b in blocks)


def test_a_link_fault_across_many_domains_is_found_with_each_side_cut_apart() -> None:
    candidates = many_domains(40)
    scenario = Scenario(candidates=candidates, link_faults=frozenset({("m05", "m31")}))
    verdict, rounds, _ = play(candidates, FaultOracle(scenario).run)
    assert [f.domain for f in verdict.infrastructure_faults] == ["m05|m31"]
    assert verdict.faulty == ()
    block_rounds = [groups for groups in inter_screening(rounds) if len(groups) > 1]
    assert any(len(groups) == 9 for groups in block_rounds)  # three blocks of each side, one test per pair


def test_the_search_focuses_on_the_pairs_most_failures_hold_and_a_known_faulty_link_explains_its_failures() -> None:
    candidates = tuple(Candidate(f"{d}n{i}", d) for d in ("p", "q", "r", "s") for i in range(2))
    screens = [JobResult(1, Group((f"{d}n0", f"{d}n1"), mnnvl=True, stage="intra-screening"), "passed") for d in "pqrs"]

    def failed(round_: int, *domains: str) -> JobResult:
        return JobResult(round_, Group(tuple(f"{d}n0" for d in domains), mnnvl=True, stage="inter-screening"), "failed")

    results = [*screens, failed(2, "p", "q", "r", "s"), failed(3, "p", "q", "r"), failed(3, "r", "s")]
    k = derive_knowledge(candidates, results, min_group_size=2)
    evidence = _link_evidence(k, {("p", "q"), ("p", "r"), ("p", "s"), ("q", "r"), ("q", "s"), ("r", "s")})
    assert _focus(evidence) == {("p", "q"), ("p", "r"), ("q", "r"), ("r", "s")}  # two failures each
    # Once (r, s) is proven faulty, the failures holding it say nothing about their other pairs.
    results += [failed(4, "r", "s"), failed(4, "r", "s")]
    k = derive_knowledge(candidates, results, min_group_size=2)
    assert set(k.faulty_links) == {("r", "s")}
    assert _link_evidence(k, {("p", "q"), ("p", "r"), ("q", "r"), ("p", "s"), ("q", "s")}) == {
        ("p", "q"): 1,
        ("p", "r"): 1,
        ("q", "r"): 1,
    }


def test_the_pairs_outside_a_two_sided_focus_are_swept_by_two_tests_and_a_focus_inside_a_block_by_none() -> None:
    domains = ["a", "b", "c", "d", "e"]
    square = {("a", "c"), ("a", "d"), ("b", "c"), ("b", "d")}
    assert _sweep_tests(domains, square, set()) == [["a", "b", "e"], ["c", "d", "e"]]
    assert _sweep_tests(domains, {("a", "b")}, set()) == [["a", "c", "d", "e"], ["b", "c", "d", "e"]]
    assert _sweep_tests(domains, {("a", "b"), ("a", "c"), ("b", "c")}, set()) == []  # a triangle: no two sides
    assert _sweep_tests(domains, {("a", "c"), ("b", "d")}, set()) == []  # (a, d) lies between the sides, unfocused


def test_a_rescreen_split_around_a_faulty_link_is_no_block_round() -> None:
    def inter(round_: int, nodes: tuple[str, ...], outcome: Outcome) -> JobResult:
        return JobResult(round_, Group(nodes, mnnvl=True, stage="inter-screening"), outcome)

    blocks = [inter(5, (f"x{i}",), "failed") for i in range(3)]
    assert count_block_rounds(blocks) == BlockRounds(count=1, failed_everywhere=1)
    two = [inter(6, ("y0",), "failed"), inter(6, ("y1",), "failed")]
    assert count_block_rounds([*blocks, *two]) == BlockRounds(count=1, failed_everywhere=1)
    mixed = [inter(7, ("z0",), "passed"), inter(7, ("z1",), "failed"), inter(7, ("z2",), "failed")]
    assert count_block_rounds([*blocks, *mixed]) == BlockRounds(count=2, failed_everywhere=0)


def test_after_block_rounds_fail_everywhere_pairs_go_one_by_one_only_when_cheap_or_a_second_time() -> None:
    many = {(f"d{a:02d}", f"d{b:02d}") for a in range(40) for b in range(a + 1, 40)}
    few = {(f"d{a:02d}", f"d{b:02d}") for a in range(40) for b in (a + 1, a + 2) if b < 40}
    small = {(f"s{a}", f"s{b}") for a in range(6) for b in range(a + 1, 6)}
    assert not _one_by_one(many, BlockRounds(count=1, failed_everywhere=0))
    assert not _one_by_one(many, BlockRounds(count=1, failed_everywhere=1))  # 780 pairs: a block round is cheaper
    assert _one_by_one(few, BlockRounds(count=1, failed_everywhere=1))  # two pairs per domain
    assert _one_by_one(small, BlockRounds(count=1, failed_everywhere=1))  # few domains: as before
    assert _one_by_one(many, BlockRounds(count=2, failed_everywhere=2))  # never block after block failing


def test_across_many_domains_a_probe_takes_what_the_link_screen_leaves() -> None:
    # m03 failed its screening once (a transient) and its pairs all passed: its probe would take every node of
    # m03, so the link screen takes its node first and the probe runs a round later.
    candidates = many_domains(40)
    screening = plan_isolation_round(candidates, [])
    assert isinstance(screening, Round)
    results = [JobResult(1, g, "failed" if "m03n0" in g.nodes else "passed") for g in screening.groups]
    split = plan_isolation_round(candidates, results)
    assert isinstance(split, Round)
    results += [JobResult(2, g, "passed") for g in split.groups]
    step = plan_isolation_round(candidates, results)
    assert isinstance(step, Round)
    assert [(g.stage, len(g.nodes)) for g in step.groups] == [("inter-screening", 40)]
    results += [JobResult(3, g, "passed") for g in step.groups]
    step = plan_isolation_round(candidates, results)
    assert isinstance(step, Round)
    assert [(g.stage, len(g.nodes)) for g in step.groups] == [("cross-boundary", 6)]


def test_without_topology_labels_nodes_are_cut_into_chunks_of_the_square_root() -> None:
    candidates = assign_domains({f"n{i:02d}": None for i in range(10)})
    sizes = [sum(1 for c in candidates if c.domain == d) for d in sorted({c.domain for c in candidates})]
    assert sizes == [4, 4, 2]


def test_a_node_without_a_label_among_labelled_ones_gets_a_domain_of_its_own() -> None:
    candidates = assign_domains({"x": "A", "y": None, "z": "A"})
    assert [c.domain for c in candidates] == ["A", "node-y", "A"]


def test_the_plan_does_not_depend_on_the_order_of_candidates_or_results() -> None:
    faults = oracle(node_faults=frozenset({"a5"}), link_faults=frozenset())
    _, _, results = play(TWO_DOMAINS, faults)
    shuffled = list(TWO_DOMAINS)
    random.Random(7).shuffle(shuffled)
    reordered = list(reversed(results))
    assert plan_isolation_round(shuffled, reordered) == plan_isolation_round(TWO_DOMAINS, results)


def test_the_baseline_screens_failing_domains_again_without_mnnvl_then_finds_the_node() -> None:
    three = TWO_DOMAINS + tuple(Candidate(f"c{i}", "C") for i in range(8))
    scenario = Scenario(candidates=three, node_faults=frozenset({"a5"}))
    verdict, rounds, _ = play(three, FaultOracle(scenario).run, plan_baseline_round)
    assert verdict.faulty == ("a5",)
    assert [r.groups[0].stage for r in rounds[:3]] == ["intra-screening", "intra-screening-no-nvl", "inter-screening"]
    no_nvl = rounds[1].groups
    assert [(g.nodes, g.mnnvl) for g in no_nvl] == [(tuple(A), False)]
    assert rounds[2].groups[0].nodes == ("b0", "c0")  # one representative per healthy domain
    assert rounds[-1].groups[0].stage == "confirmation"


def test_the_baseline_separates_an_nvlink_fault_from_a_fabric_fault() -> None:
    _, rounds, results = play(TWO_DOMAINS, oracle(nvlink_faults=frozenset({"a5"})), plan_baseline_round)
    no_nvl = next(r for r in results if r.group.stage == "intra-screening-no-nvl")
    assert not no_nvl.failed  # NVLink fault: the domain passes with MNNVL off, so bisection keeps it on
    assert all(g.mnnvl for r in rounds[3:] for g in r.groups)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """2-5 domains of 4-10 nodes; persistent faults only, at most one node in four of a domain faulty (so
    every faulty node has a healthy peer to be confirmed with), at most two links."""
    sizes = draw(st.lists(st.integers(4, 10), min_size=2, max_size=5))
    candidates = tuple(Candidate(f"d{d}n{i}", f"d{d}") for d, size in enumerate(sizes) for i in range(size))
    kinds: dict[str, set[str]] = {"node_faults": set(), "nvlink_faults": set(), "slow_nodes": set()}
    for d, size in enumerate(sizes):
        for i in draw(st.sets(st.integers(0, size - 1), max_size=size // 4)):
            kinds[draw(st.sampled_from(sorted(kinds)))].add(f"d{d}n{i}")
    pairs = [(f"d{a}", f"d{b}") for a in range(len(sizes)) for b in range(a + 1, len(sizes))]
    links = draw(st.sets(st.sampled_from(pairs), max_size=2))
    return Scenario(
        candidates=candidates,
        node_faults=frozenset(kinds["node_faults"]),
        nvlink_faults=frozenset(kinds["nvlink_faults"]),
        slow_nodes=frozenset(kinds["slow_nodes"]),
        link_faults=frozenset(links),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_any_persistent_fault_set_ends_in_an_exact_verdict_in_node_disjoint_rounds(scenario: Scenario) -> None:
    run = run_planner(plan_isolation_round, scenario)
    assert run.max_rounds_disjoint
    assert is_exact(run.verdict, scenario), run.verdict
    assert run.rounds <= 12


@st.composite
def wide_scenarios(draw: st.DrawFn) -> Scenario:
    """16-40 domains of 4-8 nodes (batched link screens; whole-domain screening from 32), up to four faulty
    nodes in distinct domains and up to two faulty links."""
    sizes = draw(st.lists(st.integers(4, 8), min_size=16, max_size=40))
    candidates = tuple(Candidate(f"d{d:02d}n{i}", f"d{d:02d}") for d, size in enumerate(sizes) for i in range(size))
    kinds: dict[str, set[str]] = {"node_faults": set(), "nvlink_faults": set(), "slow_nodes": set()}
    for d in draw(st.sets(st.integers(0, len(sizes) - 1), max_size=4)):
        kinds[draw(st.sampled_from(sorted(kinds)))].add(f"d{d:02d}n{draw(st.integers(0, sizes[d] - 1))}")
    pair = st.tuples(st.integers(0, len(sizes) - 1), st.integers(0, len(sizes) - 1)).filter(lambda p: p[0] < p[1])
    links = draw(st.sets(pair, max_size=2))
    return Scenario(
        candidates=candidates,
        node_faults=frozenset(kinds["node_faults"]),
        nvlink_faults=frozenset(kinds["nvlink_faults"]),
        slow_nodes=frozenset(kinds["slow_nodes"]),
        link_faults=frozenset((f"d{a:02d}", f"d{b:02d}") for a, b in links),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wide_scenarios())
def test_across_many_domains_any_persistent_fault_set_ends_in_an_exact_verdict(scenario: Scenario) -> None:
    run = run_planner(plan_isolation_round, scenario)
    assert run.max_rounds_disjoint
    assert is_exact(run.verdict, scenario), run.verdict
    assert run.rounds <= 16


@settings(max_examples=50, deadline=None)
@given(scenarios())
def test_every_baseline_round_is_node_disjoint(scenario: Scenario) -> None:
    assert run_planner(plan_baseline_round, scenario).max_rounds_disjoint


def never_running(first: int, *, stage: str | None = None, node: str | None = None) -> Callable[[Group], Outcome]:
    """Over `many_domains` or TWO_DOMAINS without faults: the first `first` jobs (of `stage`, or holding `node`,
    when given) never start (`not-run`: the controllers created none of their pods in time); the rest pass."""
    seen = [0]

    def outcome(group: Group) -> Outcome:
        if (stage is None or group.stage == stage) and (node is None or node in group.nodes):
            seen[0] += 1
            if seen[0] <= first:
                return "not-run"
        return "passed"

    return outcome


def test_screening_jobs_that_never_ran_are_screened_again_whole_not_split() -> None:
    # 40 domains; the first 25 domain screens of round 1 never start. They prove nothing either way: round 2
    # screens those 25 domains again as they were (splitting them would ask the slow controllers for more jobs).
    verdict, rounds, results = play(many_domains(40), never_running(25, stage="intra-screening"))
    never = [r.group for r in results if r.outcome == "not-run"]
    assert len(never) == 25
    again = [g for g in rounds[1].groups if g.stage == "intra-screening"]
    assert sorted(g.nodes for g in again) == sorted(g.nodes for g in never)
    assert not any(g.stage == "bisection" for r in rounds for g in r.groups)
    assert verdict.faulty == ()
    assert verdict.untested == ()
    assert len(verdict.healthy) == 240


def test_a_suspects_confirmation_that_never_ran_neither_blames_nor_clears_it() -> None:
    # a5 is faulty and shares its split pair with a4, which is healthy; a4's first two confirmations never start.
    # They neither blame it (two failures would) nor clear it: it is confirmed again until one runs.
    faults = oracle(node_faults=frozenset({"a5"}))
    skipped = [0]

    def outcome(group: Group) -> Outcome:
        if group.stage == "confirmation" and "a4" in group.nodes and skipped[0] < 2:
            skipped[0] += 1
            return "not-run"
        return faults(group)

    verdict, _, results = play(TWO_DOMAINS, outcome)
    assert verdict.faulty == ("a5",)
    assert "a4" in verdict.healthy
    assert len(verdict.healthy) == len(TWO_DOMAINS) - 1
    confirmations = [r.outcome for r in results if r.group.stage == "confirmation" and "a4" in r.group.nodes]
    assert confirmations == ["not-run", "not-run", "passed"]


def test_nodes_whose_jobs_never_run_are_left_untested_after_the_limit_and_nobody_is_blamed() -> None:
    # Every job holding a3 never starts: its domain's screen is tried NOT_RUN_LIMIT times in all, then its six
    # nodes are left untested with the reason, and the rest is certified.
    verdict, _, results = play(TWO_DOMAINS, never_running(100, node="a3"))
    screened = ("a2", "a3", "a4", "a5", "a6", "a7")
    assert [r.group.nodes for r in results if r.outcome == "not-run"] == [screened] * NOT_RUN_LIMIT
    assert verdict.faulty == ()
    assert [(u.node, u.reason) for u in verdict.untested] == [(node, NEVER_RAN) for node in screened]
    assert verdict.healthy == tuple(sorted(set(A + B) - set(screened)))
    assert verdict.rounds == NOT_RUN_LIMIT


def test_a_domain_with_one_node_to_lend_tests_its_open_pairs_apart_once_they_failed_together() -> None:
    # Domain A's only healthy node is a1 (a0, a2 and a3 are slow) and the link between A and C is broken. With
    # one node to lend, A's two open pairs share one test (A, B, C), which fails; the same test again would
    # fail forever, so the pairs are then tested apart and the link is proven.
    candidates = tuple(Candidate(f"{d}{i}", d.upper()) for d in "abc" for i in range(4))
    scenario = Scenario(
        candidates=candidates, slow_nodes=frozenset({"a0", "a2", "a3"}), link_faults=frozenset({("A", "C")})
    )
    verdict, rounds, _ = play(candidates, FaultOracle(scenario).run)
    assert verdict.faulty == ("a0", "a2", "a3")
    assert [f.domain for f in verdict.infrastructure_faults] == ["A|C"]
    link_tests = [[n[0] for n in g.nodes] for r in rounds for g in r.groups if g.stage == "inter-screening"]
    assert link_tests.count(["a", "b", "c"]) == 1, link_tests
    assert link_tests[-3:] == [["a", "b"], ["a", "c"], ["a", "c"]], link_tests


def test_a_star_share_that_failed_before_is_halved() -> None:
    from nvcre_argo.plan.isolation.links import _pair_tests

    pairs = {("A", "B"), ("A", "C")}
    lenders = {"A": ["a1"], "B": ["b0"], "C": ["c0"]}
    assert _pair_tests(pairs, lenders, set()) == [["A", "B", "C"]]
    assert _pair_tests(pairs, lenders, {frozenset("ABC")}) == [["A", "B"], ["A", "C"]]


def test_a_link_still_open_at_the_round_limit_leaves_its_domains_cleared_nodes_untested() -> None:
    # The link between A and B is broken and the round limit is 1: round 1 clears every node of A and B that
    # screened its own domain, but the one group spanning both failed. Their link was never seen passing, so
    # none of them is certified: each is untested, and the reason names the link.
    outcome = oracle(link_faults=frozenset({("A", "B")}))
    first = plan_isolation_round(TWO_DOMAINS, (), Settings(max_rounds=1))
    assert isinstance(first, Round)
    results = tuple(JobResult(1, g, outcome(g)) for g in first.groups)
    verdict = plan_isolation_round(TWO_DOMAINS, results, Settings(max_rounds=1))
    assert isinstance(verdict, Verdict)
    assert verdict.healthy == ()
    reasons = {u.node: u.reason for u in verdict.untested}
    assert set(reasons) == {c.node for c in TWO_DOMAINS}
    assert reasons["a5"] == "its domain's link to B was never tested (round limit reached)"
    assert reasons["b5"] == "its domain's link to A was never tested (round limit reached)"
    assert reasons["a0"] == "round limit reached"  # a representative: the failed group cleared nobody
