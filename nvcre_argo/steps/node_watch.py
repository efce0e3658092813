"""The run step's view of its group's Node health, kept current for the life of one iteration.

Why a watch: reading the group's Nodes on every poll cost, for a 4,096-node group of a 10,000-node target,
two LIST pages of ~185 MiB of Node JSON every 10 s and a third of the poll's requests. Here the Nodes are
listed once (through the target's label selector, in small pages so the step's memory stays low) and then
watched from that list's resourceVersion: a poll costs no request, and a node's verdict is recomputed only
when an event says it changed. A watch that ends (the server's timeout) resumes from the last
resourceVersion seen (bookmarks keep it fresh); one whose version expired (410 Gone) lists again.

How the group's nodes are read (`Selection`, chosen by the run step):
- a label selector (a large share of the target): one list + watch of the target, keeping the group's nodes;
- a field selector `metadata.name=<node>` (a one-node group): one list + watch of that node alone;
- none (a few nodes of a large target): one GET per node per poll, as a watch of the whole target would list
  far more Nodes than the group has, once per concurrent group.
Under the shared runner none of these is used: every group subscribes to its nodes in the runner's one
mirror of the category's Nodes (`steps.category_mirror`).

A group node the watch does not cover is a "stray" and is read with its own GET on every poll: with a label
selector a node whose labels changed so it left the selector arrives as DELETED and must still be checked;
a deleted node's GET finds nothing, so it has no verdict (absence of evidence is not a hardware failure) and
any verdict from before is dropped. Without a selection every node is a stray.

Threads: the list + watch (`kube.follow.Follower`, which also resumes, relists after 410 Gone and retries)
writes verdicts into `GroupHealth` from its daemon thread; `GroupHealth`'s one lock guards all of its state,
and the poll only reads it (and writes the strays' verdicts). `close()` stops and joins the thread, so none
outlives the iteration.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from nvcre_argo.kube.client import DEFAULT_PAGE_SIZE, KubeClient
from nvcre_argo.kube.follow import WATCH_TIMEOUT_SECONDS, Callbacks, Follower, Selection
from nvcre_argo.kube.mirror import Mirror, Subscriber
from nvcre_argo.kube.resources import NODES
from nvcre_argo.steps.health import HealthCheck, node_name

__all__ = ["GroupHealth", "NodeWatch", "Selection", "one_node_selection"]


class GroupHealth:
    """The health verdicts of one group's nodes. Thread-safe: every read and write holds the one lock, and no
    expression is evaluated while holding it."""

    def __init__(self, names: Iterable[str], check: HealthCheck) -> None:
        self.names = frozenset(names)
        self.check = check
        self._lock = threading.Lock()
        self._versions: dict[str, str] = {}  # resourceVersion each verdict was computed from
        self._sick: set[str] = set()
        self._strays: set[str] = set(self.names)
        self.evaluations = 0  # how many times the expression ran (to show it runs only on change)

    def replace(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """A (re)list: the group's nodes among `nodes` are covered; the group's others become strays."""
        seen: set[str] = set()
        for node in nodes:
            name = node_name(node)
            if name in self.names:
                seen.add(name)
                self.observe(node, stray=False)
        with self._lock:
            self._strays = set(self.names - seen)

    def observe(self, node: Mapping[str, Any], *, stray: bool = False) -> None:
        """A group node as the watch (or, for a stray, its GET) saw it: its verdict, recomputed only when the
        node changed. A stray's GET result is dropped when the watch took the node back meanwhile."""
        name = node_name(node)
        if name not in self.names:
            return
        version = str((node.get("metadata") or {}).get("resourceVersion", ""))
        with self._lock:
            unchanged = bool(version) and self._versions.get(name) == version
            was_sick = name in self._sick
        fired = was_sick if unchanged else self.check.fires(node)
        with self._lock:
            if stray and name not in self._strays:
                return
            if not stray:
                self._strays.discard(name)
            if not unchanged:
                self.evaluations += 1
            self._versions[name] = version
            (self._sick.add if fired else self._sick.discard)(name)

    def lose(self, name: str) -> None:
        """The watch no longer covers this node (it left the selector, or was deleted): a stray, no verdict."""
        if name not in self.names:
            return
        with self._lock:
            self._strays.add(name)
            self._versions.pop(name, None)
            self._sick.discard(name)

    def forget(self, name: str) -> None:
        """A stray's GET found no such Node: it has no verdict until it reappears."""
        with self._lock:
            if name in self._strays:
                self._versions.pop(name, None)
                self._sick.discard(name)

    def sick(self) -> list[str]:
        with self._lock:
            return sorted(self._sick)

    def strays(self) -> list[str]:
        with self._lock:
            return sorted(self._strays)


class NodeWatch:
    """A group's Node health for one iteration: `with NodeWatch(...) as watch:` then `watch.sick()` per poll.

    With a selection, entering lists and opens the watch (`kube.follow.Follower`: in the calling thread, so
    the first poll already sees every node), then a daemon thread follows it; without one, nothing happens
    until `sick()`. With a `shared` mirror of the category's Nodes (the shared runner's), entering subscribes
    to the group's nodes there instead, and the selection is not used: one watch serves every group."""

    def __init__(
        self,
        kube: KubeClient,
        health: GroupHealth,
        selection: Selection | None,
        *,
        shared: Mirror | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self.kube = kube
        self.health = health
        self.selection = selection
        self.shared = shared
        self._subscriber: Subscriber | None = None
        callbacks = Callbacks(
            keep=lambda node: node_name(node) in health.names, on_list=health.replace, on_event=self._on_event
        )
        self._follower: Follower | None = None
        if selection is not None and shared is None:
            self._follower = Follower(
                kube,
                NODES,
                None,
                selection,
                callbacks,
                what="Node",
                page_size=page_size,
                timeout_seconds=timeout_seconds,
            )

    def __enter__(self) -> NodeWatch:
        if self.shared is not None:
            self._subscriber = self.shared.subscribe(self.health.names, self.health.replace, self._on_event)
        if self._follower is not None:
            self._follower.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop following the group's Nodes (promptly) and wait for the watch thread to end."""
        if self._subscriber is not None and self.shared is not None:
            self.shared.unsubscribe(self._subscriber)
            self._subscriber = None
        if self._follower is not None:
            self._follower.close()

    def sick(self) -> list[str]:
        """The group's nodes the health check fires on now; reads the strays (one GET each) first."""
        for name in self.health.strays():
            node = self.kube.get(NODES, name)
            if node is None:
                self.health.forget(name)
            else:
                self.health.observe(node, stray=True)
        return self.health.sick()

    def _on_event(self, kind: str, node: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            self.health.lose(node_name(node))
        else:
            self.health.observe(node)


def one_node_selection(nodes: Sequence[str]) -> Selection:
    """A watch of exactly one Node: the API server serves a `metadata.name=` field selector as a watch of
    that one key, so a one-node group costs one open request and no poll traffic."""
    (name,) = nodes
    return Selection(field_selector=f"metadata.name={name}")
