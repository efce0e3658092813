"""The shared runner's mirror against a real kube-apiserver: one list + watch holds the objects, indexes them,
ends a reader's pause on news of its object (not of another's), hands subscribers their objects and events,
keeps only what it is asked to, and costs no request per read.

The watch runs in a thread, so a test waits (bounded, in real time) for an event to arrive; the API server on
this machine delivers one in milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.follow import Selection
from nvcre_argo.kube.mirror import Mirror
from nvcre_argo.kube.resources import CONFIGMAPS, NODES
from tests.integration.steps_support import SELECTOR_LABEL, NodeSet

WAIT_SECONDS = 10.0
GROUP_LABEL = "mirror.nvcre.test/group"


def _eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_SECONDS:.0f} s: {what}"
        time.sleep(0.02)


def _config_map(kube: KubeClient, namespace: str, name: str, group: str) -> dict[str, Any]:
    return kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {GROUP_LABEL: group}},
        }
    )


def _mirror(kube: KubeClient, namespace: str, **options: Any) -> Mirror:
    return Mirror(kube, CONFIGMAPS, namespace, Selection(label_selector=GROUP_LABEL), what="ConfigMap", **options)


def _names(objects: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in objects]


def test_the_mirror_holds_the_selection_and_follows_creations_changes_and_deletions(
    kube: KubeClient, namespace: str
) -> None:
    _config_map(kube, namespace, "a", "one")
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unlabelled", "namespace": namespace}})

    with _mirror(kube, namespace, index_label=GROUP_LABEL) as mirror:
        assert mirror.get("a") is not None, "entering lists: the first read already sees what exists"
        assert mirror.get("unlabelled") is None, "outside the selection"
        assert "managedFields" not in mirror.get("a")["metadata"]  # type: ignore[index]

        _config_map(kube, namespace, "b", "one")
        _config_map(kube, namespace, "c", "two")
        _eventually(lambda: len(mirror) == 3, "the two new ConfigMaps are held")
        assert _names(mirror.indexed("one")) == ["a", "b"]
        assert _names(mirror.indexed("two")) == ["c"]

        kube.merge_patch(CONFIGMAPS, "b", {"metadata": {"labels": {GROUP_LABEL: "two"}}}, namespace)
        _eventually(lambda: _names(mirror.indexed("two")) == ["b", "c"], "b moved to the other index entry")
        assert _names(mirror.indexed("one")) == ["a"]

        kube.delete(CONFIGMAPS, "a", namespace)
        _eventually(lambda: mirror.get("a") is None, "a deleted ConfigMap is dropped")
        assert mirror.indexed("one") == []


def test_a_pause_ends_on_news_of_its_object_only_and_otherwise_lasts_its_timeout(
    kube: KubeClient, namespace: str
) -> None:
    seen = _config_map(kube, namespace, "watched", "g")
    _config_map(kube, namespace, "neighbour", "g")
    with _mirror(kube, namespace) as mirror:
        version = seen["metadata"]["resourceVersion"]

        def change_later() -> None:
            time.sleep(0.5)
            kube.merge_patch(CONFIGMAPS, "neighbour", {"data": {"a": "1"}}, namespace)
            time.sleep(0.5)
            kube.merge_patch(CONFIGMAPS, "watched", {"data": {"a": "1"}}, namespace)

        changer = threading.Thread(target=change_later)
        began = time.monotonic()
        changer.start()
        changed = mirror.wait_for_change("watched", version, 5.0)
        took = time.monotonic() - began
        changer.join()
        assert changed
        assert 0.9 <= took < 4, f"the pause took {took:.1f} s; its object changed after 1 s"

        assert mirror.wait_for_change("watched", version, 5.0), "a newer version already held is news at once"
        current = mirror.get("watched")["metadata"]["resourceVersion"]  # type: ignore[index]
        began = time.monotonic()
        assert not mirror.wait_for_change("watched", current, 1.0)
        assert 0.9 <= time.monotonic() - began < 3, "no news: the pause lasts its timeout"


def test_a_pause_for_an_object_not_seen_yet_waits_for_its_creation_instead_of_spinning(
    kube: KubeClient, namespace: str
) -> None:
    with _mirror(kube, namespace) as mirror:
        created = threading.Timer(0.5, lambda: _config_map(kube, namespace, "late", "g"))
        began = time.monotonic()
        created.start()
        assert mirror.wait_for_change("late", "1", 5.0)
        assert 0.4 <= time.monotonic() - began < 4
        created.join()


def test_closing_the_mirror_releases_a_waiting_reader(kube: KubeClient, namespace: str) -> None:
    seen = _config_map(kube, namespace, "quiet", "g")
    mirror = _mirror(kube, namespace).__enter__()
    threading.Timer(0.3, mirror.close).start()
    began = time.monotonic()
    mirror.wait_for_change("quiet", seen["metadata"]["resourceVersion"], 30.0)
    assert time.monotonic() - began < 5, "a reader does not outlive the mirror's watch"


def test_a_subscriber_gets_its_objects_then_their_events_and_nothing_after_unsubscribing(
    kube: KubeClient, nodes: NodeSet
) -> None:
    mine, other = nodes.add("n0"), nodes.add("n1")
    lists: list[list[str]] = []
    events: list[tuple[str, str]] = []
    selection = Selection(label_selector=f"{SELECTOR_LABEL}={nodes.namespace}")
    with Mirror(kube, NODES, None, selection, what="Node") as mirror:
        subscriber = mirror.subscribe(
            [mine, nodes.name("absent")],
            lambda held: lists.append(_names(held)),
            lambda kind, node: events.append((kind, node["metadata"]["name"])),
        )
        assert lists == [[mine]], "at once, the subscribed objects the mirror holds (an absent one is not covered)"

        nodes.cordon("n1")
        nodes.cordon("n0")
        _eventually(lambda: events == [("MODIFIED", mine)], "the event of the subscribed node, not the other's")

        mirror.unsubscribe(subscriber)
        kube.merge_patch(NODES, mine, {"metadata": {"labels": {"extra": "1"}}})
        kube.merge_patch(NODES, other, {"metadata": {"labels": {"extra": "1"}}})
        _eventually(
            lambda: (mirror.get(mine) or {}).get("metadata", {}).get("labels", {}).get("extra") == "1",
            "the mirror saw the label change",
        )
        assert events == [("MODIFIED", mine)], "nothing after unsubscribing"


def test_only_the_objects_keep_accepts_are_held(kube: KubeClient, nodes: NodeSet) -> None:
    wanted = nodes.add("n0")
    nodes.add("n1")
    selection = Selection(label_selector=f"{SELECTOR_LABEL}={nodes.namespace}")
    with Mirror(kube, NODES, None, selection, what="Node", keep=lambda node: node["metadata"]["name"] == wanted) as m:
        nodes.add("n2")
        nodes.cordon("n1")
        nodes.cordon("n0")
        _eventually(lambda: (m.get(wanted) or {}).get("spec", {}).get("unschedulable") is True, "n0's change")
        assert len(m) == 1, "the others are neither listed nor taken from the watch"


class CountingKube(KubeClient):
    """The product's client on the same connection, counting what it sends (`open_watch` as WATCH)."""

    def __init__(self, kube: KubeClient) -> None:
        super().__init__(kube._api, namespace=kube.namespace)
        self.sent: list[str] = []

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(method)
        return super().request(method, path, **kwargs)

    def open_watch(self, *args: Any, **kwargs: Any) -> Any:
        self.sent.append("WATCH")
        return super().open_watch(*args, **kwargs)


def test_a_thousand_reads_and_pauses_cost_no_request_beyond_the_list_and_the_watch(
    kube: KubeClient, namespace: str
) -> None:
    for index in range(20):
        _config_map(kube, namespace, f"cm{index}", "g")
    counting = CountingKube(kube)
    with _mirror(counting, namespace, index_label=GROUP_LABEL) as mirror:
        for _ in range(50):
            for index in range(20):
                held = mirror.get(f"cm{index}")
                assert held is not None
                mirror.wait_for_change(f"cm{index}", held["metadata"]["resourceVersion"], 0.0)
            assert len(mirror.indexed("g")) == 20
        assert counting.sent == ["GET", "WATCH"], "one list, one watch"


def test_a_deleted_objects_last_state_stays_readable_under_its_index_value(kube: KubeClient, namespace: str) -> None:
    """A crashed rank's pod may be deleted (its Job failed) before any group read it: its final container state
    must still be there to say who failed first."""
    _config_map(kube, namespace, "rank-0", "js")
    _config_map(kube, namespace, "rank-1", "js")
    with _mirror(kube, namespace, index_label=GROUP_LABEL) as mirror:
        kube.merge_patch(CONFIGMAPS, "rank-1", {"data": {"exit": "137"}}, namespace)
        _eventually(lambda: (mirror.get("rank-1") or {}).get("data") == {"exit": "137"}, "the change is seen")
        kube.delete(CONFIGMAPS, "rank-1", namespace)
        _eventually(lambda: mirror.get("rank-1") is None, "the deletion is seen")

        assert _names(mirror.indexed("js")) == ["rank-0"]
        (last,) = mirror.departed("js")
        assert (last["metadata"]["name"], last.get("data")) == ("rank-1", {"exit": "137"})
        assert mirror.departed("elsewhere") == []
