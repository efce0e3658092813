"""The watcher's pure helpers: the Lease rule, the work queue, the Workflow cache, the ConfigMap cache, and
what it reads from a failed-nodes ConfigMap.

The Lease rule is client-go's: a Lease held by someone else is taken over only when it has not changed for
`leaseDurationSeconds`, counted on our own monotonic clock from when we first saw it so; the times written
in it are never compared with our clock, so clock skew between nodes cannot hand a live Lease over.
"""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from nvcre_argo.api.status import CategoryStatus, TypedLocalObjectReference
from nvcre_argo.controller.inputs import ConfigMapReader, DecodedCache, read_counts, read_failed_nodes_contents
from nvcre_argo.controller.leader import lease_is_free, observe, renew_deadline_passed
from nvcre_argo.controller.loop import WorkflowCache, WorkQueue, certification_key
from nvcre_argo.controller.reconciler import relevant_workflows
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.results import DIAGNOSE_KEY, DiagnoseRecord, FailedNode, failed_nodes_configmap_manifest
from nvcre_argo.watch.diagnose import diagnose_summary

DURATION = 15


def lease(holder: str | None, renew: str = "2026-01-01T00:00:00.000000Z", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"leaseDurationSeconds": DURATION, "renewTime": renew, "leaseTransitions": 0}
    if holder is not None:
        body["holderIdentity"] = holder
    return {"metadata": {"name": "nvcre-argo-watcher", "resourceVersion": "1"}, "spec": body | spec}


# --- the Lease --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("waited", "free"),
    [
        pytest.param(DURATION - 0.001, False, id="a-moment-before-the-duration"),
        pytest.param(DURATION, True, id="exactly-the-duration"),
        pytest.param(DURATION + 1, True, id="past-the-duration"),
    ],
)
def test_a_lease_held_by_another_is_free_once_unchanged_for_its_duration_on_our_clock(
    waited: float, free: bool
) -> None:
    held = lease("replica-a")
    seen = observe(None, held, now=100.0)
    assert lease_is_free(held, "replica-b", observe(seen, held, now=100.0 + waited), 100.0 + waited) is free


def test_a_renewal_restarts_the_count_whatever_time_it_writes() -> None:
    first = lease("replica-a", renew="2026-01-01T00:00:00.000000Z")
    # The holder's clock is an hour behind ours: its renewTime looks long expired, yet it renews.
    renewed = lease("replica-a", renew="2025-12-31T23:00:05.000000Z")
    seen = observe(None, first, now=0.0)
    seen = observe(seen, renewed, now=10.0)
    assert seen.seen_at == 10.0
    assert not lease_is_free(renewed, "replica-b", seen, now=20.0)
    assert lease_is_free(renewed, "replica-b", seen, now=25.0)


def test_a_lease_stamped_in_the_future_by_a_fast_clock_still_expires_when_it_stops_changing() -> None:
    future = lease("replica-a", renew="2099-01-01T00:00:00.000000Z")
    seen = observe(None, future, now=0.0)
    assert lease_is_free(future, "replica-b", observe(seen, future, now=DURATION), now=DURATION)


def test_a_freshly_started_candidate_waits_a_full_duration_before_taking_over() -> None:
    stale = lease("replica-a", renew="2000-01-01T00:00:00.000000Z")  # written long ago
    seen = observe(None, stale, now=500.0)
    assert not lease_is_free(stale, "replica-b", seen, now=500.0)
    assert lease_is_free(stale, "replica-b", seen, now=500.0 + DURATION)


@pytest.mark.parametrize("holder", [None, "", "replica-b"], ids=["no-holder", "empty-holder", "held-by-us"])
def test_an_unheld_lease_or_our_own_is_always_free(holder: str | None) -> None:
    held = lease(holder)
    assert lease_is_free(held, "replica-b", observe(None, held, now=0.0), now=0.0)


def test_an_unchanged_record_keeps_its_first_observation() -> None:
    held = lease("replica-a")
    first = observe(None, held, now=1.0)
    assert observe(first, lease("replica-a"), now=9.0) is first
    assert observe(first, lease("replica-a", leaseTransitions=1), now=9.0).seen_at == 9.0


@pytest.mark.parametrize(
    ("since", "passed"),
    [pytest.param(10.0, False, id="exactly-two-thirds"), pytest.param(10.001, True, id="past-two-thirds")],
)
def test_a_leader_stops_leading_once_it_has_not_renewed_for_two_thirds_of_the_lease(since: float, passed: bool) -> None:
    assert renew_deadline_passed(100.0, 100.0 + since, DURATION) is passed


# --- the work queue ---------------------------------------------------------------------------------------------


def test_the_work_queue_is_fifo_and_a_key_queued_twice_before_processing_is_processed_once() -> None:
    queue = WorkQueue()
    for key in [("ns", "a"), ("ns", "b"), ("ns", "a"), ("ns", "c")]:
        queue.add(key)
    assert len(queue) == 3
    assert [queue.get(timeout=0) for _ in range(4)] == [("ns", "a"), ("ns", "b"), ("ns", "c"), None]


def test_a_key_added_again_after_it_was_taken_is_queued_again() -> None:
    queue = WorkQueue()
    queue.add(("ns", "a"))
    assert queue.get(timeout=0) == ("ns", "a")
    queue.add(("ns", "a"))
    assert queue.get(timeout=0) == ("ns", "a")


def test_a_waiting_worker_wakes_up_when_a_key_is_added() -> None:
    queue = WorkQueue()
    got: list[tuple[str, str] | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get(timeout=10)))
    worker.start()
    queue.add(("ns", "a"))
    worker.join(timeout=10)
    assert got == [("ns", "a")]


# --- the Workflow cache -----------------------------------------------------------------------------------------


def workflow(uid: str, certification: str | None, namespace: str = "ns") -> dict[str, Any]:
    labels = {"nvcre.nvidia.com/certification": certification} if certification is not None else {}
    return {"metadata": {"uid": uid, "name": f"wf-{uid}", "namespace": namespace, "labels": labels}}


def test_a_workflow_belongs_to_the_certification_its_label_names_in_its_namespace() -> None:
    assert certification_key(workflow("1", "cert")) == ("ns", "cert")
    assert certification_key(workflow("1", None)) == ("ns", "")
    assert certification_key({}) == ("", "")


def test_the_workflow_cache_follows_events_and_a_relist_reports_every_certification_touched() -> None:
    cache = WorkflowCache()
    assert cache.apply("ADDED", workflow("1", "a")) == ("ns", "a")
    cache.apply("ADDED", workflow("2", "b"))
    cache.apply("MODIFIED", workflow("2", "b"))
    assert [item["metadata"]["uid"] for item in cache.for_certification(("ns", "b"))] == ["2"]
    assert cache.apply("DELETED", workflow("2", "b")) == ("ns", "b")
    assert cache.for_certification(("ns", "b")) == []
    # A relist that no longer has "a" but has "c": both need a reconcile.
    assert cache.replace_all([workflow("3", "c")]) == {("ns", "a"), ("ns", "c")}


def owned(item: dict[str, Any], owner_uid: str) -> dict[str, Any]:
    item["metadata"]["ownerReferences"] = [{"uid": owner_uid}]
    return item


def test_without_submit_every_labelled_workflow_counts_with_submit_only_those_the_certification_owns() -> None:
    cert = {"metadata": {"uid": "cert-uid"}}
    parent = owned(workflow("p", "cert"), "cert-uid")
    child = owned(workflow("c", "cert"), "p")
    foreign = workflow("f", "cert")
    assert relevant_workflows(cert, [parent, child, foreign], submit=False) == [parent, child, foreign]
    assert relevant_workflows(cert, [parent, child, foreign], submit=True) == [parent, child]


# --- the ConfigMap cache ----------------------------------------------------------------------------------------

A, B = ("ns", "a"), ("ns", "b")


def test_a_cached_value_is_returned_only_for_the_version_it_was_decoded_from() -> None:
    cache = DecodedCache()
    cache.put(("ns", "cm"), "7", ["decoded"])
    assert cache.get(("ns", "cm"), "7") == (True, ["decoded"])
    assert cache.get(("ns", "cm"), "8") == (False, None)
    cache.put(("ns", "cm"), "8", ["newer"])
    assert len(cache) == 1  # a new version replaces the old one


def test_the_cache_forgets_what_a_certifications_reconcile_no_longer_reads() -> None:
    cache = DecodedCache()
    for name in ("failed-1", "plan-1"):
        cache.put(("ns", name), "1", name)
    cache.retain(A, {("ns", "failed-1"), ("ns", "plan-1")})
    cache.retain(A, {("ns", "failed-1")})  # the category Workflow (and its plan) was garbage-collected
    assert ("ns", "plan-1") not in cache
    assert ("ns", "failed-1") in cache


def test_the_cache_forgets_a_deleted_certification_but_keeps_what_another_still_reads() -> None:
    cache = DecodedCache()
    cache.put(("ns", "mine"), "1", 1)
    cache.put(("ns", "shared"), "1", 2)
    cache.retain(A, {("ns", "mine"), ("ns", "shared")})
    cache.retain(B, {("ns", "shared")})
    cache.forget(A)
    assert len(cache) == 1
    assert ("ns", "shared") in cache
    cache.forget(B)
    assert len(cache) == 0


def test_the_cache_is_bounded_and_drops_the_least_recently_used_first() -> None:
    cache = DecodedCache(limit=2)
    cache.put(("ns", "1"), "v", 1)
    cache.put(("ns", "2"), "v", 2)
    cache.get(("ns", "1"), "v")  # used: "2" is now the oldest
    cache.put(("ns", "3"), "v", 3)
    assert len(cache) == 2
    assert ("ns", "2") not in cache
    assert ("ns", "1") in cache


# --- the failed-nodes ConfigMap of a diagnose category -------------------------------------------------------

LINK_RECORD: DiagnoseRecord = {
    "rounds": 2,
    "jobs": 5,
    "nodeJobs": 24,
    "faulty": ["gpu-node-3"],
    "healthy": 11,
    "infrastructureFaults": [
        {"domain": "sim-cluster.1|sim-cluster.2", "groupA": ["a"], "groupB": ["b"], "stage": "inter-screening"}
    ],
    "untested": [],
    "history": [],
}
CONVICTED = [FailedNode("gpu-node-3", "WorkloadFailed", "diagnose: failed in 2 job(s)")]


def not_gzip_summary() -> dict[str, Any]:
    manifest = failed_nodes_configmap_manifest("failed-nodes-1", "ns", CONVICTED)
    manifest["binaryData"][DIAGNOSE_KEY] = "eA=="  # base64 of "x"
    return manifest


class ConfigMapsByName:
    """Stands in for the API server's ConfigMap GETs (the reader needs nothing else)."""

    def __init__(self, *configmaps: dict[str, Any]) -> None:
        self.configmaps = {item["metadata"]["name"]: item for item in configmaps}

    def get(self, resource: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.configmaps.get(name)


def test_a_failed_nodes_configmap_gives_its_nodes_and_its_isolation_summary() -> None:
    manifest = failed_nodes_configmap_manifest("failed-nodes-1", "ns", CONVICTED, diagnose=LINK_RECORD)
    contents = read_failed_nodes_contents(manifest)
    assert (contents.nodes, contents.diagnose) == (CONVICTED, diagnose_summary(LINK_RECORD))
    assert read_failed_nodes_contents(failed_nodes_configmap_manifest("f", "ns", CONVICTED)).diagnose is None


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(not_gzip_summary(), id="not-gzip"),
        pytest.param(
            failed_nodes_configmap_manifest("failed-nodes-1", "ns", CONVICTED, diagnose={**LINK_RECORD, "jobs": -5}),
            id="negative-count",
        ),
    ],
)
def test_a_malformed_isolation_summary_never_hides_the_failed_nodes_beside_it(manifest: dict[str, Any]) -> None:
    contents = read_failed_nodes_contents(manifest)
    assert (contents.nodes, contents.diagnose) == (CONVICTED, None)


def test_read_counts_hands_each_diagnose_categorys_summary_to_the_status_by_index() -> None:
    plain = failed_nodes_configmap_manifest("failed-nodes-0", "ns", [])
    diagnosed = failed_nodes_configmap_manifest("failed-nodes-1", "ns", CONVICTED, diagnose=LINK_RECORD)
    for index, item in enumerate((plain, diagnosed)):
        item["metadata"]["resourceVersion"] = str(index)
    reader = ConfigMapReader(cast(KubeClient, ConfigMapsByName(plain, diagnosed)))
    categories = [
        CategoryStatus(
            domain="communication",
            variant="nccl-all-reduce",
            status="Failed",
            failed_nodes_ref=TypedLocalObjectReference(kind="ConfigMap", name=f"failed-nodes-{index}"),
        )
        for index in range(2)
    ]
    counts = read_counts(reader, ("ns", "cert"), categories, [])
    assert counts.diagnose == {1: diagnose_summary(LINK_RECORD)}
    assert counts.failed_node_names == frozenset({"gpu-node-3"})
