"""The diagnose round loop's pure parts: outcomes from group results, planning round n into the plan, and the
final verdict as failed/succeeded nodes and the isolation summary."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest

from nvcre_argo.plan.isolation import Candidate, Group, plan_isolation_round
from nvcre_argo.plan.model import Isolation, Plan, PlanError
from nvcre_argo.results import (
    HARDWARE_FAILURE_DETECTED,
    THRESHOLD_VIOLATION,
    WORKLOAD_FAILED,
    DiagnoseRecord,
    GroupResultRecord,
    ResultsError,
    failed_nodes_configmap_manifest,
    read_diagnose,
    read_failed_nodes,
)
from nvcre_argo.steps.diagnosing import decide_round, diagnose_outcome, job_outcome
from tests.bench.isolation_sim import FaultOracle, Scenario, run_planner
from tests.unit.test_confirmation import group_result

NODES = tuple(f"n{i:02d}" for i in range(12))
DOMAIN = {node: f"d{i // 4}" for i, node in enumerate(NODES)}


def diagnose_plan() -> Plan:
    return Plan(
        architecture="hopper",
        candidates=NODES,
        excluded=(),
        groups=(),
        isolation=Isolation(domains=tuple(sorted(DOMAIN.items())), min_group_size=2),
    )


def result(group: str, nodes: tuple[str, ...], outcome: str, message: str = "") -> GroupResultRecord:
    """A one-iteration group result: `passed`, `failed` (a rank crashed) or `below-threshold`."""
    reason = THRESHOLD_VIOLATION if outcome == "below-threshold" else WORKLOAD_FAILED
    failed = [] if outcome == "passed" else [(nodes[0], reason)]
    return group_result(group, nodes, failed, message, succeeded=outcome == "passed")


def play(plan: Plan, faults: Scenario) -> tuple[Plan, dict[str, GroupResultRecord], int]:
    """Run the loop as Argo does: decide round n, run its groups against the oracle, until done."""
    oracle = FaultOracle(faults)
    results: dict[str, GroupResultRecord] = {}
    number = 1
    while True:
        plan, decision = decide_round(plan, results, number)
        if decision.done:
            return plan, results, number - 1
        for group in plan.round_groups(number):
            outcome = oracle.run(Group(nodes=group.nodes, mnnvl=True, stage="bisection"))
            results[group.name] = result(group.name, group.nodes, outcome, f"{group.name} {outcome}")
        number += 1


def scenario(**faults: object) -> Scenario:
    candidates = tuple(Candidate(node, DOMAIN[node]) for node in NODES)
    return Scenario(candidates=candidates, **faults)  # type: ignore[arg-type]


def test_a_group_passes_fails_or_is_below_threshold_by_its_whole_result() -> None:
    nodes = ("n00", "n01")
    assert job_outcome(result("g", nodes, "passed")) == "passed"
    assert job_outcome(result("g", nodes, "failed")) == "failed"
    assert job_outcome(result("g", nodes, "below-threshold")) == "below-threshold"
    assert job_outcome(None) == "failed"  # its run step never finished: not evidence the nodes are fine
    unreadable = result("g", nodes, "passed")
    unreadable["iterations"][0]["succeeded"] = False  # the measurement could not be read, nobody blamed
    assert job_outcome(unreadable) == "failed"
    never_started = result("g", nodes, "failed")
    never_started["iterations"][0].update(failed_nodes=[], never_ran=True)  # no pod was created in time
    assert job_outcome(never_started) == "not-run"


def test_round_one_is_planned_into_the_plan_with_round_and_stage_and_re_emitted_when_asked_again() -> None:
    plan, decision = decide_round(diagnose_plan(), {}, 1)

    assert decision.groups == tuple(f"r1-g{i}" for i in range(len(decision.groups)))
    assert {group.round for group in plan.groups} == {1}
    assert all(group.stage for group in plan.groups)
    assert Plan.from_json(plan.to_json()) == plan
    again, same = decide_round(plan, {}, 1)
    assert (again, same) == (plan, decision)


def test_each_decision_says_where_the_isolation_stands() -> None:
    plan, first = decide_round(diagnose_plan(), {}, 1)
    passed = {name: result(name, group.nodes, "passed") for name, group in zip(first.groups, plan.groups, strict=True)}

    _, done = decide_round(plan, passed, 2)

    assert first.progress.startswith(f"round 1: {len(first.groups)} group(s), 12 node-jobs (")
    assert (done.done, done.progress) == (True, "isolation complete after 1 round(s); recording the verdict")


def test_a_round_cannot_be_planned_before_the_one_it_follows() -> None:
    with pytest.raises(PlanError, match="round 3 cannot be planned: the plan's last round is 0"):
        decide_round(diagnose_plan(), {}, 3)


def test_the_loop_takes_the_pure_planners_rounds_and_convicts_exactly_the_faulty_nodes() -> None:
    faults = scenario(node_faults=frozenset({"n05"}), slow_nodes=frozenset({"n09"}))

    plan, results, rounds = play(diagnose_plan(), faults)
    outcome = diagnose_outcome(plan, results)

    assert rounds == run_planner(plan_isolation_round, faults).rounds
    assert {(node.name, node.reason) for node in outcome.failed} == {
        ("n05", WORKLOAD_FAILED),
        ("n09", THRESHOLD_VIOLATION),
    }
    assert "diagnose: failed in" in outcome.failed[0].message
    assert set(outcome.succeeded) == set(NODES) - {"n05", "n09"}
    assert outcome.findings == []
    assert outcome.record["rounds"] == rounds
    assert outcome.record["jobs"] == len(results)
    assert [entry["round"] for entry in outcome.record["history"]] == list(range(1, rounds + 1))


def test_a_node_the_health_check_caught_is_convicted_as_a_hardware_failure() -> None:
    plan, results, _ = play(diagnose_plan(), scenario(node_faults=frozenset({"n05"})))
    for record in results.values():
        if "n05" in record["nodes"] and not record["iterations"][0]["succeeded"]:
            caught = {"name": "n05", "reason": HARDWARE_FAILURE_DETECTED, "message": "health check fired"}
            record["iterations"][0]["failed_nodes"] = [caught]  # type: ignore[list-item]

    (failed,) = diagnose_outcome(plan, results).failed

    assert (failed.name, failed.reason) == ("n05", HARDWARE_FAILURE_DETECTED)


def test_a_link_fault_is_a_finding_with_no_node_blamed() -> None:
    faults = scenario(link_faults=frozenset({("d0", "d2")}))

    plan, results, _ = play(diagnose_plan(), faults)
    outcome = diagnose_outcome(plan, results)

    assert outcome.failed == []
    assert outcome.findings == ["link fault between domains d0 and d2"]
    assert [fault["domain"] for fault in outcome.record["infrastructureFaults"]] == ["d0|d2"]


def test_the_verdict_is_refused_while_rounds_are_left() -> None:
    plan, _ = decide_round(diagnose_plan(), {}, 1)
    failing = {group.name: result(group.name, group.nodes, "failed") for group in plan.round_groups(1)}

    with pytest.raises(PlanError, match="the isolation has not finished"):
        diagnose_outcome(plan, failing)


def test_the_isolation_summary_rides_in_the_failed_nodes_configmap_and_reads_back() -> None:
    plan, results, _ = play(diagnose_plan(), scenario(node_faults=frozenset({"n01"})))
    outcome = diagnose_outcome(plan, results)

    manifest = failed_nodes_configmap_manifest("failed-nodes-x", "ns", outcome.failed, diagnose=outcome.record)

    assert [node.name for node in read_failed_nodes(manifest)] == ["n01"]
    assert read_diagnose(manifest) == outcome.record
    assert read_diagnose(failed_nodes_configmap_manifest("failed-nodes-x", "ns", [])) is None


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"rounds": "3"}, "diagnose.json.gz.rounds"),
        ({"infrastructureFaults": [{"domain": "a|b", "groupA": [], "groupB": []}]}, "infrastructureFaults[0].stage"),
        ({"untested": [{"node": "n1"}]}, "untested[0].reason"),
    ],
)
def test_a_malformed_isolation_summary_is_an_error_naming_the_field(change: Mapping[str, object], where: str) -> None:
    record: DiagnoseRecord = {
        "rounds": 1,
        "jobs": 1,
        "nodeJobs": 2,
        "faulty": [],
        "healthy": 2,
        "infrastructureFaults": [],
        "untested": [],
        "history": [],
    }
    broken = {**record, **change}
    manifest = failed_nodes_configmap_manifest("f", "ns", [], diagnose=broken)  # type: ignore[arg-type]

    with pytest.raises(ResultsError, match=re.escape(where)):
        read_diagnose(manifest)
