"""A local copy of a set of objects, kept current by one list + watch, that many threads read at once.

Why: the shared runner drives hundreds of groups from one pod, each following its own TrainJob, pods and
Nodes. Asked of the API server, that is a GET, a LIST and a watch per group every few seconds: at 1,024
groups about 190 requests a second, more than anything else on the client side. One mirror per kind of
object answers all of those reads from memory, and its one watch replaces the per-group ones.

Only the objects `keep` accepts are held (the category's own Nodes, not every Node of the cluster), each
without its `managedFields`. What a reader gets, and what it must not assume:

- `get(name)` is the object as the watch last saw it, or None when the mirror has not seen it (yet: an
  object just created may reach the watch a moment after its creator; the caller decides whether to ask the
  API server then);
- `indexed(value)` are the objects whose `index_label` has that value; `departed(value)` are the last states of
  those deleted since the mirror opened (a pod's final container states outlive the pod, which its deleter
  may remove before any reader looked);
- `wait_for_change(name, version, timeout)` returns as soon as the watch brings news of that object, instead
  of opening a watch of its own;
- `subscribe(names, ...)` hands the objects of those names to callbacks: all of them now and after every
  relist, then each event, so a group's Node health follows the shared watch as it would its own.

The mirror may lag the API server by the watch's delay, and two mirrors lag independently: a TrainJob read
Failed from one may come before its failed pod reaches the other. A caller whose verdict depends on seeing
both at the same moment reads them from the API server for that verdict (`steps.following` does).

The list + watch itself (paging, resuming, relisting after 410 Gone, retrying, stopping) is
`kube.follow.Follower`'s; its callbacks run in its thread and update the store under the one lock. Subscriber
callbacks run in that thread too, under the lock that orders deliveries, so a subscriber never sees an event
before the snapshot it follows; they must be quick and must not call back into the mirror.
"""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from nvcre_argo.kube.client import DEFAULT_PAGE_SIZE, KubeClient
from nvcre_argo.kube.follow import WATCH_TIMEOUT_SECONDS, Callbacks, Follower, Selection
from nvcre_argo.kube.resources import Resource

Obj = dict[str, Any]


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _trimmed(obj: Mapping[str, Any]) -> Obj:
    """The object as held: without `metadata.managedFields`, which no reader needs and which can be the
    largest part of a small object."""
    metadata = {key: value for key, value in (obj.get("metadata") or {}).items() if key != "managedFields"}
    return {**obj, "metadata": metadata}


@dataclass(frozen=True)
class Subscriber:
    """What a subscriber is told of the objects it named: `on_list` gets all of those the mirror holds (at
    subscription and after each relist; names absent are not covered), `on_event` each ADDED, MODIFIED or
    DELETED event of one of them (a DELETED object is its last state)."""

    names: frozenset[str]
    on_list: Callable[[list[Obj]], None]
    on_event: Callable[[str, Obj], None]


class Mirror:
    """`with Mirror(kube, resource, namespace, selection, what="TrainJob") as mirror:` holds every object of
    the selection until closed; entering lists them (so the first read already sees them all)."""

    def __init__(
        self,
        kube: KubeClient,
        resource: Resource,
        namespace: str | None,
        selection: Selection,
        *,
        what: str,
        index_label: str | None = None,
        keep: Callable[[Mapping[str, Any]], bool] = lambda _obj: True,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.index_label = index_label
        self._keep = keep
        self._objects: dict[str, Obj] = {}
        self._index: dict[str, set[str]] = defaultdict(set)
        self._departed: dict[str, dict[str, Obj]] = defaultdict(dict)  # index value -> name -> last state
        self._waiters: dict[str, list[threading.Event]] = defaultdict(list)  # name -> events to set on its news
        self._subscribers: dict[str, list[Subscriber]] = defaultdict(list)
        self._lock = threading.Lock()  # the store, the index, the waiters, the subscriber table
        self._delivery = threading.Lock()  # orders what subscribers are told: a snapshot, then events
        self._follower = Follower(
            kube,
            resource,
            namespace,
            selection,
            Callbacks(keep=keep, on_list=self._on_list, on_event=self._on_event),
            what=what,
            page_size=page_size,
            timeout_seconds=timeout_seconds,
        )

    def __enter__(self) -> Mirror:
        self._follower.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the watch; readers still waiting for a change are released (their wait simply ends)."""
        self._follower.close()
        with self._lock:
            waiting = [event for events in self._waiters.values() for event in events]
        for event in waiting:
            event.set()

    # -- reads ------------------------------------------------------------------------------------------------

    def get(self, name: str) -> Obj | None:
        with self._lock:
            return self._objects.get(name)

    def indexed(self, value: str) -> list[Obj]:
        """The objects whose `index_label` is `value`, by name."""
        with self._lock:
            return [self._objects[name] for name in sorted(self._index.get(value, ()))]

    def departed(self, value: str) -> list[Obj]:
        """The last states of the objects with `index_label` `value` that were deleted while the mirror was
        open, by name: the deletion's event, or the state before a relist that no longer held them. They are
        kept until the mirror closes (the shared runner's mirrors live for one category's groups)."""
        with self._lock:
            held = self._departed.get(value, {})
            return [held[name] for name in sorted(held)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def wait_for_change(self, name: str, version: str, timeout_seconds: float) -> bool:
        """Return once the watch brings news of `name` (another version, or its deletion), or after
        `timeout_seconds`: True when news ended the wait. A version the mirror already holds that differs from
        `version` is news at once; an object the mirror has not seen yet is waited for (its creation's event is
        on its way), so a reader that found it only through the API server does not spin."""
        event = threading.Event()
        with self._notifying(event, name):
            if self.differs(name, version):
                return True
            return event.wait(timeout_seconds)

    def differs(self, name: str, version: str) -> bool:
        """Whether the mirror holds `name` at another version than `version` (not holding it is no news)."""
        with self._lock:
            held = self._objects.get(name)
            return held is not None and _version(held) != version

    @contextlib.contextmanager
    def _notifying(self, event: threading.Event, name: str) -> Iterator[None]:
        """Within the block, `event` is set on news of object `name` (and when the mirror closes)."""
        with self._lock:
            self._waiters[name].append(event)
        try:
            yield
        finally:
            with self._lock:
                waiting = self._waiters.get(name, [])
                if event in waiting:
                    waiting.remove(event)
                if not waiting:
                    self._waiters.pop(name, None)

    def subscribe(
        self, names: Iterable[str], on_list: Callable[[list[Obj]], None], on_event: Callable[[str, Obj], None]
    ) -> Subscriber:
        """Follow the objects of `names`: `on_list` is called at once with those held, then as `Subscriber`
        says, until `unsubscribe`."""
        subscriber = Subscriber(frozenset(names), on_list, on_event)
        with self._delivery:
            with self._lock:
                for name in subscriber.names:
                    self._subscribers[name].append(subscriber)
                held = [self._objects[name] for name in sorted(subscriber.names) if name in self._objects]
            subscriber.on_list(held)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._delivery, self._lock:
            for name in subscriber.names:
                listed = self._subscribers.get(name, [])
                if subscriber in listed:
                    listed.remove(subscriber)
                if not listed:
                    self._subscribers.pop(name, None)

    # -- the watch thread -------------------------------------------------------------------------------------

    def _label(self, obj: Obj) -> str | None:
        if self.index_label is None:
            return None
        value = ((obj.get("metadata") or {}).get("labels") or {}).get(self.index_label)
        return None if value is None else str(value)

    def _on_list(self, objects: list[Mapping[str, Any]]) -> None:
        with self._delivery:
            with self._lock:
                before = self._objects
                self._objects = {_name(obj): _trimmed(obj) for obj in objects}
                for name, obj in before.items():
                    label = self._label(obj)
                    if name not in self._objects and label is not None:
                        self._departed[label][name] = obj
                self._index = defaultdict(set)
                for name, obj in self._objects.items():
                    label = self._label(obj)
                    if label is not None:
                        self._index[label].add(name)
                changed = [
                    name
                    for name in self._waiters
                    if (name in before) != (name in self._objects)
                    or (name in self._objects and _version(before[name]) != _version(self._objects[name]))
                ]
                woken = [event for name in changed for event in self._waiters[name]]
                subscribers = {id(item): item for listed in self._subscribers.values() for item in listed}
                snapshots = [
                    (item, [self._objects[name] for name in sorted(item.names) if name in self._objects])
                    for item in subscribers.values()
                ]
            for event in woken:
                event.set()
            for subscriber, held in snapshots:
                subscriber.on_list(held)

    def _on_event(self, kind: str, seen: Mapping[str, Any]) -> None:
        name, obj = _name(seen), _trimmed(seen)
        if kind != "DELETED" and not self._keep(seen):
            with self._lock:
                held = name in self._objects
            if not held:
                return
            kind = "DELETED"  # it no longer qualifies: gone, as far as the mirror's readers are concerned
        with self._delivery:
            with self._lock:
                previous = self._objects.get(name)
                old_label = None if previous is None else self._label(previous)
                if old_label is not None:
                    self._index[old_label].discard(name)
                    if not self._index[old_label]:
                        del self._index[old_label]
                label = self._label(obj)
                if kind == "DELETED":
                    self._objects.pop(name, None)
                    if label is not None:
                        self._departed[label][name] = obj
                elif label is not None:
                    self._objects[name] = obj
                    self._index[label].add(name)
                else:
                    self._objects[name] = obj
                woken = list(self._waiters.get(name, ()))
                subscribers = list(self._subscribers.get(name, ()))
            for event in woken:
                event.set()
            for subscriber in subscribers:
                subscriber.on_event(kind, obj)
