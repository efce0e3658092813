"""The watcher against a real API server: Certification status driven by Argo Workflows, restarts, 410 relists,
status conflicts, leader election, `--submit`, metrics, and the `report` and `install` commands.

The tests play Argo (see `watcher_support`): they create the Workflows the compiled Certification would create
and write their status as the Argo controller does, and check what the watcher writes to the Certification
(nvcre-contract.md §3.6), which Events it records (§7.14) and what it exports (§7.15).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
import yaml
from click.testing import CliRunner
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.cli.main import cli
from nvcre_argo.controller.leader import LeaseSettings
from nvcre_argo.controller.observability import Metrics, serve
from nvcre_argo.controller.reconciler import Reconciler, SubmitSettings
from nvcre_argo.kube.client import DEFAULT_PAGE_SIZE, KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CERTIFICATIONS, LEASES, WORKFLOWS, Resource
from nvcre_argo.loading import load_certifications
from nvcre_argo.names import failed_nodes_configmap, submitted_workflow_name, succeeded_nodes_configmap
from nvcre_argo.plan.model import Exclusion, NodeGroup, Plan
from nvcre_argo.resolve.category import resolve_certification
from nvcre_argo.results import (
    THRESHOLD_VIOLATION,
    DiagnoseRecord,
    FailedNode,
    failed_nodes_configmap_manifest,
    succeeded_nodes_configmap_manifest,
)
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.planning import plan_configmap
from tests.harness.controlplane import Cluster
from tests.integration.watcher_support import (
    Argo,
    Step,
    Watchers,
    category_phases,
    certification,
    certification_manifest,
    compile_parent,
    condition,
    events_about,
    own_parents,
    owner_reference,
    reconciles,
    record_step,
    sample,
    status_writes,
    true_conditions,
    wait_for,
    wait_status,
)

K = TypeVar("K", bound=KubeClient)
NAME = "gpu-cert"
CATEGORIES = ("communication/nccl-all-reduce", "training/nemotron5-8b")
SUCCEEDED_MESSAGE = "All certification categories completed successfully"
FAILED_MESSAGE = "One or more certification categories failed"


# --- fixtures ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def argo(kube: KubeClient, namespace: str, catalog: Catalog) -> Argo:
    return Argo(kube, namespace, catalog)


@pytest.fixture
def watchers(kube: KubeClient, namespace: str) -> Iterator[Watchers]:
    started = Watchers(kube, namespace)
    try:
        yield started
    finally:
        started.stop_all()


@dataclass(frozen=True)
class Doubles:
    """Connects KubeClient subclasses (test doubles around the real requests) as `connect` would."""

    kubeconfig: str

    def connect(self, cls: type[K]) -> K:
        configuration = k8s_client.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=self.kubeconfig, client_configuration=configuration
        )
        return cls(k8s_client.ApiClient(configuration))


@pytest.fixture
def doubles(control_plane: Cluster) -> Doubles:
    return Doubles(str(control_plane.kubeconfig))


# --- helpers -----------------------------------------------------------------------------------------------------


def create_certification(kube: KubeClient, namespace: str, name: str = NAME, **kwargs: Any) -> dict[str, Any]:
    return kube.create(certification_manifest(namespace, name, **kwargs))


def write_result_configmaps(
    kube: KubeClient,
    child: dict[str, Any],
    *,
    failed: list[FailedNode] | None = None,
    succeeded: list[str] | None = None,
    diagnose: DiagnoseRecord | None = None,
) -> tuple[str | None, str | None]:
    """The record step's ConfigMaps (`failed-nodes-<uid8>`, `succeeded-nodes-<uid8>`), owned by the Workflow;
    a diagnose category's failed-nodes ConfigMap also holds its isolation summary."""
    metadata = child["metadata"]
    owners = [owner_reference(child, controller=False)]
    failed_name = succeeded_name = None
    if failed is not None:
        failed_name = failed_nodes_configmap(metadata["uid"])
        manifest = failed_nodes_configmap_manifest(
            failed_name, metadata["namespace"], failed, owners, diagnose=diagnose
        )
        kube.create(manifest)
    if succeeded is not None:
        succeeded_name = succeeded_nodes_configmap(metadata["uid"])
        kube.create(succeeded_nodes_configmap_manifest(succeeded_name, metadata["namespace"], succeeded, owners))
    return failed_name, succeeded_name


def finish_category(
    argo: Argo,
    child: dict[str, Any],
    phase: str,
    *,
    message: str = "",
    failed: list[FailedNode] | None = None,
    succeeded: list[str] | None = None,
    diagnose: DiagnoseRecord | None = None,
) -> tuple[str | None, str | None]:
    """The category Workflow's last steps and its terminal phase: plan, one group, record (with its outputs)."""
    failed_ref, succeeded_ref = write_result_configmaps(
        argo.kube, child, failed=failed, succeeded=succeeded, diagnose=diagnose
    )
    group_phase = "Succeeded" if phase == "Succeeded" else "Failed"
    steps = [
        Step("plan", "plan", "Succeeded"),
        Step("group(0:g0)", "run-group", group_phase, message="" if phase == "Succeeded" else "exit code 1"),
        record_step(failed=failed_ref, succeeded=succeeded_ref),
    ]
    argo.set_status(child["metadata"]["name"], phase, message=message, steps=steps)
    return failed_ref, succeeded_ref


def finish_parent(argo: Argo, parent: dict[str, Any], first: str, second: str) -> None:
    """The certification Workflow ends after its two category steps (each as its category ended), failed
    when either step failed, as Argo ends it."""
    phase = "Succeeded" if first == second == "Succeeded" else "Failed"
    steps = [
        Step("nccl-all-reduce", "category-0", first),
        Step("nemotron5-8b", "category-1", second),
        Step("verdict", "verdict", phase),
    ]
    argo.set_status(parent["metadata"]["name"], phase, steps=steps, root_template="certification")


def run_to_end(
    argo: Argo, parent: dict[str, Any], *, second: str = "Succeeded", message: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both categories run to their end (the second one to `second`), then the parent ends."""
    first = argo.create_category(parent, 0)
    finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a", "node-b"])
    last = argo.create_category(parent, 1)
    finish_category(argo, last, second, message=message)
    finish_parent(argo, parent, "Succeeded", "Succeeded" if second == "Succeeded" else "Failed")
    return first, last


def is_terminal(status: dict[str, Any]) -> bool:
    return status.get("result") in ("PASSED", "FAILED", "INCOMPLETE")


def exclusive_true(status: dict[str, Any]) -> list[str]:
    return [kind for kind in true_conditions(status) if kind in ("InProgress", "Succeeded", "Failed")]


# --- status from Workflows ---------------------------------------------------------------------------------------


def test_a_certification_goes_from_in_progress_to_succeeded_as_argo_runs_its_workflows(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    cert = create_certification(kube, namespace)
    watchers.start()
    status = wait_status(kube, namespace, NAME, lambda s: s.get("result") == "RUNNING", "RUNNING")["status"]
    assert exclusive_true(status) == ["InProgress"]
    assert category_phases(status) == ["Pending", "Pending"]

    parent = argo.submit(cert)
    first = argo.create_category(parent, 0)
    status = wait_status(kube, namespace, NAME, lambda s: category_phases(s)[:1] == ["InProgress"], "category 0 runs")[
        "status"
    ]
    assert condition(status, "InProgress") | {"status": "True", "reason": "WorkflowRunning"} == condition(
        status, "InProgress"
    )
    assert "communication/nccl-all-reduce (category 1 of 2)" in condition(status, "InProgress")["message"]

    failed_ref, succeeded_ref = finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a", "node-b"])
    status = wait_status(kube, namespace, NAME, lambda s: s.get("passed") == "1/2", "category 0 succeeded")["status"]
    assert status["result"] == "RUNNING"
    assert exclusive_true(status) == ["InProgress"]

    second = argo.create_category(parent, 1)
    finish_category(argo, second, "Succeeded")
    finish_parent(argo, parent, "Succeeded", "Succeeded")
    final = wait_status(kube, namespace, NAME, is_terminal, "a result")
    status = final["status"]

    assert status["result"] == "PASSED"
    assert status["passed"] == "2/2"
    assert status["observedGeneration"] == final["metadata"]["generation"]
    assert (status["failedNodes"], status["excludedNodes"]) == (0, 0)
    assert exclusive_true(status) == ["Succeeded"]
    succeeded = condition(status, "Succeeded")
    assert (succeeded["reason"], succeeded["message"]) == ("AllWorkflowsSucceeded", SUCCEEDED_MESSAGE)
    assert succeeded["observedGeneration"] == final["metadata"]["generation"]
    assert condition(status, "InProgress")["status"] == condition(status, "Failed")["status"] == "False"
    assert condition(status, "ValidationFailed")["status"] == "False"
    parent_name = parent["metadata"]["name"]
    categories = status["categoryStatuses"]
    assert [(c["domain"] + "/" + c["variant"], c["status"]) for c in categories] == [
        (CATEGORIES[0], "Succeeded"),
        (CATEGORIES[1], "Succeeded"),
    ]
    assert categories[0]["workflowRef"] == {"name": f"{parent_name}-0", "namespace": namespace}
    assert categories[1]["workflowRef"] == {"name": f"{parent_name}-1", "namespace": namespace}
    assert categories[0]["failedNodesRef"] == {"apiGroup": "", "kind": "ConfigMap", "name": failed_ref}
    assert categories[0]["succeededNodesRef"] == {"apiGroup": "", "kind": "ConfigMap", "name": succeeded_ref}
    assert "failedNodesRef" not in categories[1]
    assert "succeededNodesRef" not in categories[1]


def test_a_failed_category_fails_the_certification_and_counts_nodes_from_the_failed_nodes_configmap(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    cert = create_certification(kube, namespace)
    watchers.start()
    parent = argo.submit(cert)
    first = argo.create_category(parent, 0)
    finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a"])
    second = argo.create_category(parent, 1)
    wait_status(kube, namespace, NAME, lambda s: category_phases(s) == ["Succeeded", "InProgress"], "category 1 runs")
    nodes = [
        FailedNode("node-a", THRESHOLD_VIOLATION, "busbw 12.5 GB/s < 40"),
        FailedNode("node-c", "HardwareFailureDetected", "XID 79 on GPU 3"),
    ]
    failed_ref, _ = finish_category(
        argo, second, "Failed", message="child workflow failed: 1 group failed", failed=nodes
    )
    finish_parent(argo, parent, "Succeeded", "Failed")

    status = wait_status(kube, namespace, NAME, is_terminal, "a result")["status"]

    assert status["result"] == "FAILED"
    assert status["passed"] == "1/2"
    assert status["failedNodes"] == 2
    assert exclusive_true(status) == ["Failed"]
    failed = condition(status, "Failed")
    assert (failed["reason"], failed["message"]) == ("WorkflowFailed", FAILED_MESSAGE)
    validation = condition(status, "ValidationFailed")
    assert (validation["status"], validation["reason"]) == ("True", "ThresholdViolation")
    assert CATEGORIES[1] in validation["message"]
    category = status["categoryStatuses"][1]
    assert category["status"] == "Failed"
    assert "child workflow failed: 1 group failed" in category["message"]
    assert category["failedNodesRef"]["name"] == failed_ref


def test_nodes_excluded_by_the_plan_make_a_passing_certification_incomplete(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    cert = create_certification(kube, namespace)
    parent = argo.submit(cert)
    first = argo.create_category(parent, 0)
    (loaded,) = load_certifications(json.dumps(certification_manifest(namespace, NAME)), "cert.yaml")
    resolved, errors = resolve_certification(loaded.certification.spec, argo.catalog)
    assert not errors
    context = StepContext(resolved[0], NAME, first["metadata"]["name"], first["metadata"]["uid"], namespace)
    plan = Plan(
        architecture="hopper",
        candidates=("node-a", "node-b", "node-c", "node-d"),
        excluded=(
            Exclusion("node-c", "Cordoned", "node is cordoned"),
            Exclusion("node-d", "InsufficientGPUs", "4 allocatable GPUs, 8 requested"),
        ),
        groups=(NodeGroup("g0", ("node-a", "node-b")),),
    )
    kube.create(plan_configmap(context, plan))  # the plan step publishes it before any group runs
    finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a", "node-b"])
    second = argo.create_category(parent, 1)
    finish_category(argo, second, "Succeeded")
    finish_parent(argo, parent, "Succeeded", "Succeeded")
    watchers.start()

    status = wait_status(kube, namespace, NAME, is_terminal, "a result")["status"]

    assert status["result"] == "INCOMPLETE"
    assert status["excludedNodes"] == 2
    assert status["passed"] == "2/2"
    assert exclusive_true(status) == ["Succeeded"]


def test_a_link_fault_in_a_diagnose_categorys_configmap_fails_it_in_the_status_and_the_report(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers, control_plane: Cluster
) -> None:
    cert = create_certification(kube, namespace)
    parent = argo.submit(cert)
    record: DiagnoseRecord = {
        "rounds": 2,
        "jobs": 5,
        "nodeJobs": 16,
        "faulty": [],
        "healthy": 4,
        "infrastructureFaults": [
            {
                "domain": "sim-cluster.1|sim-cluster.2",
                "groupA": ["node-a", "node-b"],
                "groupB": ["node-c", "node-d"],
                "stage": "inter-screening",
            }
        ],
        "untested": [],
        "history": [
            {"round": 1, "groups": [{"name": "r1-g0", "stage": "inter-screening", "nodes": 4, "outcome": "failed"}]}
        ],
    }
    first = argo.create_category(parent, 0)
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    finish_category(argo, first, "Failed", message="child 'x-0-1' failed", failed=[], succeeded=nodes, diagnose=record)
    finish_category(argo, argo.create_category(parent, 1), "Succeeded")
    finish_parent(argo, parent, "Failed", "Succeeded")
    watchers.start()

    status = wait_status(kube, namespace, NAME, is_terminal, "a result")["status"]

    assert (status["result"], status["passed"], status["failedNodes"]) == ("FAILED", "1/2", 0)
    category = status["categoryStatuses"][0]
    assert category["status"] == "Failed"
    assert category["message"] == "link fault between domains sim-cluster.1 and sim-cluster.2; child 'x-0-1' failed"
    assert category["diagnose"] == {  # what the API server kept: the CRD's schema prunes nothing of it
        "rounds": 2,
        "jobs": 5,
        "nodeJobs": 16,
        "infrastructureFaultCount": 1,
        "infrastructureFaults": record["infrastructureFaults"],
        "untestedNodeCount": 0,
        "untestedNodes": [],
    }
    assert "diagnose" not in status["categoryStatuses"][1]
    # The watcher writes the status first and its Events after it.
    failures = wait_for(
        "the CategoryFailed Event",
        lambda: [
            event for event in events_about(kube, namespace, cert["metadata"]["uid"]) if event[1] == "CategoryFailed"
        ],
    )
    assert [message.split(": ", 1)[1] for _, _, message in failures] == [category["message"]]
    kubeconfig = str(control_plane.kubeconfig)
    text = CliRunner().invoke(cli, ["report", NAME, "-n", namespace, "--kubeconfig", kubeconfig]).stdout
    assert "  Diagnose:  2 rounds, 5 jobs, 16 node-jobs" in text.splitlines()
    assert "    link sim-cluster.1|sim-cluster.2 (inter-screening): node-a, node-b and node-c, node-d" in text
    junit = CliRunner().invoke(cli, ["report", NAME, "-n", namespace, "-o", "junit", "--kubeconfig", kubeconfig])
    suite = ET.fromstring(junit.stdout.encode()).find("testsuite")
    assert suite is not None
    names = [case.get("name") for case in suite.findall("testcase")]
    assert names == [CATEGORIES[0], f"{CATEGORIES[0]}/link sim-cluster.1|sim-cluster.2", CATEGORIES[1]]


# --- restarts, relists, conflicts ------------------------------------------------------------------------------


class SlowWorkflowLists(KubeClient):
    """Workflows are listed a second late (they are big objects: with thousands, the list takes that long)."""

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> tuple[list[dict[str, Any]], str]:
        if resource.plural == "workflows":
            time.sleep(1.0)
        return super().list(
            resource, namespace, label_selector=label_selector, field_selector=field_selector, limit=limit
        )


def test_a_restarted_watcher_loses_nothing_rewrites_nothing_and_records_each_transition_once(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers, doubles: Doubles
) -> None:
    slow = doubles.connect(SlowWorkflowLists)  # no reconcile may judge a Certification before its Workflows are in
    cert = create_certification(kube, namespace)
    parent = argo.submit(cert)
    first = argo.create_category(parent, 0)
    one = watchers.start()
    wait_status(kube, namespace, NAME, lambda s: category_phases(s) == ["InProgress", "Pending"], "category 0 runs")
    one.settle()
    one.stop()

    # While no watcher runs, category 0 ends and category 1 starts.
    finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a"])
    second = argo.create_category(parent, 1)
    two = watchers.start(client=slow)
    wait_status(kube, namespace, NAME, lambda s: category_phases(s) == ["Succeeded", "InProgress"], "category 1 runs")
    two.settle()
    two.stop()
    assert status_writes(two.metrics) == 1, events_about(kube, namespace, cert["metadata"]["uid"])

    finish_category(argo, second, "Succeeded")
    finish_parent(argo, parent, "Succeeded", "Succeeded")
    three = watchers.start(client=slow)
    done = wait_status(kube, namespace, NAME, is_terminal, "a result")
    three.settle(3)
    three.stop()
    assert done["status"]["result"] == "PASSED"
    assert status_writes(three.metrics) == 1, events_about(kube, namespace, cert["metadata"]["uid"])

    # A fourth start with nothing changed writes nothing: the stored status is already the computed one.
    four = watchers.start(client=slow)
    four.wait_synced()
    four.settle(3)
    four.stop()
    assert status_writes(four.metrics) == 0
    assert certification(kube, namespace, NAME)["metadata"]["resourceVersion"] == done["metadata"]["resourceVersion"]

    events = events_about(kube, namespace, cert["metadata"]["uid"])
    reasons = [reason for _, reason, _ in events]
    assert len(events) == len(set(events)), f"duplicated Events: {events}"
    assert reasons.count("CategoryStarted") == 2
    assert reasons.count("CategorySucceeded") == 2
    assert reasons.count("AllWorkflowsSucceeded") == 1
    assert sum(reason in ("WorkflowRunning", "WorkflowCreated", "WaitingForWorkflow") for reason in reasons) == 1
    assert not [event for event in events if event[0] == "Warning"], events


class ExpiringWatches(KubeClient):
    """The first watch of Certifications fails with 410 Gone as an API error, the first watch of Workflows with
    a 410 ERROR event; before either, `before_expiry` runs (a change the expired watch would have carried)."""

    before_expiry: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.expired: list[str] = []
        self.lock = threading.Lock()

    def watch(self, resource: Any, namespace: str | None, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        with self.lock:
            first = resource.plural not in self.expired
            if first:
                self.expired.append(resource.plural)
                if len(self.expired) == 1 and self.before_expiry is not None:
                    self.before_expiry()
        if first and resource.plural == "certifications":
            raise ApiError(410, "Expired", "too old resource version: 1 (2)")
        if first:
            yield "ERROR", {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410}
            return
        yield from super().watch(resource, namespace, **kwargs)


def test_an_expired_watch_is_relisted_and_the_change_it_missed_is_seen(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers, doubles: Doubles
) -> None:
    cert = create_certification(kube, namespace)
    parent = argo.submit(cert)
    first = argo.create_category(parent, 0)
    flaky = doubles.connect(ExpiringWatches)
    # Written after the first lists, so only a relist can show it (the long resync cannot: it reuses the cache).
    flaky.before_expiry = lambda: finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a"])
    running = watchers.start(client=flaky, resync_seconds=600.0)
    wait_status(kube, namespace, NAME, lambda s: s.get("passed") == "1/2", "the missed change")

    assert sorted(flaky.expired) == ["certifications", "workflows"]
    # The status can follow the Workflows' relist before the Certifications' relist is counted: wait for both.
    for resource in ("certifications", "workflows"):
        wait_for(
            f"the {resource} relist to be counted",
            lambda resource=resource: sample(running.metrics, "nvcre_relists_total", resource=resource) >= 2 or None,
        )
        assert sample(running.metrics, "nvcre_relists_total", resource=resource) == 2

    second = argo.create_category(parent, 1)  # and the new watch goes on delivering changes
    finish_category(argo, second, "Succeeded")
    finish_parent(argo, parent, "Succeeded", "Succeeded")
    assert wait_status(kube, namespace, NAME, is_terminal, "a result")["status"]["result"] == "PASSED"


class ConflictingStatusWrites(KubeClient):
    """Someone else writes the Certification's status just before our first status write reaches the server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes: list[str] = []

    def replace(self, manifest: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        if subresource == "status" and not self.outcomes:
            metadata = manifest["metadata"]
            outsider = {"status": {"failedNodes": 42, "passed": "0/2"}}
            self.merge_patch(CERTIFICATIONS, metadata["name"], outsider, metadata["namespace"], subresource="status")
        try:
            written = super().replace(manifest, subresource=subresource)
        except ApiError as error:
            self.outcomes.append(f"{error.status}")
            raise
        self.outcomes.append("ok")
        return written


def test_a_status_written_by_someone_else_in_between_is_a_conflict_and_the_reconcile_recomputes(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers, doubles: Doubles
) -> None:
    cert = create_certification(kube, namespace)
    parent = argo.submit(cert)
    first = argo.create_category(parent, 0)
    finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a"])
    conflicting = doubles.connect(ConflictingStatusWrites)
    running = watchers.start(client=conflicting, resync_seconds=600.0)

    status = wait_status(kube, namespace, NAME, lambda s: s.get("result") == "RUNNING", "a status")["status"]
    wait_for("the retried write", lambda: len(conflicting.outcomes) >= 2)

    assert conflicting.outcomes == ["409", "ok"]
    assert status["passed"] == "1/2"
    assert status["failedNodes"] == 0, "the outsider's value survived the recompute"
    assert sample(running.metrics, "nvcre_reconcile_total", outcome="error") == 0


def test_a_status_overwritten_from_outside_is_put_right_without_waiting_for_a_resync(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    cert = create_certification(kube, namespace)
    first = argo.create_category(argo.submit(cert), 0)
    finish_category(argo, first, "Succeeded", failed=[], succeeded=["node-a"])
    running = watchers.start(resync_seconds=600.0)
    written = wait_status(kube, namespace, NAME, lambda s: s.get("passed") == "1/2", "a status")["status"]
    wait_for("the first write", lambda: status_writes(running.metrics) == 1)

    kube.merge_patch(CERTIFICATIONS, NAME, {"status": {"passed": "0/2"}}, namespace, subresource="status")

    assert wait_status(kube, namespace, NAME, lambda s: s.get("passed") == "1/2", "the status put right")["status"] == (
        written
    )
    assert status_writes(running.metrics) == 2


# --- leader election ---------------------------------------------------------------------------------------------


def test_only_the_leader_writes_and_the_other_replica_takes_over_after_the_lease_expires(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    lease_seconds, renew = 3, 0.5

    def lease(identity: str) -> LeaseSettings:
        return LeaseSettings("nvcre-argo-watcher", namespace, identity, lease_seconds, renew, retry_seconds=0.2)

    cert = create_certification(kube, namespace)
    replicas = [watchers.replica(lease("replica-a")), watchers.replica(lease("replica-b"))]
    wait_for("a leader", lambda: any(replica.leading for replica in replicas))
    wait_status(kube, namespace, NAME, lambda s: s.get("result") == "RUNNING", "a status")
    time.sleep(2 * renew)
    (leader,) = [replica for replica in replicas if replica.leading]
    (standby,) = [replica for replica in replicas if not replica.leading]
    held = kube.get(LEASES, "nvcre-argo-watcher", namespace)
    assert held is not None
    assert held["spec"]["holderIdentity"] == leader.identity
    assert status_writes(leader.metrics) >= 1
    assert reconciles(standby.metrics) == status_writes(standby.metrics) == 0

    leader.stop()
    stopped = time.monotonic()
    wait_for("the standby to take over", lambda: standby.leading, timeout=lease_seconds + 10)
    took = time.monotonic() - stopped
    assert took >= lease_seconds - renew - 0.2, f"took over after {took:.2f} s, before the lease expired"

    parent = argo.submit(cert)
    argo.create_category(parent, 0)
    wait_status(kube, namespace, NAME, lambda s: category_phases(s)[:1] == ["InProgress"], "the new leader's write")
    assert status_writes(standby.metrics) >= 1
    taken = kube.get(LEASES, "nvcre-argo-watcher", namespace)
    assert taken is not None
    assert taken["spec"]["holderIdentity"] == standby.identity
    assert taken["spec"]["leaseTransitions"] == 1
    assert not leader.lost.is_set()
    assert not standby.lost.is_set()


# --- --submit ------------------------------------------------------------------------------------------------------


def test_submit_creates_exactly_one_parent_workflow_owned_by_the_certification_across_restarts(
    kube: KubeClient, namespace: str, watchers: Watchers, catalog: Catalog
) -> None:
    submit = SubmitSettings(catalog, "nvcre-argo:test")
    cert = kube.apply(certification_manifest(namespace, NAME), field_manager="kubectl")  # kubectl apply --server-side
    # Reconciles that never see the Workflow they created (as with an empty Workflow cache) create no second one.
    metrics = Metrics()
    reconciler = Reconciler(kube, metrics=metrics, submit=submit)
    for _ in range(3):
        reconciler.reconcile(namespace, NAME, [])
    assert sample(metrics, "nvcre_workflows_submitted_total") == 1
    one = watchers.start(submit=submit)
    wait_for("the parent Workflow", lambda: own_parents(kube, namespace, cert))
    one.settle(3)
    one.stop()
    two = watchers.start(submit=submit)
    two.settle(3)
    two.stop()
    three = watchers.start(submit=submit)
    three.settle(3)

    parents = own_parents(kube, namespace, cert)
    assert [item["metadata"]["name"] for item in parents] == [submitted_workflow_name(NAME, cert["metadata"]["uid"])]
    assert parents[0]["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Certification",
            "name": NAME,
            "uid": cert["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    workflows, _ = kube.list(WORKFLOWS, namespace)
    assert len(workflows) == 1
    assert sum(sample(w.metrics, "nvcre_workflows_submitted_total") for w in (one, two, three)) == 0
    status = certification(kube, namespace, NAME)["status"]
    assert condition(status, "InProgress")["reason"] == "WorkflowCreated"


@pytest.mark.parametrize("shared_runner", [False, True])
def test_submit_compiles_with_the_shared_runner_when_told(
    kube: KubeClient, namespace: str, catalog: Catalog, shared_runner: bool
) -> None:
    kube.apply(certification_manifest(namespace, NAME), field_manager="kubectl")
    reconciler = Reconciler(
        kube, metrics=Metrics(), submit=SubmitSettings(catalog, "nvcre-argo:test", False, shared_runner)
    )
    reconciler.reconcile(namespace, NAME, [])
    (parent,) = kube.list(WORKFLOWS, namespace)[0]
    # The category Workflows the parent creates start at the shared-runner entrypoint, or at the default one.
    assert ("category-shared" in json.dumps(parent)) == shared_runner


def test_submit_fails_a_certification_that_does_not_compile_with_the_field_path_and_creates_nothing(
    kube: KubeClient, namespace: str, watchers: Watchers, catalog: Catalog
) -> None:
    cert = create_certification(kube, namespace, variants=["nccl-all-reduce", "nemotron5-9000b"])
    running = watchers.start(submit=SubmitSettings(catalog, "nvcre-argo:test"))

    status = wait_status(kube, namespace, NAME, is_terminal, "a result")["status"]
    running.settle()

    assert status["result"] == "FAILED"
    failed = condition(status, "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "CategoryNotFound")
    assert "spec.categories[1]" in failed["message"]
    assert "nemotron5-9000b" in failed["message"]
    assert exclusive_true(status) == ["Failed"]
    assert kube.list(WORKFLOWS, namespace)[0] == []
    assert sample(running.metrics, "nvcre_workflows_submitted_total") == 0
    events = events_about(kube, namespace, cert["metadata"]["uid"])
    assert [(kind, reason) for kind, reason, _ in events if reason == "CategoryNotFound"] == [
        ("Warning", "CategoryNotFound")
    ]


def test_submit_writes_the_status_of_a_certification_that_does_not_compile_once(
    kube: KubeClient, namespace: str, watchers: Watchers, catalog: Catalog
) -> None:
    create_certification(kube, namespace, variants=["nccl-all-reduce", "nemotron5-9000b"])
    running = watchers.start(submit=SubmitSettings(catalog, "nvcre-argo:test"))
    wait_status(kube, namespace, NAME, is_terminal, "a result")
    running.settle(3)

    assert status_writes(running.metrics) == 1


def test_submit_never_adopts_counts_or_deletes_a_labelled_workflow_it_does_not_own(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    catalog = argo.catalog
    cert = create_certification(kube, namespace)
    foreign = argo.create(compile_parent(cert, catalog=catalog, name="someone-elses"))  # labelled, not owned
    argo.set_status("someone-elses", "Running", root_template="certification")
    foreign_child = argo.create_category(argo.get("someone-elses"), 0)
    finish_category(argo, foreign_child, "Failed", message="not ours", failed=[FailedNode("x", "WorkloadFailed", "m")])
    running = watchers.start(submit=SubmitSettings(catalog, "nvcre-argo:test"))

    wait_for("the certification's own parent", lambda: own_parents(kube, namespace, cert))
    running.settle(3)
    status = certification(kube, namespace, NAME)["status"]

    assert category_phases(status) == ["Pending", "Pending"]
    assert status["result"] == "RUNNING"
    assert status["failedNodes"] == 0
    assert not [c for c in status["categoryStatuses"] if "workflowRef" in c]
    assert argo.get("someone-elses")["metadata"]["uid"] == foreign["metadata"]["uid"]
    assert argo.get(foreign_child["metadata"]["name"])["metadata"]["uid"] == foreign_child["metadata"]["uid"]
    assert len(own_parents(kube, namespace, cert)) == 1


def test_submit_reports_a_name_collision_instead_of_adopting_the_workflow(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    cert = create_certification(kube, namespace)
    taken = submitted_workflow_name(NAME, cert["metadata"]["uid"])
    foreign = argo.create(compile_parent(cert, catalog=argo.catalog, name=taken))  # the name, not ours
    running = watchers.start(submit=SubmitSettings(argo.catalog, "nvcre-argo:test"))

    status = wait_status(kube, namespace, NAME, is_terminal, "a result")["status"]
    running.settle(2)

    failed = next(item for item in status["conditions"] if item["type"] == "Failed")
    assert (status["result"], failed["status"], failed["reason"]) == ("FAILED", "True", "WorkflowNameCollision")
    assert taken in failed["message"]
    assert argo.get(taken)["metadata"]["uid"] == foreign["metadata"]["uid"], "left alone"
    assert not own_parents(kube, namespace, cert)


# --- metrics and endpoints ---------------------------------------------------------------------------------------


def test_a_deleted_certification_leaves_no_metric_series(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers
) -> None:
    cert = create_certification(kube, namespace)
    parent = argo.submit(cert)
    argo.create_category(parent, 0)
    running = watchers.start()
    wait_status(kube, namespace, NAME, lambda s: category_phases(s)[:1] == ["InProgress"], "category 0 runs")
    running.settle()
    labels = {"namespace": namespace, "name": NAME}
    category = {"namespace": namespace, "certification": NAME, "index": "0", "domain": "communication"}
    assert running.metrics.registry.get_sample_value("nvcre_certification_result", labels | {"result": "RUNNING"})
    category |= {"variant": "nccl-all-reduce", "status": "InProgress"}
    assert running.metrics.registry.get_sample_value("nvcre_category_status", category) == 1

    kube.delete(CERTIFICATIONS, NAME, namespace)

    wait_for("the series to go", lambda: NAME.encode() not in running.metrics.exposition())
    assert running.metrics.registry.get_sample_value("nvcre_category_status", category) is None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_metrics_healthz_and_readyz_are_served_over_http(kube: KubeClient, namespace: str, watchers: Watchers) -> None:
    create_certification(kube, namespace)
    ready = threading.Event()
    alive = threading.Event()
    alive.set()
    port = free_port()
    running = watchers.start()
    server = serve(bind="127.0.0.1", port=port, metrics=running.metrics, ready=ready.is_set, alive=alive.is_set)
    try:
        base = f"http://127.0.0.1:{port}"
        assert fetch(f"{base}/readyz")[0] == 503
        assert fetch(f"{base}/healthz") == (200, "ok\n")
        ready.set()
        assert fetch(f"{base}/readyz") == (200, "ok\n")
        wait_status(kube, namespace, NAME, lambda s: s.get("result") == "RUNNING", "a status")
        code, text = fetch(f"{base}/metrics")
        assert code == 200
        series = f'nvcre_certification_result{{name="{NAME}",namespace="{namespace}",result="RUNNING"}} 1.0'
        assert series in text.splitlines()
        assert "nvcre_reconcile_total" in text
        assert "nvcre_relists_total" in text
        alive.clear()
        assert fetch(f"{base}/healthz")[0] == 500
        assert fetch(f"{base}/nothing")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


# --- the report and install commands -----------------------------------------------------------------------------


def test_report_exits_0_for_passed_and_1_for_failed_in_text_json_and_junit(
    kube: KubeClient, namespace: str, argo: Argo, watchers: Watchers, control_plane: Cluster
) -> None:
    passed = create_certification(kube, namespace, "passes")
    run_to_end(argo, argo.submit(passed))
    failed = create_certification(kube, namespace, "fails")
    run_to_end(argo, argo.submit(failed), second="Failed", message="group g0 failed")
    watchers.start()
    for name in ("passes", "fails"):
        wait_status(kube, namespace, name, is_terminal, "a result")
    runner = CliRunner()

    def report(name: str, output: str) -> tuple[int, str]:
        args = ["report", name, "-n", namespace, "-o", output, "--kubeconfig", str(control_plane.kubeconfig)]
        result = runner.invoke(cli, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        return result.exit_code, result.stdout

    code, text = report("passes", "text")
    assert code == 0
    assert "PASSED" in text
    code, text = report("fails", "text")
    assert code == 1
    assert "FAILED" in text
    code, text = report("passes", "json")
    document = json.loads(text)
    assert code == 0
    assert (document["result"], document["passed"], len(document["categories"])) == ("PASSED", "2/2", 2)
    assert document["categories"][0]["succeededNodes"] == ["node-a", "node-b"]
    code, text = report("fails", "json")
    assert code == 1
    assert json.loads(text)["result"] == "FAILED"
    for name, expected_code, failures in (("passes", 0, 0), ("fails", 1, 1)):
        code, text = report(name, "junit")
        assert code == expected_code
        suite = ET.fromstring(text.encode()).find("testsuite")
        assert suite is not None
        cases = suite.findall("testcase")
        assert [case.get("name") for case in cases] == list(CATEGORIES)
        assert len(suite.findall("testcase/failure")) == failures
        assert suite.get("failures") == str(failures)


def _dry_run_path(kube: KubeClient, manifest: dict[str, Any]) -> str:
    """The collection path of a manifest's kind, found by API discovery (not from the client's own table)."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    (resource,) = [
        item for item in kube.request("GET", root)["resources"] if item["kind"] == kind and "/" not in item["name"]
    ]
    namespace = manifest["metadata"].get("namespace")
    return (
        f"{root}/namespaces/{namespace}/{resource['name']}" if resource["namespaced"] else f"{root}/{resource['name']}"
    )


def install_documents(namespace: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["install", "--print", "--namespace", namespace, "--watch-namespace", namespace])
    assert result.exit_code == 0, result.output
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def test_install_print_output_passes_a_strict_server_side_dry_run_and_never_writes_nodes(
    kube: KubeClient, namespace: str
) -> None:
    documents = install_documents(namespace)
    kinds = [document["kind"] for document in documents]
    assert kinds[0] == "CustomResourceDefinition"
    assert "Deployment" in kinds
    assert "WorkflowTemplate" in kinds
    problems = []
    for document in documents:
        what = f"{document['kind']}/{document['metadata']['name']}"
        query = {"dryRun": "All", "fieldValidation": "Strict"}
        try:
            kube.request("POST", _dry_run_path(kube, document), body=document, query=query)
        except ApiError as error:
            if not error.already_exists:
                problems.append(f"{what}: {error}")
                continue
            # Already there (our CRD, the test namespace): a strict dry-run server-side apply checks it instead.
            path = f"{_dry_run_path(kube, document)}/{document['metadata']['name']}"
            try:
                kube.request(
                    "PATCH",
                    path,
                    body=document,
                    query=query | {"fieldManager": "nvcre-argo-install", "force": "true"},
                    content_type="application/apply-patch+yaml",
                )
            except ApiError as apply_error:
                problems.append(f"{what} (apply): {apply_error}")
    assert problems == []

    for document in documents:
        if document["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in document.get("rules") or []:
            touches_nodes = {"nodes", "*"} & set(rule.get("resources") or []) and {"", "*"} & set(
                rule.get("apiGroups") or []
            )
            if touches_nodes:
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, f"{document['metadata']['name']}: {rule}"


def test_the_kube_client_can_dry_run_create_every_object_install_prints(kube: KubeClient, namespace: str) -> None:
    problems = []
    for document in install_documents(namespace):
        try:
            kube.create(document, dry_run=True, strict=True)
        except ApiError as error:
            if not error.already_exists:
                problems.append(f"{document['kind']}/{document['metadata']['name']}: {error}")
    assert problems == []
