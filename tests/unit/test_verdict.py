"""The certification's verdict (its exit handler): judged from the category steps' own marks, never from their
absence. A category passes only when the latest Workflow of it carries a `Passed` mark; missing Workflows,
missing marks, unreadable input and steps that did not all run fail the certification."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre_argo.names import LABEL_CATEGORY_INDEX
from nvcre_argo.steps.children import REPORTED_ANNOTATION
from nvcre_argo.steps.verdict import judge, parse_step_names


def child(index: int, mark: str | None, *, name: str = "", created: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    annotations = {REPORTED_ANNOTATION: mark} if mark else {}
    return {
        "metadata": {
            "name": name or f"cert-abcde-{index}",
            "creationTimestamp": created,
            "labels": {LABEL_CATEGORY_INDEX: str(index)},
            "annotations": annotations,
        }
    }


STEPS = ["nccl-all-reduce", "dcgm-level1"]


@pytest.mark.parametrize(
    ("children", "status", "failed", "passed"),
    [
        pytest.param([child(0, "Passed"), child(1, "Passed")], "Succeeded", [], True, id="all-passed"),
        pytest.param([child(0, "Passed"), child(1, "Failed")], "Succeeded", ["dcgm-level1"], False, id="one-failed"),
        pytest.param([child(0, "Passed")], "Succeeded", ["dcgm-level1"], False, id="never-started"),
        pytest.param([child(0, "Passed"), child(1, None)], "Succeeded", ["dcgm-level1"], False, id="unmarked"),
        pytest.param([child(0, "Stopped"), child(1, "Passed")], "Succeeded", ["nccl-all-reduce"], False, id="stopped"),
        pytest.param([child(0, "Passed"), child(1, "Passed")], "Failed", [], False, id="steps-did-not-all-run"),
        pytest.param([child(0, "Passed"), child(1, "Passed")], "", [], False, id="status-unknown"),
    ],
)
def test_a_certification_passes_only_when_every_category_step_marked_its_workflow_passed(
    children: list[dict[str, Any]], status: str, failed: list[str], passed: bool
) -> None:
    verdict = judge(STEPS, children, steps_status=status)

    assert (verdict.failed, verdict.passed) == (failed, passed)


def test_the_latest_attempt_of_a_category_decides() -> None:
    first = child(0, "Failed", name="cert-abcde-0", created="2026-12-01T10:00:00Z")
    retried = child(0, "Passed", name="cert-abcde-0-r2", created="2026-12-01T11:00:00Z")

    assert judge(STEPS[:1], [retried, first], steps_status="Succeeded").passed
    assert not judge(STEPS[:1], [first], steps_status="Succeeded").passed


def test_no_category_is_no_pass() -> None:
    assert not judge([], [], steps_status="Succeeded").passed


@pytest.mark.parametrize("text", ["", "not json", '{"a": 1}', "{{workflow.parameters.steps}}"])
def test_step_names_that_are_not_a_json_list_are_no_categories(text: str) -> None:
    assert parse_step_names(text) == []


def test_the_summary_says_which_categories_failed_and_why_the_steps_did_not_finish() -> None:
    failed = judge(STEPS, [child(0, "Failed")], steps_status="Succeeded").summary().splitlines()
    stopped = judge(STEPS, [child(0, "Passed"), child(1, "Passed")], steps_status="Failed").summary().splitlines()
    passed = judge(STEPS, [child(0, "Passed"), child(1, "Passed")], steps_status="Succeeded").summary().splitlines()

    assert failed == [
        "nccl-all-reduce: Failed",
        "dcgm-level1: NotStarted",
        "FAILED: 2/2 categories did not succeed: nccl-all-reduce, dcgm-level1",
    ]
    assert stopped[-1] == "FAILED: the certification's steps ended Failed"
    assert passed[-1] == "PASSED: 2/2 categories succeeded"
