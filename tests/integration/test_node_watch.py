"""The run step's Node watch against a real kube-apiserver: events reach the health verdicts, a watch the
server ends is resumed from its last resourceVersion, an expired one (410 Gone) lists again, a node that left
the selector or was deleted is read on its own, and closing stops the thread at once.

The watch runs in a thread, so a test waits (bounded, in real time) for what an event must bring; the API
server on this machine delivers one in milliseconds. One answer is staged: this API server's watch cache
serves even resourceVersion "1" without a 410 while it holds few events, so the expiry test has the client
answer the first watch with the 410 the server sends (as an error, or as an ERROR event in the stream).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nvcre_argo.kube.client import Backoff, KubeClient
from nvcre_argo.kube.connect import connect
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import NODES, Resource
from nvcre_argo.kube.watch_stream import WatchStream
from nvcre_argo.steps.health import compile_health_check
from nvcre_argo.steps.node_watch import GroupHealth, NodeWatch, Selection
from tests.harness.controlplane import Cluster
from tests.integration.steps_support import SELECTOR_LABEL, NodeSet

WAIT_SECONDS = 15.0


def _no_wait(_seconds: float) -> None:
    """Backoff sleep: nothing here is worth waiting for."""


EXPIRED = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410, "message": "too old"}


class ExpiredStream(WatchStream):
    """A watch whose first event is the ERROR a 410 Gone arrives as when the watch was already open."""

    def __init__(self) -> None:
        pass

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        yield "ERROR", dict(EXPIRED)

    def close(self) -> None:
        pass


class RecordingKube(KubeClient):
    """The product's client on the same connection, recording each request (`open_watch` as WATCH)."""

    def __init__(self, kube: KubeClient, *, expire: str | None = None) -> None:
        super().__init__(kube._api, backoff=Backoff(sleep=_no_wait), namespace=kube.namespace)
        self.sent: list[tuple[str, str, dict[str, Any]]] = []
        self.expire = expire  # "answer" or "event": how the first watch is told its version expired

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.sent.append((method, path, dict(kwargs.get("query") or {})))
        return super().request(method, path, **kwargs)

    def open_watch(self, resource: Resource, namespace: str | None, **kwargs: Any) -> WatchStream:
        self.sent.append(("WATCH", resource.path(namespace), dict(kwargs)))
        expire, self.expire = self.expire, None
        if expire == "answer":
            raise ApiError(410, "Expired", "too old resource version")
        if expire == "event":
            return ExpiredStream()
        return super().open_watch(resource, namespace, **kwargs)

    def of(self, method: str) -> list[tuple[str, str, dict[str, Any]]]:
        return [item for item in self.sent if item[0] == method]


@pytest.fixture(scope="module")
def kube(control_plane: Cluster) -> KubeClient:
    return connect(str(control_plane.kubeconfig)).with_backoff(Backoff(sleep=_no_wait))


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_SECONDS:.0f}s: {what}")
        time.sleep(0.02)


def watch_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "node-watch"]


def group_watch(kube: KubeClient, nodes: NodeSet, shorts: list[str], **options: Any) -> NodeWatch:
    selection = Selection(label_selector=f"{SELECTOR_LABEL}={nodes.namespace}")
    return NodeWatch(kube, GroupHealth(nodes.names(shorts), compile_health_check()), selection, **options)


def test_a_cordon_reaches_the_verdicts_as_an_event_and_a_poll_sends_no_request(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(3)
    nodes.add("other", selector=f"elsewhere-{nodes.prefix}")
    recording = RecordingKube(kube)

    with group_watch(recording, nodes, ["n0", "n1"]) as watch:
        listed = list(recording.sent)
        assert watch.sick() == []
        nodes.cordon("n2")  # under the selector, not in the group
        nodes.cordon("n1")
        wait_for(lambda: watch.sick() == [nodes.name("n1")], "n1 reported sick")
        polls = recording.sent[len(listed) :]

    assert [(method, path) for method, path, _ in listed] == [("GET", "/api/v1/nodes"), ("WATCH", "/api/v1/nodes")]
    assert listed[0][2]["labelSelector"] == f"{SELECTOR_LABEL}={nodes.namespace}"
    assert listed[1][2]["resource_version"], "the watch starts from the list's resourceVersion"
    assert polls == [], "polls read the verdicts; no request"
    assert watch.health.evaluations == 3, "the two listed group nodes, then n1 once more; n2 is not evaluated"
    assert watch_threads() == []


def test_a_watch_the_server_ends_resumes_from_its_last_resource_version(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    recording = RecordingKube(kube)

    with group_watch(recording, nodes, ["n0", "n1"], timeout_seconds=1) as watch:
        wait_for(lambda: len(recording.of("WATCH")) >= 3, "the server ended the 1 s watch twice")
        nodes.cordon("n0")
        wait_for(lambda: watch.sick() == [nodes.name("n0")], "n0 reported sick after the watch was resumed")

    versions = [query["resource_version"] for _, _, query in recording.of("WATCH")]
    assert all(versions), versions
    assert len(recording.of("GET")) == 1, "resumed, never listed again"


@pytest.mark.parametrize("expire", ["answer", "event"])
def test_an_expired_resource_version_lists_again_and_goes_on_watching(
    kube: KubeClient, nodes: NodeSet, expire: str
) -> None:
    """410 Gone: the API server no longer has the events since that version; only a new list is exact."""
    nodes.add_many(2)
    recording = RecordingKube(kube, expire=expire)

    with group_watch(recording, nodes, ["n0", "n1"]) as watch:
        wait_for(lambda: len(recording.of("GET")) == 2, "a second list after 410 Gone")
        wait_for(lambda: len(recording.of("WATCH")) == 2, "a new watch from the new list")
        nodes.cordon("n1")
        wait_for(lambda: watch.sick() == [nodes.name("n1")], "n1 reported sick")

    first, second = (query["resource_version"] for _, _, query in recording.of("WATCH")[:2])
    assert first, "the first watch starts from the first list's resourceVersion"
    assert second, "the next one from the new list's"


def test_a_node_that_leaves_the_selector_is_read_on_its_own_and_still_checked(kube: KubeClient, nodes: NodeSet) -> None:
    """GPU Feature Discovery drops a lost GPU's labels: the watch sees the node go (DELETED); it stays checked."""
    nodes.add_many(2)
    recording = RecordingKube(kube)

    with group_watch(recording, nodes, ["n0", "n1"]) as watch:
        kube.merge_patch(NODES, nodes.name("n1"), {"metadata": {"labels": {SELECTOR_LABEL: "relabelled"}}})
        wait_for(lambda: watch.health.strays() == [nodes.name("n1")], "n1 left the watch")
        nodes.cordon("n1")
        before = len(recording.sent)
        sick = watch.sick()

    assert sick == [nodes.name("n1")]
    assert [(method, path) for method, path, _ in recording.sent[before:]] == [
        ("GET", f"/api/v1/nodes/{nodes.name('n1')}")
    ]


def test_a_deleted_node_is_read_on_its_own_has_no_verdict_and_the_others_stay_checked(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(3)
    recording = RecordingKube(kube)

    with group_watch(recording, nodes, ["n0", "n1", "n2"]) as watch:
        nodes.cordon("n2")
        wait_for(lambda: watch.sick() == [nodes.name("n2")], "n2 reported sick")
        kube.delete(NODES, nodes.name("n2"))
        wait_for(lambda: watch.health.strays() == [nodes.name("n2")], "n2's deletion seen")
        assert watch.sick() == [], "a deleted Node is no evidence of a hardware failure, and its old verdict goes"
        nodes.cordon("n0")
        wait_for(lambda: watch.sick() == [nodes.name("n0")], "n0 reported sick")

    assert recording.of("GET")[-1][1] == f"/api/v1/nodes/{nodes.name('n2')}", "the deleted node is still looked for"


def test_a_one_node_watch_follows_that_node_alone(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add_many(2)
    recording = RecordingKube(kube)
    selection = Selection(field_selector=f"metadata.name={nodes.name('n0')}")

    with NodeWatch(recording, GroupHealth([nodes.name("n0")], compile_health_check()), selection) as watch:
        nodes.cordon("n1")
        nodes.cordon("n0")
        wait_for(lambda: watch.sick() == [nodes.name("n0")], "n0 reported sick")
        evaluations = watch.health.evaluations

    assert recording.of("GET")[0][2]["fieldSelector"] == f"metadata.name={nodes.name('n0')}"
    assert recording.of("WATCH")[0][2]["field_selector"] == f"metadata.name={nodes.name('n0')}"
    assert evaluations == 2, "n0 listed, then cordoned; n1's events never reach this watch"


def test_closing_stops_the_watch_thread_at_once_even_when_the_step_is_interrupted(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(1)
    began = time.monotonic()

    running: list[int] = []

    def interrupted_poll() -> None:
        with group_watch(kube, nodes, ["n0"], timeout_seconds=300):
            running.append(len(watch_threads()))
            raise KeyboardInterrupt  # what a signal handler raising in the step's main thread does

    with pytest.raises(KeyboardInterrupt):
        interrupted_poll()

    assert running == [1]
    assert watch_threads() == []
    assert time.monotonic() - began < 5, "closing does not wait for the 300 s watch to end"


def test_without_a_selection_every_node_is_read_with_a_get_per_poll_and_no_thread_runs(
    kube: KubeClient, nodes: NodeSet
) -> None:
    nodes.add_many(2)
    recording = RecordingKube(kube)

    with NodeWatch(recording, GroupHealth(nodes.names(["n0", "n1"]), compile_health_check()), None) as watch:
        assert watch_threads() == []
        assert watch.sick() == []
        nodes.cordon("n1")
        assert watch.sick() == [nodes.name("n1")]

    assert [path for _, path, _ in recording.sent] == [
        f"/api/v1/nodes/{name}" for name in nodes.names(["n0", "n1"])
    ] * 2
    assert watch.health.evaluations == 3, "n0 unchanged on the second poll: not evaluated again"
