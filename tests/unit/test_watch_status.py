"""The Workflow → Certification status mapping, table by table (docs/nvcre-contract.md §3.6, §7.13, §7.14).

Workflows are built here in the shape Argo writes them (docs/argo-hera-trainer.md §2.2): a parent labelled
role=certification and category Workflows `<parent>-<index>` labelled role=category, owned by the parent,
with `record` nodes carrying the ConfigMap names as output parameters. Expected values come from the rules,
not from the function's output.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest

from nvcre_argo.api.status import CategoryStatus, CertificationStatus, Condition, WorkflowReference
from nvcre_argo.results import DiagnoseRecord, ResultsError
from nvcre_argo.watch.diagnose import diagnose_summary
from nvcre_argo.watch.status import (
    Event,
    compute_status,
    derive_result,
    events_for_transition,
    format_time,
    status_changed,
    view_workflows,
)
from nvcre_argo.watch.workflows import decode_compressed_nodes

NAMESPACE = "nvcre"
CERT = "gpu-cert"
PARENT = "gpu-cert-x7k2p"
PARENT_UID = "0f3c9a51-1111-2222-3333-444455556666"
T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
CATEGORIES = [
    ("communication", "nccl-all-reduce"),
    ("diagnostics", "dcgm-level1"),
    ("training", "nemotron5-8b"),
]


def certification(generation: int = 1, categories: list[tuple[str, str]] = CATEGORIES) -> dict[str, Any]:
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": CERT, "namespace": NAMESPACE, "generation": generation, "uid": "cert-uid"},
        "spec": {"categories": [{"domain": domain, "variant": variant} for domain, variant in categories]},
    }


def parent(
    phase: str | None = "Running",
    *,
    name: str = PARENT,
    uid: str = PARENT_UID,
    created: str = "2025-03-01T12:00:00Z",
    nodes: dict[str, Any] | None = None,
    message: str = "",
) -> dict[str, Any]:
    status: dict[str, Any] = {} if phase is None else {"phase": phase}
    if message:
        status["message"] = message
    if nodes is not None:
        status["nodes"] = nodes
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": uid,
            "creationTimestamp": created,
            "labels": {"nvcre.nvidia.com/certification": CERT, "nvcre.nvidia.com/role": "certification"},
        },
        "status": status,
    }


def record_node(
    node_id: str, phase: str = "Succeeded", failed_ref: str = "", succeeded_ref: str = "", **extra: Any
) -> dict[str, Any]:
    return {
        "id": node_id,
        "name": f"{node_id}.record",
        "displayName": "record",
        "type": "Pod",
        "templateName": "record",
        "phase": phase,
        "outputs": {
            "parameters": [
                {"name": "failed-nodes-ref", "value": failed_ref},
                {"name": "succeeded-nodes-ref", "value": succeeded_ref},
            ]
        },
        **extra,
    }


def group_node(node_id: str, phase: str, message: str = "", template: str = "run-group") -> dict[str, Any]:
    return {
        "id": node_id,
        "name": f"wf.category.group({node_id})",
        "displayName": f"group({node_id})",
        "type": "Pod",
        "templateName": template,
        "phase": phase,
        "message": message,
    }


def child(
    index: int,
    phase: str | None,
    *,
    message: str = "",
    nodes: dict[str, Any] | None = None,
    compressed: bool = False,
    owner: str = PARENT_UID,
    parent_name: str = PARENT,
    created: str = "2025-03-01T12:01:00Z",
) -> dict[str, Any]:
    status: dict[str, Any] = {} if phase is None else {"phase": phase}
    if message:
        status["message"] = message
    if nodes is not None and compressed:
        status["compressedNodes"] = base64.b64encode(gzip.compress(json.dumps(nodes).encode())).decode()
    elif nodes is not None:
        status["nodes"] = nodes
    domain, variant = CATEGORIES[index]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": f"{parent_name}-{index}",
            "namespace": NAMESPACE,
            "uid": f"child-uid-{index}",
            "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "uid": owner}],
            "labels": {
                "nvcre.nvidia.com/certification": CERT,
                "nvcre.nvidia.com/role": "category",
                "nvcre.nvidia.com/category-index": str(index),
                "nvcre.nvidia.com/domain": domain,
                "nvcre.nvidia.com/variant": variant,
            },
        },
        "status": status,
    }


def compute(
    workflows: list[dict[str, Any]],
    previous: CertificationStatus | None = None,
    now: datetime = T0,
    **kwargs: Any,
) -> CertificationStatus:
    return compute_status(certification(), workflows, previous, now, **kwargs)


def phases(status: CertificationStatus) -> list[str]:
    return [category.status for category in status.category_statuses or []]


def condition(status: CertificationStatus, kind: str) -> Condition:
    found = [item for item in status.conditions or [] if item.type == kind]
    assert len(found) == 1, f"expected exactly one {kind} condition, got {found}"
    return found[0]


def active(status: CertificationStatus) -> tuple[str, str]:
    true = [item for item in status.conditions or [] if item.type != "ValidationFailed" and item.status == "True"]
    assert len(true) == 1, f"exactly one exclusive condition must be True, got {true}"
    return true[0].type, true[0].reason


def children(*child_phases: str | None) -> list[dict[str, Any]]:
    return [parent("Running"), *(child(index, phase) for index, phase in enumerate(child_phases))]


# (id, workflows, category phases, (True condition, reason), result, passed)
SCENARIOS = [
    ("no-workflows", [], ["Pending"] * 3, ("InProgress", "WaitingForWorkflow"), "RUNNING", "0/3"),
    ("parent-created-phase-empty", [parent("")], ["Pending"] * 3, ("InProgress", "WorkflowCreated"), "RUNNING", "0/3"),
    ("parent-without-status", [parent(None)], ["Pending"] * 3, ("InProgress", "WorkflowCreated"), "RUNNING", "0/3"),
    ("parent-pending", [parent("Pending")], ["Pending"] * 3, ("InProgress", "WorkflowCreated"), "RUNNING", "0/3"),
    ("parent-running", [parent("Running")], ["Pending"] * 3, ("InProgress", "WorkflowRunning"), "RUNNING", "0/3"),
    (
        "first-child-phase-empty",
        children(""),
        ["InProgress", "Pending", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "0/3",
    ),
    (
        "first-child-no-status",
        children(None),
        ["InProgress", "Pending", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "0/3",
    ),
    (
        "first-child-pending",
        children("Pending"),
        ["InProgress", "Pending", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "0/3",
    ),
    (
        "first-child-running",
        children("Running"),
        ["InProgress", "Pending", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "0/3",
    ),
    (
        "first-succeeded-before-second-is-created",
        children("Succeeded"),
        ["Succeeded", "Pending", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "1/3",
    ),
    (
        "second-running",
        children("Succeeded", "Running"),
        ["Succeeded", "InProgress", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "1/3",
    ),
    (
        "first-failed-second-running",
        children("Failed", "Running"),
        ["Failed", "InProgress", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "0/3",
    ),
    (
        "first-errored-second-pending",
        children("Error", "Pending"),
        ["Failed", "InProgress", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "0/3",
    ),
    (
        "all-succeeded",
        children("Succeeded", "Succeeded", "Succeeded"),
        ["Succeeded"] * 3,
        ("Succeeded", "AllWorkflowsSucceeded"),
        "PASSED",
        "3/3",
    ),
    (
        "continue-on-failed-then-succeeding",
        children("Failed", "Succeeded", "Succeeded"),
        ["Failed", "Succeeded", "Succeeded"],
        ("Failed", "WorkflowFailed"),
        "FAILED",
        "2/3",
    ),
    (
        "error-in-the-middle",
        children("Succeeded", "Error", "Succeeded"),
        ["Succeeded", "Failed", "Succeeded"],
        ("Failed", "WorkflowFailed"),
        "FAILED",
        "2/3",
    ),
    (
        "last-failed",
        children("Succeeded", "Succeeded", "Failed"),
        ["Succeeded", "Succeeded", "Failed"],
        ("Failed", "WorkflowFailed"),
        "FAILED",
        "2/3",
    ),
    (
        "all-failed",
        children("Failed", "Error", "Failed"),
        ["Failed"] * 3,
        ("Failed", "WorkflowFailed"),
        "FAILED",
        "0/3",
    ),
    (
        "parent-succeeded-with-all-children",
        [parent("Succeeded"), *children("Succeeded", "Succeeded", "Succeeded")[1:]],
        ["Succeeded"] * 3,
        ("Succeeded", "AllWorkflowsSucceeded"),
        "PASSED",
        "3/3",
    ),
    (
        "children-without-a-parent",
        children("Succeeded", "Running")[1:],
        ["Succeeded", "InProgress", "Pending"],
        ("InProgress", "WorkflowRunning"),
        "RUNNING",
        "1/3",
    ),
]


@pytest.mark.parametrize(
    ("workflows", "expected_phases", "expected_active", "expected_result", "expected_passed"),
    [pytest.param(*scenario[1:], id=scenario[0]) for scenario in SCENARIOS],
)
def test_each_phase_combination_maps_to_category_statuses_one_true_condition_and_a_result(
    workflows: list[dict[str, Any]],
    expected_phases: list[str],
    expected_active: tuple[str, str],
    expected_result: str,
    expected_passed: str,
) -> None:
    status = compute(workflows)
    assert phases(status) == expected_phases
    assert active(status) == expected_active
    assert status.result == expected_result
    assert status.passed == expected_passed
    assert [(c.domain, c.variant) for c in status.category_statuses or []] == CATEGORIES
    assert [c.type for c in status.conditions or []] == ["InProgress", "Succeeded", "Failed", "ValidationFailed"]


def test_terminal_certifications_carry_the_references_exact_messages() -> None:
    succeeded = compute(children("Succeeded", "Succeeded", "Succeeded"))
    failed = compute(children("Failed", "Succeeded", "Succeeded"))
    assert condition(succeeded, "Succeeded").message == "All certification categories completed successfully"
    assert condition(failed, "Failed").message == "One or more certification categories failed"


def test_the_running_condition_names_the_category_that_runs() -> None:
    status = compute(children("Succeeded", "Running"))
    assert condition(status, "InProgress").message == "Running diagnostics/dcgm-level1 (category 2 of 3)"


def test_a_category_follows_its_workflow_through_every_phase_in_sequence() -> None:
    seen = [phases(compute(children(phase)))[0] for phase in ("", "Pending", "Running", "Succeeded")]
    assert seen == ["InProgress", "InProgress", "InProgress", "Succeeded"]


def test_a_failed_category_carries_its_workflows_message_and_reference() -> None:
    status = compute([parent(), child(0, "Failed", message="child 'group(0)' failed")])
    category = (status.category_statuses or [])[0]
    assert category.status == "Failed"
    assert category.message == "child 'group(0)' failed"
    assert category.workflow_ref == WorkflowReference(name=f"{PARENT}-0", namespace=NAMESPACE)


def test_a_failed_workflow_without_a_message_says_which_phase_it_ended_in() -> None:
    category = (compute([parent(), child(0, "Error")]).category_statuses or [])[0]
    assert category.message == f"Workflow {PARENT}-0 ended Error"


def test_succeeded_and_running_categories_carry_no_message() -> None:
    status = compute(children("Succeeded", "Running"))
    assert [c.message for c in status.category_statuses or []] == [None, None, None]


RECORD_NODES = {
    f"{PARENT}-0-1": {"id": f"{PARENT}-0-1", "type": "Steps", "templateName": "category", "phase": "Succeeded"},
    f"{PARENT}-0-2": record_node(
        f"{PARENT}-0-2", failed_ref="failed-nodes-1a2b3c4d", succeeded_ref="succeeded-nodes-1a2b3c4d"
    ),
}


@pytest.mark.parametrize("compressed", [False, True], ids=["status-nodes", "compressed-nodes"])
def test_configmap_references_come_from_the_record_steps_outputs(compressed: bool) -> None:
    status = compute([parent(), child(0, "Succeeded", nodes=RECORD_NODES, compressed=compressed)])
    category = (status.category_statuses or [])[0]
    dumped = category.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["failedNodesRef"] == {"apiGroup": "", "kind": "ConfigMap", "name": "failed-nodes-1a2b3c4d"}
    assert dumped["succeededNodesRef"] == {"apiGroup": "", "kind": "ConfigMap", "name": "succeeded-nodes-1a2b3c4d"}


def test_compressed_nodes_are_base64_gzip_json_of_the_node_map() -> None:
    encoded = base64.b64encode(gzip.compress(json.dumps(RECORD_NODES).encode())).decode()
    assert decode_compressed_nodes(encoded) == RECORD_NODES


def test_compressed_nodes_win_over_an_empty_node_map() -> None:
    workflow = child(0, "Succeeded", nodes=RECORD_NODES, compressed=True)
    workflow["status"]["nodes"] = {}
    category = (compute([parent(), workflow]).category_statuses or [])[0]
    assert category.failed_nodes_ref is not None
    assert category.failed_nodes_ref.name == "failed-nodes-1a2b3c4d"


def test_undecodable_compressed_nodes_leave_the_references_unset_instead_of_failing() -> None:
    workflow = child(0, "Succeeded")
    workflow["status"]["compressedNodes"] = "not base64 gzip!"
    category = (compute([parent(), workflow]).category_statuses or [])[0]
    assert (category.status, category.failed_nodes_ref, category.succeeded_nodes_ref) == ("Succeeded", None, None)


def test_an_empty_output_parameter_sets_no_reference() -> None:
    nodes = {"r": record_node("r", succeeded_ref="succeeded-nodes-1a2b3c4d")}
    category = (compute([parent(), child(0, "Succeeded", nodes=nodes)]).category_statuses or [])[0]
    assert category.failed_nodes_ref is None
    assert category.succeeded_nodes_ref is not None


def test_a_retried_record_step_takes_the_outputs_of_the_attempt_that_succeeded() -> None:
    nodes = {
        "r": record_node("r", failed_ref="failed-nodes-good", children=["r0", "r1"], type="Retry"),
        "r0": record_node("r0", phase="Failed", failed_ref="failed-nodes-stale", finishedAt="2025-03-01T12:05:00Z"),
        "r1": record_node("r1", failed_ref="failed-nodes-good", finishedAt="2025-03-01T12:06:00Z"),
    }
    category = (compute([parent(), child(0, "Succeeded", nodes=nodes)]).category_statuses or [])[0]
    assert category.failed_nodes_ref is not None
    assert category.failed_nodes_ref.name == "failed-nodes-good"


def test_a_group_failure_hidden_by_continue_on_fails_the_category_although_its_workflow_succeeded() -> None:
    nodes = {"g0": group_node("0", "Succeeded"), "g1": group_node("1", "Failed", "exit code 1")}
    category = (compute([parent(), child(0, "Succeeded", nodes=nodes)]).category_statuses or [])[0]
    assert category.status == "Failed"
    assert category.message == "group group(1) failed: exit code 1"


def test_a_failed_group_node_of_a_shared_runner_fails_the_category_like_a_failed_group_pod() -> None:
    shared = {"type": "Suspend", "templateName": "group"}
    nodes = {"g0": group_node("0", "Succeeded") | shared, "g1": group_node("1", "Failed", "1 node(s) failed") | shared}
    workflow = child(0, "Succeeded", nodes=nodes)
    workflow["spec"] = {"entrypoint": "category-shared"}
    category = (compute([parent(), workflow]).category_statuses or [])[0]
    assert (category.status, category.message) == ("Failed", "group group(1) failed: 1 node(s) failed")


@pytest.mark.parametrize("entrypoint", ["diagnose", "diagnose-shared"])
def test_a_failed_group_of_a_diagnose_loop_leaves_the_verdict_to_the_record_step(entrypoint: str) -> None:
    # A transient failure in one round, cleared by the next: the isolation passed every node.
    nodes = {"g0": group_node("0", "Failed", "isolation job failed"), "g1": group_node("1", "Succeeded")}
    diagnose = child(0, "Succeeded", nodes=nodes)
    diagnose["spec"] = {"entrypoint": entrypoint}

    category = (compute([parent(), diagnose]).category_statuses or [])[0]

    assert category.status == "Succeeded"


def plan_round_node(node_id: str, started: str, progress: str) -> dict[str, Any]:
    node = group_node(node_id, "Succeeded", template="plan-round") | {"startedAt": started}
    return node | {"outputs": {"parameters": [{"name": "progress", "value": progress}]}}


def test_a_running_diagnose_loop_says_which_round_it_is_in() -> None:
    nodes = {
        "p1": plan_round_node("p1", "2025-03-01T12:01:00Z", "round 1: 5 group(s), 32 node-jobs (intra-screening)"),
        "p2": plan_round_node("p2", "2025-03-01T12:03:00Z", "round 2: 9 group(s), 18 node-jobs (bisection)"),
        "g0": group_node("0", "Running"),
    }
    running = child(0, "Running", nodes=nodes)
    running["spec"] = {"entrypoint": "diagnose"}

    category = (compute([parent(), running]).category_statuses or [])[0]

    assert (category.status, category.message) == ("InProgress", "round 2: 9 group(s), 18 node-jobs (bisection)")


def test_a_failed_group_whose_nodes_confirmation_cleared_leaves_the_verdict_to_the_record_step() -> None:
    # A pair failed as a whole, then each node passed with a known-healthy partner: the record step passed.
    shared = {"type": "Suspend", "templateName": "group"}
    done = "confirmation complete: 0 suspect(s) convicted, 2 cleared"
    nodes = {
        "g0": group_node("0", "Failed", "2 node(s) failed") | shared,
        "g1": group_node("1", "Succeeded") | shared,
        "p1": plan_round_node("p1", "2025-03-01T12:01:00Z", "confirmation round 1: 2 suspect(s), each with ..."),
        "p2": plan_round_node("p2", "2025-03-01T12:03:00Z", done),
    }
    workflow = child(0, "Succeeded", nodes=nodes)
    workflow["spec"] = {"entrypoint": "category-shared"}

    category = (compute([parent(), workflow]).category_statuses or [])[0]

    assert (category.status, category.message) == (
        "Succeeded",
        f"1 group(s) failed and were cleared by confirmation: {done}",
    )


def test_a_failed_attempt_that_a_retry_recovered_does_not_fail_the_category() -> None:
    retry = group_node("0", "Succeeded") | {"type": "Retry", "children": ["a0", "a1"]}
    nodes = {"g0": retry, "a0": group_node("a0", "Failed", "pod deleted"), "a1": group_node("a1", "Succeeded")}
    category = (compute([parent(), child(0, "Succeeded", nodes=nodes)]).category_statuses or [])[0]
    assert category.status == "Succeeded"


def test_failed_nodes_of_other_templates_do_not_fail_a_succeeded_category() -> None:
    nodes = {"p": group_node("p", "Failed", "transient", template="plan")}
    assert phases(compute([parent(), child(0, "Succeeded", nodes=nodes)]))[0] == "Succeeded"


@pytest.mark.parametrize(
    ("workflow_message", "node_message"),
    [
        pytest.param("ThresholdViolation: busBandwidthGBps 12.5 < 300", "", id="workflow-message"),
        pytest.param("child failed", "node-a: ThresholdViolation busBandwidthGBps", id="node-message"),
        pytest.param("threshold violated for goodputRatio", "", id="prose"),
    ],
)
def test_validation_failed_is_never_guessed_from_message_text(workflow_message: str, node_message: str) -> None:
    nodes = {"n": group_node("n", "Failed", node_message)} if node_message else None
    status = compute([parent(), child(0, "Failed", message=workflow_message, nodes=nodes), child(1, "Running")])
    assert condition(status, "ValidationFailed").status == "False"
    assert (status.category_statuses or [])[0].message == workflow_message


@pytest.mark.parametrize(
    ("category_phase", "violated"),
    [
        pytest.param("Failed", True, id="failed-with-threshold-nodes"),
        pytest.param("Running", False, id="still-running"),
        pytest.param("Succeeded", False, id="succeeded"),
    ],
)
def test_validation_failed_is_true_only_for_a_failed_category_whose_configmap_lists_threshold_violations(
    category_phase: str, violated: bool
) -> None:
    status = compute([parent(), child(0, category_phase, message="child failed")], threshold_categories={0})
    validation = condition(status, "ValidationFailed")
    assert validation.status == ("True" if violated else "False")
    if violated:
        assert (validation.reason, validation.message) == (
            "ThresholdViolation",
            "Threshold violation in communication/nccl-all-reduce",
        )


def test_validation_failed_coexists_with_the_failed_condition() -> None:
    status = compute(children("Failed", "Succeeded", "Succeeded"))
    assert condition(status, "ValidationFailed").status == "False"
    workflows = children("Succeeded", "Failed", "Succeeded")
    status = compute(workflows, threshold_categories={1})
    assert active(status) == ("Failed", "WorkflowFailed")
    assert condition(status, "ValidationFailed").status == "True"


def test_validation_failed_is_kept_when_the_evidence_cannot_be_read_and_cleared_when_it_is_read_clean() -> None:
    workflows = children("Succeeded", "Failed", "Succeeded")
    violated = compute(workflows, threshold_categories={1})
    unread = compute(workflows, previous=violated, now=T0 + timedelta(minutes=1), unread_categories={1})
    assert condition(unread, "ValidationFailed") == condition(violated, "ValidationFailed")
    clean = compute(workflows, previous=unread, now=T0 + timedelta(minutes=2))
    assert condition(clean, "ValidationFailed").status == "False"


def test_the_threshold_note_is_added_once_however_often_the_status_is_recomputed() -> None:
    nodes = {"r": record_node("r", failed_ref="failed-nodes-1a2b3c4d")}
    workflows = [
        parent("Failed"),
        child(0, "Failed", message="child failed", nodes=nodes),
        child(1, "Succeeded"),
        child(2, "Succeeded"),
    ]
    first = compute(workflows, threshold_categories={0})
    # Garbage-collected Workflows: the category statuses are kept from `previous` and pass the note step again.
    again = compute([], previous=first, now=T0 + timedelta(minutes=1), threshold_categories={0})
    assert (again.category_statuses or [])[0].message == (
        "child failed; nodes failed with ThresholdViolation (ConfigMap failed-nodes-1a2b3c4d)"
    )
    assert not status_changed(first, again)


def test_computing_from_a_precomputed_view_gives_the_same_status() -> None:
    workflows = [*children("Succeeded"), child(1, "Failed", message="m"), child(2, "Running")]
    view = view_workflows(certification(), workflows, None)
    assert compute(workflows, view=view, threshold_categories={1}) == compute(workflows, threshold_categories={1})


def test_a_category_workflow_deleted_before_it_finished_fails_with_a_message_saying_so() -> None:
    running = compute(children("Running"))
    status = compute([parent("Running")], previous=running, now=T0 + timedelta(minutes=1))
    category = (status.category_statuses or [])[0]
    assert category.status == "Failed"
    assert category.message == f"Workflow {PARENT}-0 was deleted before it finished"
    assert category.workflow_ref == WorkflowReference(name=f"{PARENT}-0", namespace=NAMESPACE)
    assert active(status) == ("InProgress", "WorkflowRunning")


def test_a_finished_category_whose_workflow_was_garbage_collected_keeps_its_result() -> None:
    nodes = {"r": record_node("r", failed_ref="failed-nodes-1", succeeded_ref="succeeded-nodes-1")}
    before = compute([parent(), child(0, "Succeeded", nodes=nodes), child(1, "Running")])
    after = compute([parent(), child(1, "Running")], previous=before)
    assert (after.category_statuses or [])[0] == (before.category_statuses or [])[0]


def test_the_parent_deleted_mid_run_fails_the_certification_with_workflow_deleted() -> None:
    running = compute(children("Succeeded", "Running"))
    assert not status_changed(running, compute(children("Succeeded", "Running"), previous=running))
    gone = compute([], previous=running, now=T0 + timedelta(minutes=5))
    assert phases(gone) == ["Succeeded", "Failed", "Failed"]
    assert [c.message for c in gone.category_statuses or []][1:] == [
        f"Workflow {PARENT}-1 was deleted before it finished",
        "Not run: the certification Workflow was deleted",
    ]
    assert active(gone) == ("Failed", "WorkflowDeleted")
    assert condition(gone, "Failed").message == "The certification Workflow was deleted before all categories finished"
    assert gone.result == "FAILED"
    again = compute([], previous=gone, now=T0 + timedelta(minutes=9))
    assert not status_changed(gone, again)


def test_the_parent_deleted_before_creating_any_category_fails_every_category() -> None:
    created = compute([parent("")])
    gone = compute([], previous=created)
    assert phases(gone) == ["Failed"] * 3
    assert active(gone) == ("Failed", "WorkflowDeleted")


def test_a_finished_certification_survives_its_workflows_being_deleted_by_ttl() -> None:
    for child_phases in [("Succeeded",) * 3, ("Failed", "Succeeded", "Succeeded")]:
        finished = compute(children(*child_phases))
        later = compute([], previous=finished, now=T0 + timedelta(hours=2))
        assert not status_changed(finished, later), child_phases


def test_a_finished_parent_fails_the_categories_it_never_created() -> None:
    workflows = [parent("Failed", message="Stopped with strategy 'Stop'"), child(0, "Succeeded")]
    status = compute(workflows)
    assert phases(status) == ["Succeeded", "Failed", "Failed"]
    assert (status.category_statuses or [])[1].message == f"Not run: the certification Workflow {PARENT} ended Failed"
    assert active(status) == ("Failed", "WorkflowFailed")


def test_a_category_workflow_the_parent_could_not_create_fails_with_the_steps_message() -> None:
    nodes = {
        "n1": {"id": "n1", "type": "Pod", "templateName": "category-1", "phase": "Error", "message": "forbidden"},
    }
    status = compute([parent("Running", nodes=nodes), child(0, "Succeeded")])
    category = (status.category_statuses or [])[1]
    assert (category.status, category.message) == ("Failed", "Workflow not created: forbidden")


def test_a_category_whose_step_was_lost_fails_although_its_workflow_succeeded_so_kubectl_agrees_with_argo() -> None:
    """The category step's pod lost for good (Failed, exit code 143, not retried); its category Workflow ran on
    unfollowed and passed. Argo shows the step red, so the category is Failed, saying both; while the
    category Workflow runs, it is InProgress; a step that a retry recovered fails nothing."""
    lost = {
        "r0": {
            "id": "r0",
            "type": "Retry",
            "templateName": "category-0",
            "phase": "Failed",
            "children": ["p0"],
            "message": "Error (exit code 143)",
        },
        "p0": {
            "id": "p0",
            "type": "Pod",
            "templateName": "category-0",
            "phase": "Failed",
            "message": "Error (exit code 143)",
        },
    }
    status = compute(
        [parent("Failed", nodes=lost), child(0, "Succeeded"), child(1, "Succeeded"), child(2, "Succeeded")]
    )
    assert phases(status) == ["Failed", "Succeeded", "Succeeded"]
    assert (status.category_statuses or [])[0].message == (
        "the certification Workflow's step for this category failed: Error (exit code 143)"
        f" (Workflow {PARENT}-0 Succeeded)"
    )
    assert (status.result, status.passed, active(status)) == ("FAILED", "2/3", ("Failed", "WorkflowFailed"))

    running = compute([parent("Running", nodes=lost), child(0, "Running")])
    assert phases(running)[0] == "InProgress"

    recovered = {
        **lost,
        "r0": {**lost["r0"], "phase": "Succeeded", "children": ["p0", "p1"], "message": ""},
        "p1": {"id": "p1", "type": "Pod", "templateName": "category-0", "phase": "Succeeded"},
    }
    assert phases(compute([parent("Running", nodes=recovered), child(0, "Succeeded")]))[0] == "Succeeded"


def test_a_new_parent_starts_afresh_and_ignores_the_previous_runs_children() -> None:
    old = [
        parent("Failed", name="gpu-cert-old11", uid="old-uid", created="2025-03-01T10:00:00Z"),
        child(0, "Failed", owner="old-uid", parent_name="gpu-cert-old11"),
    ]
    before = compute(old)
    rerun = [*old, parent("", name="gpu-cert-new22", uid="new-uid", created="2025-03-01T13:00:00Z")]
    status = compute(rerun, previous=before)
    assert phases(status) == ["Pending"] * 3
    assert active(status) == ("InProgress", "WorkflowCreated")


def test_workflows_of_other_certifications_are_ignored() -> None:
    stranger = child(0, "Failed")
    stranger["metadata"]["labels"]["nvcre.nvidia.com/certification"] = "someone-else"
    assert phases(compute([parent(), stranger])) == ["Pending"] * 3


@pytest.mark.parametrize(
    ("excluded", "expected"),
    [pytest.param(0, "PASSED", id="none-excluded"), pytest.param(3, "INCOMPLETE", id="three-excluded")],
)
def test_excluded_nodes_turn_a_pass_into_incomplete(excluded: int, expected: str) -> None:
    status = compute(children("Succeeded", "Succeeded", "Succeeded"), excluded_nodes=excluded)
    assert (status.result, status.excluded_nodes) == (expected, excluded)
    assert active(status) == ("Succeeded", "AllWorkflowsSucceeded")


def test_excluded_nodes_do_not_hide_a_failure_or_a_run_in_progress() -> None:
    assert compute(children("Failed", "Succeeded", "Succeeded"), excluded_nodes=2).result == "FAILED"
    assert compute(children("Succeeded"), excluded_nodes=2).result == "RUNNING"


def test_counts_not_given_this_time_keep_their_previous_values() -> None:
    first = compute(children("Failed"), excluded_nodes=2, failed_node_names={"node-a", "node-b", "node-c"})
    assert (first.excluded_nodes, first.failed_nodes) == (2, 3)
    second = compute(children("Failed", "Running"), previous=first)
    assert (second.excluded_nodes, second.failed_nodes) == (2, 3)


def test_failed_nodes_counts_distinct_names() -> None:
    assert compute(children("Failed"), failed_node_names=set()).failed_nodes == 0
    assert compute(children("Failed"), failed_node_names={"a", "b"}).failed_nodes == 2


def test_observed_generation_is_the_certifications_generation_on_the_status_and_every_condition() -> None:
    status = compute_status(certification(generation=4), children("Running"), None, T0)
    assert status.observed_generation == 4
    assert {c.observed_generation for c in status.conditions or []} == {4}


def test_last_transition_time_changes_only_when_a_conditions_status_flips() -> None:
    t1, t2, t3 = T0, T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)
    first = compute(children("Running"), now=t1)
    second = compute(children("Succeeded", "Running"), previous=first, now=t2)
    assert condition(second, "InProgress").message != condition(first, "InProgress").message
    assert {c.type: c.last_transition_time for c in second.conditions or []} == dict.fromkeys(
        ["InProgress", "Succeeded", "Failed", "ValidationFailed"], "2025-03-01T12:00:00Z"
    )
    third = compute(children("Succeeded", "Succeeded", "Succeeded"), previous=second, now=t3)
    times = {c.type: c.last_transition_time for c in third.conditions or []}
    assert times == {
        "InProgress": "2025-03-01T12:20:00Z",
        "Succeeded": "2025-03-01T12:20:00Z",
        "Failed": "2025-03-01T12:00:00Z",
        "ValidationFailed": "2025-03-01T12:00:00Z",
    }


def test_times_are_written_in_utc_rfc3339_whatever_the_clocks_zone() -> None:
    assert format_time(datetime(2025, 3, 1, 14, 0, 5, tzinfo=timezone(timedelta(hours=2)))) == "2025-03-01T12:00:05Z"
    naive = datetime(2025, 3, 1, 12, 0, 5)  # taken as UTC
    assert format_time(naive) == "2025-03-01T12:00:05Z"


def test_the_same_inputs_give_the_same_status_and_no_write() -> None:
    first = compute(children("Succeeded", "Failed", "Running"))
    second = compute(children("Succeeded", "Failed", "Running"), previous=first, now=T0 + timedelta(hours=1))
    assert second == first
    assert not status_changed(first, second)


def test_status_changed_sees_any_field_and_a_missing_status() -> None:
    status = compute(children("Running"))
    assert status_changed(None, status)
    assert status_changed(status, status.model_copy(update={"passed": "1/3"}))
    assert status_changed(status, status.model_copy(update={"failed_nodes": 1}))
    assert not status_changed(status, CertificationStatus.model_validate(status.model_dump(by_alias=True)))


@pytest.mark.parametrize(
    ("phases_list", "excluded", "expected"),
    [
        pytest.param([], None, "RUNNING", id="no-categories"),
        pytest.param(["Pending", "Succeeded"], None, "RUNNING", id="pending"),
        pytest.param(["InProgress", "Failed"], None, "RUNNING", id="failed-but-still-running"),
        pytest.param(["Failed", "Succeeded"], 5, "FAILED", id="failed"),
        pytest.param(["Succeeded", "Succeeded"], 1, "INCOMPLETE", id="incomplete"),
        pytest.param(["Succeeded", "Succeeded"], None, "PASSED", id="passed"),
    ],
)
def test_the_result_word_follows_the_category_phases(
    phases_list: list[str], excluded: int | None, expected: str
) -> None:
    assert derive_result(phases_list, excluded) == expected


def _events(*steps: list[dict[str, Any]], threshold_categories: set[int] | None = None) -> list[list[Event]]:
    emitted, previous = [], None
    for index, workflows in enumerate(steps):
        status = compute(
            workflows,
            previous=previous,
            now=T0 + timedelta(minutes=index),
            threshold_categories=threshold_categories or set(),
        )
        emitted.append(events_for_transition(previous, status))
        previous = status
    return emitted


def test_events_are_emitted_once_per_transition() -> None:
    threshold = child(1, "Failed", message="ThresholdViolation: busBandwidthGBps 10 < 300")
    emitted = _events(
        [],
        [parent("")],
        children("Running"),
        children("Running"),
        [*children("Succeeded"), child(1, "Running")],
        [*children("Succeeded"), threshold, child(2, "Running")],
        [*children("Succeeded"), threshold, child(2, "Succeeded")],
        [*children("Succeeded"), threshold, child(2, "Succeeded")],
        threshold_categories={1},
    )
    assert emitted == [
        [("Normal", "WaitingForWorkflow", "Waiting for the certification Workflow to be created")],
        [],
        [("Normal", "CategoryStarted", f"Category communication/nccl-all-reduce started (Workflow {PARENT}-0)")],
        [],
        [
            ("Normal", "CategorySucceeded", f"Category communication/nccl-all-reduce succeeded (Workflow {PARENT}-0)"),
            ("Normal", "CategoryStarted", f"Category diagnostics/dcgm-level1 started (Workflow {PARENT}-1)"),
        ],
        [
            (
                "Warning",
                "CategoryFailed",
                f"Category diagnostics/dcgm-level1 failed (Workflow {PARENT}-1): "
                "ThresholdViolation: busBandwidthGBps 10 < 300; nodes failed with ThresholdViolation",
            ),
            ("Normal", "CategoryStarted", f"Category training/nemotron5-8b started (Workflow {PARENT}-2)"),
            ("Warning", "ThresholdViolation", "Threshold violation in diagnostics/dcgm-level1"),
        ],
        [
            ("Normal", "CategorySucceeded", f"Category training/nemotron5-8b succeeded (Workflow {PARENT}-2)"),
            ("Warning", "WorkflowFailed", "One or more certification categories failed"),
        ],
        [],
    ]


def test_a_certification_that_succeeds_emits_a_normal_event_with_the_condition_reason() -> None:
    running = compute(children("Succeeded", "Succeeded", "Running"))
    done = compute(children("Succeeded", "Succeeded", "Succeeded"), previous=running)
    assert events_for_transition(running, done)[-1] == (
        "Normal",
        "AllWorkflowsSucceeded",
        "All certification categories completed successfully",
    )


def test_a_category_that_finishes_unseen_emits_only_its_end() -> None:
    old = CertificationStatus(
        category_statuses=[CategoryStatus(domain=d, variant=v, status="Pending") for d, v in CATEGORIES]
    )
    new = compute(children("Succeeded", "Running"))
    reasons = [event.reason for event in events_for_transition(old, new)]
    assert reasons == ["CategorySucceeded", "CategoryStarted", "WorkflowRunning"]


def test_threshold_violations_found_in_the_failed_nodes_configmap_set_validation_failed() -> None:
    nodes = {"r": record_node("r", failed_ref="failed-nodes-1a2b3c4d")}
    workflows = [parent(), child(0, "Failed", message="child 'group(0)' failed", nodes=nodes), child(1, "Running")]
    assert condition(compute(workflows), "ValidationFailed").status == "False"
    status = compute(workflows, threshold_categories={0, 1})
    assert condition(status, "ValidationFailed").status == "True"
    assert (status.category_statuses or [])[0].message == (
        "child 'group(0)' failed; nodes failed with ThresholdViolation (ConfigMap failed-nodes-1a2b3c4d)"
    )
    assert (status.category_statuses or [])[1].message is None


# --- testScale: diagnose --------------------------------------------------------------------------------------

LINK = "sim-cluster.1|sim-cluster.2"
LINK_MESSAGE = "link fault between domains sim-cluster.1 and sim-cluster.2"
FAILED_REF = "failed-nodes-1a2b3c4d"


def diagnose_record(*, faults: int = 1, untested: int = 0) -> DiagnoseRecord:
    """What a diagnose category's record step writes: `faults` link faults, `untested` nodes left untested."""
    return {
        "rounds": 3,
        "jobs": 7,
        "nodeJobs": 40,
        "faulty": [],
        "healthy": 14,
        "infrastructureFaults": [
            {
                "domain": LINK if index == 0 else f"sim-cluster.{index}|sim-cluster.{index + 10}",
                "groupA": ["gpu-node-09", "gpu-node-10"],
                "groupB": ["gpu-node-17", "gpu-node-18"],
                "stage": "inter-screening",
            }
            for index in range(faults)
        ],
        "untested": [{"node": f"gpu-node-{index:03d}", "reason": "round limit reached"} for index in range(untested)],
        "history": [{"round": 1, "groups": [{"name": "r1-g0", "stage": "bisection", "nodes": 8, "outcome": "failed"}]}],
    }


def diagnose_workflows(phase: str = "Failed") -> list[dict[str, Any]]:
    """The first category ran as diagnose and ended `phase` (the record step fails it when it found anything)."""
    nodes = {"r": record_node("r", "Failed" if phase == "Failed" else "Succeeded", failed_ref=FAILED_REF)}
    message = "child 'gpu-cert-x7k2p-0-1234' failed" if phase == "Failed" else ""
    return [parent(), child(0, phase, message=message, nodes=nodes), child(1, "Running")]


def test_a_link_fault_fails_a_diagnose_category_with_no_failed_node_and_leads_its_message() -> None:
    status = compute(diagnose_workflows(), failed_node_names=[], diagnose={0: diagnose_summary(diagnose_record())})
    category = (status.category_statuses or [])[0]
    assert category.status == "Failed"
    assert category.message == f"{LINK_MESSAGE}; child 'gpu-cert-x7k2p-0-1234' failed"
    assert status.failed_nodes == 0
    assert category.diagnose is not None
    assert category.diagnose.infrastructure_faults[0].domain == LINK


def test_the_status_carries_the_summary_in_camel_case_without_the_round_history() -> None:
    status = compute(diagnose_workflows(), diagnose={0: diagnose_summary(diagnose_record(untested=1))})
    written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    categories = written["categoryStatuses"]
    assert categories[0]["diagnose"] == {
        "rounds": 3,
        "jobs": 7,
        "nodeJobs": 40,
        "infrastructureFaultCount": 1,
        "infrastructureFaults": [
            {
                "domain": LINK,
                "groupA": ["gpu-node-09", "gpu-node-10"],
                "groupB": ["gpu-node-17", "gpu-node-18"],
                "stage": "inter-screening",
            }
        ],
        "untestedNodeCount": 1,
        "untestedNodes": [{"node": "gpu-node-000", "reason": "round limit reached"}],
    }
    assert all("diagnose" not in category for category in categories[1:])


def test_a_fault_fails_the_category_even_when_its_workflow_succeeded() -> None:
    status = compute(diagnose_workflows("Succeeded"), diagnose={0: diagnose_summary(diagnose_record())})
    assert (status.category_statuses or [])[0].status == "Failed"
    assert (status.category_statuses or [])[0].message == LINK_MESSAGE
    assert "Failed" not in phases(status)[1:]


def test_a_diagnose_category_that_found_nothing_passes_and_still_shows_its_cost() -> None:
    status = compute(diagnose_workflows("Succeeded"), diagnose={0: diagnose_summary(diagnose_record(faults=0))})
    category = (status.category_statuses or [])[0]
    assert (category.status, category.message) == ("Succeeded", None)
    assert category.diagnose is not None
    assert (category.diagnose.rounds, category.diagnose.jobs, category.diagnose.node_jobs) == (3, 7, 40)


def test_untested_nodes_fail_the_category_and_are_counted_in_its_message() -> None:
    status = compute(diagnose_workflows(), diagnose={0: diagnose_summary(diagnose_record(faults=0, untested=7))})
    category = (status.category_statuses or [])[0]
    assert category.status == "Failed"
    assert (category.message or "").startswith(
        "7 node(s) left untested: gpu-node-000 (round limit reached), gpu-node-001 (round limit reached), "
    )
    assert ", ...; child 'gpu-cert-x7k2p-0-1234' failed" in (category.message or "")


def test_marking_again_on_the_next_reconcile_changes_nothing() -> None:
    records = {0: diagnose_summary(diagnose_record(untested=2))}
    first = compute(diagnose_workflows(), diagnose=records)
    again = compute(diagnose_workflows(), previous=first, diagnose=records)
    assert again.category_statuses == first.category_statuses
    assert not status_changed(first, again)


def test_a_kept_category_keeps_its_summary_and_message_once_its_workflow_is_gone() -> None:
    workflows = [parent("Failed"), *diagnose_workflows()[1:2], child(1, "Succeeded"), child(2, "Succeeded")]
    first = compute(workflows, diagnose={0: diagnose_summary(diagnose_record())})
    gone = compute([], previous=first, unread_categories={0})
    assert (gone.category_statuses or [])[0] == (first.category_statuses or [])[0]


def test_an_unreadable_configmap_keeps_the_summary_written_for_the_same_workflow() -> None:
    first = compute(diagnose_workflows(), diagnose={0: diagnose_summary(diagnose_record())})
    unread = compute(diagnose_workflows(), previous=first, unread_categories={0})
    category = (unread.category_statuses or [])[0]
    assert category.diagnose == (first.category_statuses or [])[0].diagnose
    assert (category.message or "").startswith(LINK_MESSAGE)


def test_the_status_lists_are_cut_short_and_the_counts_stay_whole() -> None:
    record = diagnose_record(faults=25, untested=80)
    record["infrastructureFaults"][0]["groupA"] = [f"gpu-node-{index:03d}" for index in range(40)]
    status = compute(diagnose_workflows(), diagnose={0: diagnose_summary(record)})
    category = (status.category_statuses or [])[0]
    summary = category.diagnose
    assert summary is not None
    assert (summary.infrastructure_fault_count, len(summary.infrastructure_faults)) == (25, 20)
    assert (summary.untested_node_count, len(summary.untested_nodes)) == (80, 50)
    assert len(summary.infrastructure_faults[0].group_a) == 32
    # The message names the first three faults and counts the rest.
    assert "; 22 more infrastructure fault(s); 80 node(s) left untested: " in (category.message or "")


def test_a_fault_inside_a_domain_names_the_nodes_on_each_side() -> None:
    record = diagnose_record(faults=0)
    record["infrastructureFaults"] = [
        {"domain": "rack-7", "groupA": ["n1", "n2"], "groupB": ["n3"], "stage": "cross-boundary"}
    ]
    status = compute(diagnose_workflows(), diagnose={0: diagnose_summary(record)})
    assert ((status.category_statuses or [])[0].message or "").startswith(
        "fault inside domain rack-7 between n1, n2 and n3; "
    )


def test_the_failure_event_of_a_diagnose_category_says_which_link_is_broken() -> None:
    running = compute(children("Running"))
    failed = compute(diagnose_workflows(), previous=running, diagnose={0: diagnose_summary(diagnose_record())})
    (event,) = [event for event in events_for_transition(running, failed) if event.reason == "CategoryFailed"]
    assert event.message.startswith(
        f"Category communication/nccl-all-reduce failed (Workflow {PARENT}-0): {LINK_MESSAGE}"
    )


@pytest.mark.parametrize(
    ("change", "where"),
    [
        pytest.param({"rounds": -1}, "diagnose.json.gz.rounds: must be >= 0, got -1", id="negative-count"),
        pytest.param(
            {"infrastructureFaults": [{"domain": LINK, "groupA": ["a"], "groupB": ["b", 7], "stage": "bisection"}]},
            "diagnose.json.gz.infrastructureFaults[0].groupB[1]: expected str, got int",
            id="node-name-not-a-string",
        ),
    ],
)
def test_a_record_a_status_cannot_hold_is_refused_naming_the_field(change: dict[str, Any], where: str) -> None:
    record = cast(DiagnoseRecord, {**diagnose_record(), **change})
    with pytest.raises(ResultsError, match=re.escape(where)):
        diagnose_summary(record)
