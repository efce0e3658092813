"""The certification Workflow's decisions about its category Workflows (steps.children), without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre_argo.names import LABEL_CATEGORY_INDEX
from nvcre_argo.steps.children import (
    REPORTED_ANNOTATION,
    CategoryOutcome,
    Parent,
    attempt_manifest,
    child_manifest,
    is_finished,
    is_reported,
    running_siblings,
    stop_reason,
)

PARENT = Parent(name="cert-abcde", uid="uid-1", namespace="nvcre")


def workflow(phase: str | None = None, **metadata: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"metadata": {"name": "cert-abcde", **metadata}, "spec": {}}
    if phase:
        found["status"] = {"phase": phase}
    return found


def test_a_running_parent_is_no_reason_to_stop() -> None:
    assert stop_reason(workflow("Running")) is None
    assert stop_reason(workflow()) is None  # not picked up by Argo yet


@pytest.mark.parametrize(
    ("parent", "expected"),
    [
        (None, "the certification Workflow is gone"),
        (workflow("Running", deletionTimestamp="2026-12-01T00:00:00Z"), "the certification Workflow is being deleted"),
        ({**workflow("Running"), "spec": {"shutdown": "Terminate"}}, "was shut down (Terminate)"),
        ({**workflow("Running"), "spec": {"shutdown": "Stop"}}, "was shut down (Stop)"),
        (workflow("Failed"), "ended (Failed)"),
    ],
)
def test_a_parent_that_stops_for_any_reason_stops_its_categories(parent: dict[str, Any] | None, expected: str) -> None:
    reason = stop_reason(parent)

    assert reason is not None
    assert expected in reason


def test_the_category_workflow_is_created_in_the_parents_namespace_and_owned_by_it() -> None:
    template = {"metadata": {"name": "cert-abcde-0", "labels": {"a": "b"}}, "spec": {}}

    manifest = child_manifest(template, PARENT)

    assert manifest["metadata"]["namespace"] == "nvcre"
    assert manifest["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "name": "cert-abcde",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "namespace" not in template["metadata"]  # the compiled manifest is not changed


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Error"])
def test_finished_phases(phase: str) -> None:
    assert is_finished(workflow(phase))
    assert not is_finished(workflow("Running"))


def test_the_summary_names_the_category_its_workflow_and_at_most_five_failed_nodes() -> None:
    nodes = tuple(f"gpu-node-{index}" for index in range(1, 8))
    failed = CategoryOutcome("diagnostics/dcgm-level1", "cert-abcde-0", "Failed", nodes)
    passed = CategoryOutcome("diagnostics/dcgm-level1", "cert-abcde-0", "Succeeded")
    stopped = CategoryOutcome("diagnostics/dcgm-level1", "cert-abcde-0", "Running", stopped="it was stopped")

    assert failed.summary() == (
        "diagnostics/dcgm-level1: 7 node(s) failed: gpu-node-1, gpu-node-2, gpu-node-3, gpu-node-4, gpu-node-5"
        " and 2 more (Workflow cert-abcde-0)"
    )
    assert (failed.verdict, passed.verdict, stopped.verdict) == ("Failed", "Passed", "Stopped")
    assert passed.passed
    assert not stopped.passed
    assert CategoryOutcome("x/y", "w", "Error").summary() == "x/y: Error with no node blamed (Workflow w)"


def test_a_retried_category_runs_under_the_next_attempts_name_within_63_characters() -> None:
    manifest = {"metadata": {"name": "gpu-cluster-cert-x7k2q-0"}}
    assert attempt_manifest(manifest, 1)["metadata"]["name"] == "gpu-cluster-cert-x7k2q-0"
    assert attempt_manifest(manifest, 2)["metadata"]["name"] == "gpu-cluster-cert-x7k2q-0-r2"
    long_name = {"metadata": {"name": "c" * 61 + "-3"}}
    renamed = attempt_manifest(long_name, 12)["metadata"]["name"]
    assert len(renamed) <= 63
    assert renamed != attempt_manifest(long_name, 13)["metadata"]["name"]
    assert manifest["metadata"]["name"] == "gpu-cluster-cert-x7k2q-0"


def test_only_a_workflow_whose_outcome_was_reported_counts_as_history() -> None:
    assert not is_reported(workflow("Failed"))
    assert is_reported(workflow("Failed", annotations={REPORTED_ANNOTATION: "Failed"}))


def category(name: str, index: int, phase: str | None, owner: str = PARENT.uid) -> dict[str, Any]:
    """A category Workflow of category `index`, owned by `owner`."""
    return workflow(phase, name=name, labels={LABEL_CATEGORY_INDEX: str(index)}, ownerReferences=[{"uid": owner}])


def test_a_category_waits_for_the_parents_other_categories_still_running_and_for_nothing_else() -> None:
    """The step of category 1 after category 0's step was lost for good while its Workflow runs on."""
    manifest = child_manifest(category("cert-abcde-1", 1, None), PARENT)
    workflows = [
        category("cert-abcde-0", 0, "Running"),  # its step was lost: wait for it
        category("cert-abcde-2", 2, None),  # just created (no status yet), however that came about
        category("cert-abcde-3", 3, "Succeeded"),
        category("cert-abcde-1", 1, "Running"),  # its own category's attempt: followed, not waited for
        category("cert-abcde-1-r2", 1, "Running"),
        category("other-cert-0", 0, "Running", owner="uid-2"),  # another certification Workflow's
    ]
    assert running_siblings(workflows, manifest, PARENT) == ["cert-abcde-0", "cert-abcde-2"]
    assert running_siblings(workflows[2:], manifest, PARENT) == []
