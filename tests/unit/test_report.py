"""Reports: the model's verdict and counts, and the text, JSON and JUnit renderings of it (contract §7.13).

Statuses are built with the watcher's own `compute_status` from Argo-shaped Workflows, so a report here is
what `nvcre-argo report` would print for a real run; failed nodes are ConfigMap entries as §3.7 defines them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from nvcre_argo.api.status import CategoryStatus, CertificationStatus
from nvcre_argo.report.model import CategoryResults, FailedNode, Report, build_report, exit_code
from nvcre_argo.report.render import escape, render_json, render_junit, render_text
from nvcre_argo.results import DiagnoseRecord
from nvcre_argo.watch.diagnose import diagnose_summary
from nvcre_argo.watch.status import compute_status

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CERT: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "gpu-cert", "namespace": "nvcre", "generation": 1},
    "spec": {
        "enableMNNVL": False,
        "categories": [
            {"domain": "communication", "variant": "nccl-all-reduce"},
            {"domain": "training", "variant": "nemotron5-8b", "options": {"enableMNNVL": True}},
        ],
    },
}
FAILED_NODES = [
    {"name": "node-b", "reason": "WorkloadFailed", "message": "TrainJob gpu-cert-1-g0 failed"},
    {"name": "node-a", "reason": "HardwareFailureDetected", "message": "Xid 79: GPU has fallen off the bus"},
]
RESULTS = {
    0: CategoryResults(succeeded_nodes=["node-a", "node-b", "node-c"], figures={"busBandwidthGBps": 351.25}),
    1: CategoryResults(failed_nodes=FAILED_NODES, succeeded_nodes=["node-c"], figures={"goodputRatio": 0.9134}),
}


def workflow(name: str, phase: str, role: str, index: int | None = None, message: str = "") -> dict[str, Any]:
    labels = {"nvcre.nvidia.com/certification": "gpu-cert", "nvcre.nvidia.com/role": role}
    if index is not None:
        labels["nvcre.nvidia.com/category-index"] = str(index)
    return {
        "metadata": {"name": name, "namespace": "nvcre", "uid": f"uid-{name}", "labels": labels},
        "status": {"phase": phase, "message": message},
    }


def status_for(*phases: str, excluded: int | None = None) -> CertificationStatus:
    workflows = [workflow("gpu-cert-abcde", "Running", "certification")]
    workflows += [
        workflow(
            f"gpu-cert-abcde-{index}", phase, "category", index, "child 'group(0)' failed" if phase == "Failed" else ""
        )
        for index, phase in enumerate(phases)
    ]
    return compute_status(CERT, workflows, None, NOW, excluded_nodes=excluded)


def failed_report() -> Report:
    return build_report(CERT, status_for("Succeeded", "Failed"), RESULTS)


def passed_report() -> Report:
    results = {0: RESULTS[0], 1: CategoryResults(succeeded_nodes=["node-a", "node-b", "node-c"])}
    return build_report(CERT, status_for("Succeeded", "Succeeded"), results)


def test_the_model_orders_failed_nodes_and_takes_the_verdict_from_the_status() -> None:
    report = failed_report()
    assert report.result == "FAILED"
    assert report.passed == "1/2"
    second = report.categories[1]
    assert [node.name for node in second.failed_nodes] == ["node-a", "node-b"]
    assert second.failed_nodes[0] == FailedNode(
        "node-a", "HardwareFailureDetected", "Xid 79: GPU has fallen off the bus"
    )
    assert report.failed_node_names == ("node-a", "node-b")
    assert report.failed_node_count == 2
    assert (report.categories[0].mnnvl, report.categories[1].mnnvl, report.mnnvl) == (False, True, False)
    assert report.categories[1].workflow == "gpu-cert-abcde-1"


def test_a_node_failing_in_two_categories_counts_once() -> None:
    results = {0: CategoryResults(failed_nodes=FAILED_NODES[:1]), 1: CategoryResults(failed_nodes=FAILED_NODES)}
    report = build_report(CERT, status_for("Failed", "Failed"), results)
    assert report.failed_node_count == 2


def test_without_decoded_configmaps_the_failed_node_count_is_the_statuss() -> None:
    status = status_for("Failed", "Succeeded").model_copy(update={"failed_nodes": 7})
    assert build_report(CERT, status).failed_node_count == 7
    assert build_report(CERT, None).failed_node_count is None


def test_without_a_status_every_category_is_pending_and_the_result_running() -> None:
    report = build_report(CERT, None)
    assert [category.status for category in report.categories] == ["Pending", "Pending"]
    assert report.result == "RUNNING"


def test_a_status_without_a_result_word_gets_one_derived_from_its_categories() -> None:
    status = CertificationStatus(
        excluded_nodes=2,
        category_statuses=[
            CategoryStatus(domain="communication", variant="nccl-all-reduce", status="Succeeded"),
            CategoryStatus(domain="training", variant="nemotron5-8b", status="Succeeded"),
        ],
    )
    assert build_report(CERT, status).result == "INCOMPLETE"


def test_text_has_a_header_one_block_per_category_a_summary_and_the_verdict_last() -> None:
    text = render_text(failed_report())
    lines = text.splitlines()
    assert lines[:4] == [
        "Certification: gpu-cert",
        "Namespace:     nvcre",
        "Result:        FAILED",
        "MNNVL:         off",
    ]
    first = lines.index("[1/2] communication/nccl-all-reduce")
    second = lines.index("[2/2] training/nemotron5-8b")
    summary = lines.index("Summary")
    assert first < second < summary
    block = lines[second:summary]
    assert "  Status:    Failed" in block
    assert "  MNNVL:     on" in block
    assert "  Nodes:     1 passed, 2 failed" in block
    assert "    goodputRatio  0.913" in block
    assert "    node-a  HardwareFailureDetected  Xid 79: GPU has fallen off the bus" in block
    assert "    node-b  WorkloadFailed           TrainJob gpu-cert-1-g0 failed" in block
    assert "    busBandwidthGBps  351.25" in lines[first:second]
    assert "  Categories:     1/2 passed" in lines
    assert "  Failed nodes:   2" in lines
    assert lines[-1].startswith("Verdict: FAILED")


@pytest.mark.parametrize(
    ("phases", "excluded", "verdict", "code"),
    [
        pytest.param(("Succeeded", "Succeeded"), 0, "Verdict: PASSED", 0, id="passed"),
        pytest.param(("Succeeded", "Failed"), 0, "Verdict: FAILED", 1, id="failed"),
        pytest.param(("Succeeded", "Succeeded"), 4, "Verdict: INCOMPLETE", 1, id="incomplete"),
        pytest.param(("Succeeded", "Running"), 0, "Verdict: RUNNING", 1, id="running"),
    ],
)
def test_exit_code_is_zero_only_for_passed_and_the_verdict_line_says_why(
    phases: tuple[str, ...], excluded: int, verdict: str, code: int
) -> None:
    report = build_report(CERT, status_for(*phases, excluded=excluded))
    assert exit_code(report) == code
    assert render_text(report).splitlines()[-1].startswith(verdict)


def test_cluster_text_cannot_inject_terminal_escapes_or_break_lines() -> None:
    nasty = [{"name": "node-x", "reason": "WorkloadFailed", "message": "red\x1b[31m\nnext line\u202etxt"}]
    report = build_report(CERT, status_for("Succeeded", "Failed"), {1: CategoryResults(failed_nodes=nasty)})
    text = render_text(report)
    assert "\x1b" not in text
    assert "\u202e" not in text
    assert "    node-x  WorkloadFailed  red\\x1b[31m\\x0anext line\\u202etxt" in text.splitlines()


def test_escape_keeps_printable_unicode() -> None:
    assert escape("GB200 ✓ Ünïcode") == "GB200 ✓ Ünïcode"


def test_json_has_stable_sorted_keys_and_the_same_bytes_every_time() -> None:
    first = render_json(failed_report())
    assert first == render_json(failed_report())
    document = json.loads(first)
    assert list(document) == sorted(document)
    assert first.endswith("}\n")
    assert document["result"] == "FAILED"
    assert document["failedNodes"] == ["node-a", "node-b"]
    category = document["categories"][1]
    assert list(category) == sorted(category)
    assert category["failedNodes"][0] == {
        "name": "node-a",
        "reason": "HardwareFailureDetected",
        "message": "Xid 79: GPU has fallen off the bus",
    }
    assert (category["nodesPassed"], category["nodesFailed"], category["mnnvl"]) == (1, 2, True)
    assert document["categories"][0]["figures"] == {"busBandwidthGBps": 351.25}


def test_json_key_order_does_not_depend_on_input_order() -> None:
    shuffled = {
        1: CategoryResults(failed_nodes=list(reversed(FAILED_NODES)), figures={"b": 1.0, "a": 2.0}),
        0: RESULTS[0],
    }
    ordered = {0: RESULTS[0], 1: CategoryResults(failed_nodes=FAILED_NODES, figures={"a": 2.0, "b": 1.0})}
    status = status_for("Succeeded", "Failed")
    assert render_json(build_report(CERT, status, shuffled)) == render_json(build_report(CERT, status, ordered))


def _suite(xml: str) -> ET.Element:
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return suites[0]


def test_junit_has_one_suite_and_one_testcase_per_category_with_failures_for_failed_ones() -> None:
    xml = render_junit(failed_report())
    assert xml.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    suite = _suite(xml)
    assert suite.get("name") == "nvcre/gpu-cert"
    assert {case.get("classname") for case in suite.findall("testcase")} == {"nvcre.gpu-cert"}
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == ["communication/nccl-all-reduce", "training/nemotron5-8b"]
    assert cases[0].find("failure") is None
    assert cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "child 'group(0)' failed"
    assert (failure.text or "").splitlines() == [
        "node-a: HardwareFailureDetected: Xid 79: GPU has fallen off the bus",
        "node-b: WorkloadFailed: TrainJob gpu-cert-1-g0 failed",
    ]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    properties = {item.get("name"): item.get("value") for item in suite.iter("property")}
    assert properties["result"] == "FAILED"


def test_junit_is_deterministic() -> None:
    assert render_junit(failed_report()) == render_junit(failed_report())


def test_junit_of_a_passed_certification_has_no_failures_or_errors() -> None:
    suite = _suite(render_junit(passed_report()))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "0")
    assert all(case.find("failure") is None and case.find("error") is None for case in suite.findall("testcase"))


def test_junit_marks_unfinished_categories_as_errors() -> None:
    suite = _suite(render_junit(build_report(CERT, status_for("Succeeded", "Running"))))
    cases = suite.findall("testcase")
    error = cases[1].find("error")
    assert error is not None
    assert error.get("type") == "InProgress"
    assert (suite.get("tests"), suite.get("errors")) == ("2", "1")


def test_junit_of_an_incomplete_certification_adds_an_error_so_ci_is_not_green() -> None:
    suite = _suite(render_junit(build_report(CERT, status_for("Succeeded", "Succeeded", excluded=3))))
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases][-1] == "certification"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "1")


def test_junit_stays_valid_xml_with_control_characters_in_node_messages() -> None:
    nasty = [{"name": "node-x", "reason": "WorkloadFailed", "message": "bell\x07 esc\x1b nul\x00 <&>"}]
    report = build_report(CERT, status_for("Succeeded", "Failed"), {1: CategoryResults(failed_nodes=nasty)})
    suite = _suite(render_junit(report))
    failure = suite.findall("testcase")[1].find("failure")
    assert failure is not None
    assert failure.text == "node-x: WorkloadFailed: bell\\x07 esc\\x1b nul\\x00 <&>"


def test_a_result_configmap_that_is_gone_is_said_in_text_and_json() -> None:
    results = {**RESULTS, 1: CategoryResults(missing=["failed-nodes-abcdef12"])}
    report = build_report(CERT, status_for("Succeeded", "Failed"), results)

    text = render_text(report)
    document = json.loads(render_json(report))

    assert "  Missing:   ConfigMap failed-nodes-abcdef12 no longer exists: its nodes cannot be listed" in text
    assert [category["missingResults"] for category in document["categories"]] == [[], ["failed-nodes-abcdef12"]]


# --- testScale: diagnose --------------------------------------------------------------------------------------

LINK = "sim-cluster.1|sim-cluster.2"
DIAGNOSE_RECORD: DiagnoseRecord = {
    "rounds": 3,
    "jobs": 7,
    "nodeJobs": 40,
    "faulty": [],
    "healthy": 14,
    "infrastructureFaults": [
        {
            "domain": LINK,
            "groupA": ["gpu-node-09", "gpu-node-10"],
            "groupB": ["gpu-node-17", "gpu-node-18", "gpu-node-19", "gpu-node-20", "gpu-node-21", "gpu-node-22"],
            "stage": "inter-screening",
        }
    ],
    "untested": [{"node": "gpu-node-31", "reason": "no cleared node of its domain left to pair with"}],
    "history": [],
}


def diagnose_status(record: DiagnoseRecord = DIAGNOSE_RECORD) -> CertificationStatus:
    """The watcher's status of a run whose first category (diagnose) found a link fault and failed."""
    workflows = [
        workflow("gpu-cert-abcde", "Failed", "certification"),
        workflow("gpu-cert-abcde-0", "Failed", "category", 0, "child 'gpu-cert-abcde-0-1' failed"),
        workflow("gpu-cert-abcde-1", "Succeeded", "category", 1),
    ]
    return compute_status(CERT, workflows, None, NOW, diagnose={0: diagnose_summary(record)})


def diagnose_report(*, from_configmap: bool = True, record: DiagnoseRecord = DIAGNOSE_RECORD) -> Report:
    whole = diagnose_summary(record, capped=False)
    decoded = CategoryResults(succeeded_nodes=["gpu-node-01"], diagnose=whole if from_configmap else None)
    return build_report(CERT, diagnose_status(record), {0: decoded})


def test_text_shows_the_isolations_cost_each_infrastructure_fault_and_each_untested_node() -> None:
    lines = render_text(diagnose_report()).splitlines()
    block = lines[lines.index("[1/2] communication/nccl-all-reduce") : lines.index("[2/2] training/nemotron5-8b")]
    assert "  Nodes:     1 passed, 0 failed" in block
    assert "  Diagnose:  3 rounds, 7 jobs, 40 node-jobs" in block
    assert "  Infrastructure faults: 1" in block
    assert (
        f"    link {LINK} (inter-screening): gpu-node-09, gpu-node-10 and "
        "gpu-node-17, gpu-node-18, gpu-node-19, gpu-node-20, gpu-node-21 (+1 more)"
    ) in block
    assert "  Untested nodes: 1" in block
    assert "    gpu-node-31  no cleared node of its domain left to pair with" in block
    (message,) = [line for line in block if line.startswith("  Message:")]
    assert message.startswith(
        "  Message:   link fault between domains sim-cluster.1 and sim-cluster.2; 1 node(s) left untested"
    )
    assert not any(line.startswith("  Diagnose:") for line in lines[lines.index("[2/2] training/nemotron5-8b") :])


def test_json_carries_the_summary_with_the_statuss_field_names_and_null_for_other_categories() -> None:
    document = json.loads(render_json(diagnose_report()))
    first, second = document["categories"]
    assert second["diagnose"] is None
    assert first["diagnose"] == {
        "rounds": 3,
        "jobs": 7,
        "nodeJobs": 40,
        "infrastructureFaultCount": 1,
        "infrastructureFaults": [
            {
                "domain": LINK,
                "groupA": DIAGNOSE_RECORD["infrastructureFaults"][0]["groupA"],
                "groupB": DIAGNOSE_RECORD["infrastructureFaults"][0]["groupB"],
                "stage": "inter-screening",
            }
        ],
        "untestedNodeCount": 1,
        "untestedNodes": [{"node": "gpu-node-31", "reason": "no cleared node of its domain left to pair with"}],
    }
    assert first["status"] == "Failed"
    assert first["nodesFailed"] == 0


def test_junit_fails_a_testcase_per_infrastructure_fault_and_skips_one_per_untested_node() -> None:
    suite = _suite(render_junit(diagnose_report()))
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == [
        "communication/nccl-all-reduce",
        f"communication/nccl-all-reduce/link {LINK}",
        "communication/nccl-all-reduce/untested gpu-node-31",
        "training/nemotron5-8b",
    ]
    fault = cases[f"communication/nccl-all-reduce/link {LINK}"].find("failure")
    assert fault is not None
    assert (fault.get("type"), fault.get("message")) == (
        "InfrastructureFault",
        "link fault between domains sim-cluster.1 and sim-cluster.2",
    )
    assert (fault.text or "").splitlines()[0] == "stage: inter-screening"
    skipped = cases["communication/nccl-all-reduce/untested gpu-node-31"].find("skipped")
    assert skipped is not None
    assert skipped.get("message") == "untested: no cleared node of its domain left to pair with"
    category = cases["communication/nccl-all-reduce"].find("failure")
    assert category is not None
    assert (category.text or "").splitlines() == [
        "infrastructure fault: link fault between domains sim-cluster.1 and sim-cluster.2",
        "1 node(s) left untested",
    ]
    counts = (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped"))
    assert counts == ("4", "2", "0", "1")


def test_without_its_configmap_the_report_shows_the_statuss_summary_and_what_it_left_out() -> None:
    record = {
        **DIAGNOSE_RECORD,
        "untested": [{"node": f"gpu-node-{i:03d}", "reason": "round limit reached"} for i in range(60)],
    }
    text = render_text(diagnose_report(from_configmap=False, record=cast(DiagnoseRecord, record)))
    lines = text.splitlines()
    assert "  Untested nodes: 60" in lines
    assert "    gpu-node-049  round limit reached" in lines
    assert "    gpu-node-050  round limit reached" not in lines
    assert "    (+10 more not listed in the status)" in lines


def test_the_configmaps_summary_wins_over_the_statuss_cut_short_one() -> None:
    record = {
        **DIAGNOSE_RECORD,
        "untested": [{"node": f"gpu-node-{i:03d}", "reason": "round limit reached"} for i in range(60)],
    }
    report = diagnose_report(record=cast(DiagnoseRecord, record))
    summary = report.categories[0].diagnose
    assert summary is not None
    assert (summary.untested_node_count, len(summary.untested_nodes)) == (60, 60)
    assert "more not listed" not in render_text(report)
