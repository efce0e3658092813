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

A group node the watch does not cover is a "stray" and is read with its own GET on every poll: with a label
selector a node whose labels changed so it left the selector arrives as DELETED and must still be checked;
a deleted node's GET finds nothing, so it has no verdict (absence of evidence is not a hardware failure) and
any verdict from before is dropped. Without a selection every node is a stray.

Threads: one daemon thread runs the watch and writes verdicts into `GroupHealth`, whose one lock guards all
of its state; the poll only reads it (and writes the strays' verdicts). `close()` (the `with` block's end,
also when the step is interrupted) stops the thread: it shuts the open watch's socket down so a read blocked
for the next event returns at once, and joins it, so no thread outlives the iteration. The process needs no
signal handling of its own: SIGTERM's default action ends it, daemon thread included.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from nvcre_argo.kube.client import DEFAULT_PAGE_SIZE, ApiError, KubeClient, WatchStream
from nvcre_argo.kube.resources import NODES
from nvcre_argo.steps.health import HealthCheck, node_name

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300
# After an unexpected watch error (not 410): wait this long before watching again, doubling up to the cap.
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
# How long opening the watch may take before the step polls without it (its events then arrive later).
OPEN_TIMEOUT_SECONDS = 30.0
JOIN_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Selection:
    """Which Nodes one list + watch covers: a label selector, or a field selector (e.g. one node's name)."""

    label_selector: str | None = None
    field_selector: str | None = None


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

    With a selection, entering lists and opens the watch (in the calling thread, so the first poll already
    sees every node), then a daemon thread follows the watch; without one, nothing happens until `sick()`."""

    def __init__(
        self,
        kube: KubeClient,
        health: GroupHealth,
        selection: Selection | None,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self.kube = kube
        self.health = health
        self.selection = selection
        self.page_size = page_size
        self.timeout_seconds = timeout_seconds
        self._version = ""
        self._stopping = threading.Event()
        self._opened = threading.Event()
        self._lock = threading.Lock()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> NodeWatch:
        if self.selection is not None:
            self._relist()
            self._thread = threading.Thread(target=self._follow, name="node-watch", daemon=True)
            self._thread.start()
            if not self._opened.wait(OPEN_TIMEOUT_SECONDS):
                log.warning(
                    "the Node watch did not open within %.0fs; polling on, events will follow", OPEN_TIMEOUT_SECONDS
                )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the watch thread (promptly: its open watch is shut down) and wait for it to end."""
        self._stopping.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT_SECONDS)
            if self._thread.is_alive():
                log.warning("the Node watch thread did not stop within %.0fs", JOIN_TIMEOUT_SECONDS)

    def sick(self) -> list[str]:
        """The group's nodes the health check fires on now; reads the strays (one GET each) first."""
        for name in self.health.strays():
            node = self.kube.get(NODES, name)
            if node is None:
                self.health.forget(name)
            else:
                self.health.observe(node, stray=True)
        return self.health.sick()

    # -- the watch thread -------------------------------------------------------------------------------------

    def _relist(self) -> None:
        """List the selection (a page at a time, keeping only the group's nodes) and remember its version."""
        assert self.selection is not None
        version = ""
        kept: list[Mapping[str, Any]] = []
        for page in self.kube.pages(
            NODES,
            label_selector=self.selection.label_selector,
            field_selector=self.selection.field_selector,
            limit=self.page_size,
        ):
            kept += [node for node in page.get("items", []) if node_name(node) in self.health.names]
            version = str(page.get("metadata", {}).get("resourceVersion", "") or version)
            if self._stopping.is_set():
                return
        self.health.replace(kept)
        self._version = version

    def _follow(self) -> None:
        """Watch until closed: resume after the server's timeout, list again after 410 Gone, wait and retry
        after anything else (a step must not lose its health monitor to a brief API outage)."""
        delay = RETRY_SECONDS
        while not self._stopping.is_set():
            try:
                if self._watch_once():
                    self._relist()
                delay = RETRY_SECONDS
            except ApiError as error:
                if self._stopping.is_set():
                    return
                if error.gone:
                    self._relist_quietly()
                    continue
                log.warning("watching Nodes: %s (again in %.0fs)", error, delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
            except Exception:
                log.exception("watching Nodes failed (again in %.0fs)", delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
            finally:
                self._opened.set()  # never leave the iteration waiting for a watch that failed to open

    def _relist_quietly(self) -> None:
        try:
            self._relist()
        except ApiError as error:
            log.warning("listing Nodes again after 410 Gone: %s", error)
            self._stopping.wait(RETRY_SECONDS)

    def _watch_once(self) -> bool:
        """Follow one watch request to its end; True when its version expired (410 as an ERROR event)."""
        assert self.selection is not None
        stream = self.kube.open_watch(
            NODES,
            None,
            resource_version=self._version,
            label_selector=self.selection.label_selector,
            field_selector=self.selection.field_selector,
            timeout_seconds=self.timeout_seconds,
        )
        with self._lock:
            self._stream = stream
        if self._stopping.is_set():
            stream.close()
        self._opened.set()
        for kind, obj in stream:
            if kind == "ERROR":
                if obj.get("code") == 410:
                    return True
                raise ApiError(int(obj.get("code") or 0), str(obj.get("reason", "")), str(obj.get("message", "")))
            self._version = str((obj.get("metadata") or {}).get("resourceVersion", "") or self._version)
            if kind == "DELETED":
                self.health.lose(node_name(obj))
            elif kind in ("ADDED", "MODIFIED"):
                self.health.observe(obj)
        return False


def one_node_selection(nodes: Sequence[str]) -> Selection:
    """A watch of exactly one Node: the API server serves a `metadata.name=` field selector as a watch of
    that one key, so a one-node group costs one open request and no poll traffic."""
    (name,) = nodes
    return Selection(field_selector=f"metadata.name={name}")
