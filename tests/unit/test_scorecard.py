"""The scorecard's definitions on hand-made runs: outcomes per (node, category), the figures derived from them,
the crash groups, and the seeded fault placement.

Every expected value is worked out from the inputs written here (a two-node group with one crash, a cordoned
node left out of a later plan, ...), not read off the scorecard's output.
"""

from __future__ import annotations

import itertools
import json
import random
import textwrap
from pathlib import Path

import pytest
import yaml

from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.results import HARDWARE_FAILURE_DETECTED, THRESHOLD_VIOLATION, WORKLOAD_FAILED
from nvcre_argo.steps.health import compile_health_check, health_expression
from tests.bench import scorecard, scorecard_run
from tests.bench.scorecard_faults import (
    HEALTH_CONDITION,
    HEALTH_TAINT,
    KIND_NAMES,
    KINDS,
    Injection,
    RunSpec,
    batch_kinds,
    fault_capacity,
    place_faults,
    plan_runs,
)
from tests.bench.scorecard_scoring import (
    CATEGORY_ORDER,
    EXPECTATIONS,
    CategoryObservation,
    NodeVerdict,
    crash_groups,
    expected_result,
    kinds_seen_in,
    score_category,
    tally,
)
from tests.bench.scorecard_tables import CostLine, category_cell, cost_lines
from tests.sim.faults import load_fault_plan

WF, TV, HW = WORKLOAD_FAILED, THRESHOLD_VIOLATION, HARDWARE_FAILURE_DETECTED
PAIRS = (("n1", "n2"), ("n3", "n4"), ("n5", "n6"), ("n7", "n8"))


def observed(
    domain: str,
    failed: dict[str, tuple[str, ...]],
    succeeded: tuple[str, ...] = (),
    groups: tuple[tuple[str, ...], ...] = PAIRS,
) -> CategoryObservation:
    return CategoryObservation(
        domain=domain,
        variant="v",
        status="Failed" if failed else "Succeeded",
        failed={node: dict.fromkeys(reasons, "why") for node, reasons in failed.items()},
        succeeded=frozenset(succeeded),
        groups=groups,
    )


def outcomes(verdicts: list[NodeVerdict]) -> dict[str, str]:
    return {verdict.node: verdict.outcome for verdict in verdicts}


def test_a_crash_blamed_alone_is_detected_and_its_blamed_groupmate_is_a_false_positive_caused_by_it() -> None:
    kind_of = {"n1": "crash"}
    alone = score_category(kind_of, observed("communication", {"n1": (WF,)}, ("n3", "n4")))
    assert outcomes(alone) == {"n1": "detected"}

    whole = score_category(kind_of, observed("communication", {"n1": (WF,), "n2": (WF,)}))
    assert outcomes(whole) == {"n1": "detected", "n2": "false-positive"}
    assert whole[1].causes == ("crash",)


def test_a_fault_reported_with_another_reason_is_a_wrong_reason_and_any_expected_reason_among_several_counts() -> None:
    wrong = score_category({"n3": "hang"}, observed("communication", {"n3": (TV,)}))
    assert outcomes(wrong) == {"n3": "wrong-reason"}

    both = score_category({"n3": "health-taint"}, observed("communication", {"n3": (HW, WF)}))
    assert outcomes(both) == {"n3": "detected"}
    assert both[0].reasons == (HW, WF)


def test_a_visible_fault_certified_is_missed_and_one_in_neither_list_is_untested() -> None:
    certified = score_category({"n5": "health-taint"}, observed("communication", {}, ("n5", "n6")))
    assert outcomes(certified) == {"n5": "missed"}

    absent = score_category({"n5": "crash"}, observed("communication", {}, ("n6",)))
    assert outcomes(absent) == {"n5": "untested"}


def test_a_health_marked_node_left_out_of_a_later_plan_is_found_but_certified_there_is_missed() -> None:
    excluded = score_category({"n7": "health-cordon"}, observed("diagnostics", {}, ("n8",)))
    assert outcomes(excluded) == {"n7": "excluded"}

    certified = score_category({"n7": "health-condition"}, observed("training", {}, ("n7", "n8")))
    assert outcomes(certified) == {"n7": "missed"}

    # Any reason will do once the node is marked before the category is planned.
    blocked = score_category({"n7": "notready"}, observed("diagnostics", {"n7": (WF,)}))
    assert outcomes(blocked) == {"n7": "detected"}


def test_a_transient_node_fails_once_without_being_a_miss_and_is_a_false_positive_later() -> None:
    first = score_category({"n1": "transient"}, observed("communication", {"n1": (WF,)}))
    assert outcomes(first) == {"n1": "failed-once"}
    passed = score_category({"n1": "transient"}, observed("communication", {}, ("n1", "n2")))
    assert outcomes(passed) == {"n1": "passed-once"}

    later = score_category({"n1": "transient"}, observed("diagnostics", {"n1": (WF,)}, groups=(("n1",),)))
    assert outcomes(later) == {"n1": "false-positive"}
    assert later[0].causes == ("transient",)


def test_a_fault_the_category_cannot_see_is_unscored_unless_reported_and_a_lone_healthy_report_has_no_cause() -> None:
    unseen = score_category({"n3": "slow-nccl"}, observed("diagnostics", {}, ("n3",), groups=(("n3",),)))
    assert unseen == []

    reported = score_category({"n3": "datacheck"}, observed("training", {"n3": (WF,)}))
    assert [(v.outcome, v.causes) for v in reported] == [("false-positive", ("datacheck",))]

    healthy = score_category({}, observed("communication", {"n8": (WF,)}))
    assert [(v.node, v.outcome, v.causes) for v in healthy] == [("n8", "false-positive", ("none",))]


def test_tally_counts_recall_and_precision_per_kind_with_false_positives_charged_to_the_kind_in_their_group() -> None:
    verdicts = [
        NodeVerdict("n1", "communication", "crash", "detected", (WF,)),
        NodeVerdict("n2", "communication", None, "false-positive", (WF,), ("crash",)),
        NodeVerdict("n1", "diagnostics", "crash", "detected", (WF,)),
        NodeVerdict("n1", "training", "crash", "missed"),
        NodeVerdict("n3", "communication", "slow-nccl", "wrong-reason", (WF,)),
        NodeVerdict("n5", "diagnostics", "health-cordon", "excluded"),
        NodeVerdict("n7", "communication", "transient", "failed-once", (WF,)),
    ]
    crash = tally(verdicts, kind="crash")
    assert (crash.expected, crash.found, crash["false-positive"]) == (3, 2, 1)
    assert crash.recall == pytest.approx(2 / 3)
    assert crash.precision == pytest.approx(2 / 3)  # two right reports, one healthy groupmate

    slow = tally(verdicts, kind="slow-nccl")
    assert (slow.recall, slow.precision) == (0.0, 1.0)  # reported, so precise, but with the wrong reason

    total = tally(verdicts)
    assert (total.expected, total.found, total.correct_reports) == (5, 3, 4)
    assert total.precision == pytest.approx(4 / 5)
    assert tally(verdicts, kind="crash", domain="training")["missed"] == 1
    assert tally([]).recall is None
    assert tally([]).precision is None


def test_crash_groups_tell_a_crash_blamed_alone_from_a_whole_group_blamed() -> None:
    run = RunSpec(
        "r",
        (
            Injection("n1", "crash", {"fault": "crash", "afterSeconds": 3.5}),
            Injection("n3", "transient", {"fault": "transient", "afterSeconds": 9.0}),
            Injection("n5", "hang", {"fault": "hang"}),
        ),
    )
    communication = observed("communication", {"n1": (WF,), "n3": (WF,), "n4": (WF,), "n5": (WF,), "n6": (WF,)})
    found = crash_groups(run, communication)
    assert [(g.node, g.after_seconds, g.blamed, g.attributed, g.whole_group) for g in found] == [
        ("n1", 3.5, ("n1",), True, False),
        ("n3", 9.0, ("n3", "n4"), False, True),
    ]
    # After its first workload the transient node is healthy; a per-node category has no groupmates.
    assert [g.node for g in crash_groups(run, observed("training", {"n1": (WF,)}))] == ["n1"]
    assert crash_groups(run, observed("diagnostics", {"n1": (WF,)}, groups=(("n1",), ("n2",)))) == []


def test_only_a_run_without_faults_should_pass() -> None:
    assert expected_result(RunSpec("clean", ())) == "PASSED"
    assert expected_result(RunSpec("r", (Injection("n1", "transient", {"fault": "transient"}),))) == "FAILED"


def test_every_kind_has_an_expectation_in_every_category() -> None:
    assert set(EXPECTATIONS) == {(kind, domain) for kind in KIND_NAMES for domain in CATEGORY_ORDER}


def test_the_expectation_table_in_the_scorecard_docstring_is_the_one_scored() -> None:
    """The docstring is what a reader trusts; it must say what `EXPECTATIONS` does."""
    lines = textwrap.dedent((scorecard.__doc__ or "").split("WF WorkloadFailed", 1)[1]).splitlines()
    header = next(index for index, line in enumerate(lines) if line.strip().startswith("kind "))
    columns = [lines[header].index(name) for name in (*CATEGORY_ORDER, "why")]
    short = {WF: "WF", TV: "TV", HW: "HW"}
    for line in lines[header + 1 : header + 1 + len(KIND_NAMES)]:
        kind = line.split()[0]
        cells = [line[start:end].strip() for start, end in itertools.pairwise(columns)]
        for domain, cell in zip(CATEGORY_ORDER, cells, strict=True):
            expected = EXPECTATIONS[(kind, domain)]
            if expected.transient:
                wanted = "failed once"
            elif not expected.visible:
                wanted = "-"
            elif expected.excluded_ok:
                wanted = "not certified"
            else:
                wanted = "/".join(short[reason] for reason in sorted(expected.reasons))
            assert cell == wanted, (kind, domain)


def test_a_category_cell_shows_found_over_expected_and_the_other_outcomes_in_short() -> None:
    verdicts = [
        NodeVerdict("n1", "communication", "crash", "detected"),
        NodeVerdict("n3", "communication", "crash", "missed"),
        NodeVerdict("n2", "communication", None, "false-positive", (WF,), ("crash",)),
    ]
    assert category_cell(tally(verdicts, kind="crash")) == "1/2 M1 FP1"
    assert category_cell(tally([])) == "-"


def test_kinds_that_do_not_fit_one_run_are_split_with_the_long_ones_together_and_otherwise_copied() -> None:
    assert fault_capacity(8) == 6  # two pairs of 16 nodes stay healthy
    assert fault_capacity(32) == 24  # a quarter stays healthy

    split = batch_kinds(KINDS, fault_capacity(8))
    assert [len(batch) for batch in split] == [6, 5]
    assert all(kind.long for kind in split[0])
    assert not any(kind.long for kind in split[1])

    (copied,) = batch_kinds(KINDS, fault_capacity(32))
    assert sorted(kind.name for kind in copied) == sorted(KIND_NAMES * 2)
    with pytest.raises(ValueError, match="too small"):
        batch_kinds(KINDS, fault_capacity(2))


def test_faults_sit_one_per_group_on_random_nodes_and_the_same_seed_places_them_the_same_way() -> None:
    groups = [[f"n{2 * index + 1}", f"n{2 * index + 2}"] for index in range(32)]
    runs = plan_runs(groups, random.Random(7))
    assert [run.name for run in runs] == ["faults-1", "no-fault"]
    faulty_groups = [index for index, group in enumerate(groups) for item in runs[0].injections if item.node in group]
    assert len(faulty_groups) == len(set(faulty_groups)) == 2 * len(KIND_NAMES)
    assert runs == plan_runs(groups, random.Random(7))
    assert runs != plan_runs(groups, random.Random(8))
    for run in runs:
        plan = load_fault_plan(yaml.safe_dump(run.fault_plan({"durationSeconds": 4})))
        assert set(plan.nodes) == {item.node for item in run.injections}


def test_placing_more_faults_than_groups_is_refused() -> None:
    with pytest.raises(ValueError, match="need as many groups"):
        place_faults("r", KINDS[:3], [["n1", "n2"], ["n3", "n4"]], random.Random(1))


def test_without_marks_the_fault_plan_keeps_every_fault_but_the_node_marks() -> None:
    run = RunSpec(
        "r",
        (
            Injection("n1", "crash", {"fault": "crash", "afterSeconds": 2.0}),
            Injection("n3", "health-taint", {"fault": "health", "afterSeconds": 1.0, "cordon": True}),
            Injection("n5", "notready", {"fault": "notready", "afterSeconds": 1.0}),
        ),
    )
    assert run.has_marks
    assert set(run.fault_plan({})["nodes"]) == {"n1", "n3", "n5"}
    assert run.fault_plan({"durationSeconds": 4}, marks=False) == {
        "defaults": {"durationSeconds": 4},
        "nodes": {"n1": {"fault": "crash", "afterSeconds": 2.0}},
    }
    assert not RunSpec("clean", ()).has_marks


def test_only_kinds_a_running_category_can_see_are_injected() -> None:
    without_training = {kind.name for kind in kinds_seen_in(("communication", "diagnostics"))}
    assert without_training == set(KIND_NAMES) - {"slow-training"}
    assert {kind.name for kind in kinds_seen_in(CATEGORY_ORDER)} == set(KIND_NAMES)
    assert {kind.name for kind in kinds_seen_in(("diagnostics",))} == set(KIND_NAMES) - {
        "transient",
        "slow-nccl",
        "slow-training",
        "datacheck",
    }


def test_a_planned_run_that_failed_or_never_ran_makes_the_scorecard_incomplete() -> None:
    done = scorecard.SizeRecord(size=16, seed=1, planned_runs=["faults-1", "no-fault"])
    done.runs = [scorecard_run.RunRecord("faults-1"), scorecard_run.RunRecord("no-fault")]
    assert scorecard.incomplete_runs([done]) == []

    broken = scorecard.SizeRecord(size=64, seed=1, planned_runs=["faults-1", "no-fault"], error="ScenarioError")
    broken.runs = [scorecard_run.RunRecord("faults-1", error="ScenarioError: timed out")]
    assert scorecard.incomplete_runs([done, broken]) == ["64/faults-1", "64/no-fault"]
    assert scorecard.incomplete_runs([scorecard.SizeRecord(size=8, seed=1, error="plan")]) == ["8/(planning)"]


def test_a_workflow_runs_from_its_start_to_its_finish_and_an_unfinished_one_has_no_duration() -> None:
    finished = {"status": {"startedAt": "2026-01-01T00:00:05Z", "finishedAt": "2026-01-01T00:02:10Z"}}
    assert scorecard_run.workflow_seconds(finished) == 125.0
    assert scorecard_run.workflow_seconds({"status": {"startedAt": "2026-01-01T00:00:05Z"}}) is None
    assert scorecard_run.workflow_seconds(None) is None


def test_a_saved_scorecard_reads_back_into_the_records_it_was_written_from() -> None:
    run = scorecard_run.RunRecord("faults-1", result="FAILED", expected_result="FAILED")
    run.verdicts = [NodeVerdict("n2", "communication", None, "false-positive", (WF,), ("crash",))]
    run.crash_groups = [
        crash_groups(
            RunSpec("r", (Injection("n1", "crash", {"afterSeconds": 2.5}),)),
            observed("communication", {"n1": (WF,), "n2": (WF,)}),
        )[0]
    ]
    record = scorecard.SizeRecord(size=16, seed=3, planned_runs=["faults-1"], runs=[run])
    document = json.loads(json.dumps(scorecard.to_json([record], scorecard_run.Settings(seed=3)), default=str))
    assert scorecard.records_from_json(document) == [record]
    assert document["order"] == ["communication", "diagnostics"]


def test_a_size_may_go_without_its_no_fault_run() -> None:
    groups = [[f"n{2 * index + 1}", f"n{2 * index + 2}"] for index in range(8)]
    runs = plan_runs(groups, random.Random(1), no_fault=False)
    assert [run.name for run in runs] == ["faults-1", "faults-2"]


def test_the_scorecards_catalog_gives_each_entry_a_health_expression_that_catches_every_mark_it_injects(
    tmp_path: Path,
) -> None:
    catalog = load_catalog([scorecard_run.write_health_catalog(tmp_path)])
    check = compile_health_check(health_expression(catalog.entries["communication/nccl-all-reduce"]))
    ready = {"type": "Ready", "status": "True"}
    healthy = {"metadata": {"name": "gpu-node-1"}, "spec": {}, "status": {"conditions": [ready]}}
    condition = {**HEALTH_CONDITION}
    marked = {
        "cordon": {**healthy, "spec": {"unschedulable": True}},
        "taint": {**healthy, "spec": {"taints": [HEALTH_TAINT]}},
        "condition": {**healthy, "status": {"conditions": [ready, condition]}},
        "notready": {**healthy, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
    }

    assert {name: check.fires(node) for name, node in marked.items()} == dict.fromkeys(marked, True)
    assert not check.fires(healthy)
    assert not check.fires({**healthy, "spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}})
    assert {entry.health_expression for key, entry in catalog.entries.items() if key in CATALOG_KEYS} == {
        scorecard_run.HEALTH_EXPRESSION
    }


CATALOG_KEYS = {f"{domain}/{variant}" for domain, variant in scorecard_run.VARIANTS.items()}


def test_the_communication_category_is_diagnosed_by_default_and_pairs_on_request() -> None:
    by_scale = {
        scale: scorecard_run.categories(scorecard_run.Settings(communication=scale))[0]["options"]
        for scale in ("diagnose", "pairs")
    }
    assert (by_scale["diagnose"].get("testScale"), by_scale["diagnose"].get("nodesPerJob")) == ("diagnose", None)
    assert (by_scale["pairs"].get("testScale"), by_scale["pairs"].get("nodesPerJob")) == (None, 2)


def test_a_runs_costs_print_its_objects_step_memory_and_each_categorys_planning() -> None:
    run = CostLine(
        "no-fault",
        [{"kind": "Workflow", "count": 4, "name": "cert-1", "size_bytes": 296_895}],
        {"run-groups": 351.2},
        [("communication", {"plan": 4.0, "plan-round": 12.0}), ("diagnostics", {"plan": 8.0}), ("training", {})],
    )
    lines = cost_lines([run])
    assert lines[-1] == (
        "  no-fault: run-groups 351; planning: communication plan 4 s, plan-round 12 s; diagnostics plan 8 s"
    )
    assert "objects over 1 MiB: 0" in lines


def test_the_scorecard_prints_costs_only_for_runs_that_measured_them() -> None:
    measured = scorecard_run.RunRecord(
        "no-fault",
        categories=[{"domain": "diagnostics", "planSeconds": {"plan": 3.0}}],
        largest_objects=[{"kind": "ConfigMap", "count": 1, "name": "cm", "size_bytes": 10}],
        step_memory_mib={"plan": 90.0},
    )
    old = scorecard_run.RunRecord("faults-1")  # a JSON file written before the costs were measured
    lines = scorecard.report("== t ==", [old, measured], ["diagnostics"])
    assert "  no-fault: plan 90; planning: diagnostics plan 3 s" in lines
    assert not any(line.startswith("  faults-1:") for line in lines)
    assert not any("planning" in line for line in scorecard.report("== t ==", [measured], ["diagnostics"], costs=False))
