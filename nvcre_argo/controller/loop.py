"""List, then watch: Certifications and the Workflows labelled with them, into one work queue.

Each resource is listed, then watched from the list's resourceVersion; a 410 Gone (as an API error or as an
ERROR event) or a dropped connection starts over with a fresh list, so no change is ever missed. Workflows are
kept in a local cache (by UID); every event enqueues the Certification it belongs to, and a periodic resync
enqueues them all as a safety net. One worker drains the queue, so a Certification is never reconciled twice
at once, and a burst of events for it collapses into one reconcile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo.controller.observability import Metrics
from nvcre_argo.controller.reconciler import Reconciler
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CERTIFICATIONS, WORKFLOWS, Resource
from nvcre_argo.names import LABEL_CERTIFICATION

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, Certification name)


@dataclass(frozen=True)
class LoopSettings:
    namespace: str | None  # None: all namespaces
    watch_timeout_seconds: int = 300
    resync_seconds: float = 60.0
    error_backoff_seconds: float = 2.0


class WorkQueue:
    """A set-backed FIFO: a key queued twice before it is processed is processed once."""

    def __init__(self) -> None:
        self._order: list[Key] = []
        self._pending: set[Key] = set()
        self._ready = threading.Condition()

    def add(self, key: Key) -> None:
        with self._ready:
            if key not in self._pending:
                self._pending.add(key)
                self._order.append(key)
                self._ready.notify()

    def get(self, timeout: float) -> Key | None:
        with self._ready:
            if not self._order and not self._ready.wait(timeout):
                return None
            if not self._order:
                return None
            key = self._order.pop(0)
            self._pending.discard(key)
            return key

    def __len__(self) -> int:
        with self._ready:
            return len(self._order)


@dataclass
class WorkflowCache:
    by_uid: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def for_certification(self, key: Key) -> list[dict[str, Any]]:
        with self.lock:
            return [item for item in self.by_uid.values() if certification_key(item) == key]

    def replace_all(self, items: list[dict[str, Any]]) -> set[Key]:
        with self.lock:
            touched = {certification_key(item) for item in self.by_uid.values()}
            self.by_uid = {item["metadata"]["uid"]: item for item in items}
            return touched | {certification_key(item) for item in items}

    def apply(self, event_type: str, item: dict[str, Any]) -> Key:
        with self.lock:
            if event_type == "DELETED":
                self.by_uid.pop(item["metadata"]["uid"], None)
            else:
                self.by_uid[item["metadata"]["uid"]] = item
        return certification_key(item)


def certification_key(workflow: dict[str, Any]) -> Key:
    metadata = workflow.get("metadata", {})
    return (metadata.get("namespace", ""), (metadata.get("labels") or {}).get(LABEL_CERTIFICATION, ""))


class Watcher:
    def __init__(
        self,
        kube: KubeClient,
        reconciler: Reconciler,
        *,
        settings: LoopSettings,
        metrics: Metrics,
        stop: threading.Event,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._reconciler = reconciler
        self._settings = settings
        self._metrics = metrics
        self._stop = stop
        self._clock = clock
        self.queue = WorkQueue()
        self.workflows = WorkflowCache()
        self.certifications: set[Key] = set()
        self._certifications_lock = threading.Lock()
        self.synced = threading.Event()
        self._synced_parts: set[str] = set()

    # -- watches ---------------------------------------------------------------------------------------------

    def _watch_forever(
        self,
        resource: Resource,
        selector: str | None,
        on_list: Callable[[list[dict[str, Any]]], None],
        on_event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    items, version = self._kube.list(resource, self._settings.namespace, label_selector=selector)
                    self._metrics.relisted(resource.plural)
                    on_list(items)
                    self._mark_synced(resource.plural)
                for event_type, item in self._kube.watch(
                    resource,
                    self._settings.namespace,
                    resource_version=version,
                    label_selector=selector,
                    timeout_seconds=self._settings.watch_timeout_seconds,
                ):
                    if self._stop.is_set():
                        return
                    if event_type == "ERROR":
                        code = item.get("code")
                        log.info(
                            "watch of %s ended with %s (%s); relisting", resource.plural, code, item.get("message")
                        )
                        version = None
                        break
                    version = item.get("metadata", {}).get("resourceVersion", version)
                    if event_type == "BOOKMARK":
                        continue
                    self._metrics.event_seen(resource.plural)
                    on_event(event_type, item)
            except ApiError as error:
                if error.gone:
                    log.info("resourceVersion of %s expired (410 Gone); relisting", resource.plural)
                    version = None
                    continue
                log.warning("watching %s: %s; retrying", resource.plural, error)
                version = None
                self._stop.wait(self._settings.error_backoff_seconds)
            except Exception as error:  # a dropped stream: start over from a list
                log.warning("watch of %s broke (%s); relisting", resource.plural, error)
                version = None
                self._stop.wait(self._settings.error_backoff_seconds)

    def _mark_synced(self, part: str) -> None:
        self._synced_parts.add(part)
        if {CERTIFICATIONS.plural, WORKFLOWS.plural} <= self._synced_parts:
            self.synced.set()

    def _on_certification_list(self, items: list[dict[str, Any]]) -> None:
        keys = {(item["metadata"]["namespace"], item["metadata"]["name"]) for item in items}
        with self._certifications_lock:
            gone = self.certifications - keys
            self.certifications = keys
        for key in sorted(keys | gone):
            self.queue.add(key)

    def _on_certification_event(self, event_type: str, item: dict[str, Any]) -> None:
        key = (item["metadata"]["namespace"], item["metadata"]["name"])
        if event_type == "MODIFIED" and self._reconciler.wrote(item):
            return  # our own status write coming back: reconciling it again would only re-read and compare
        with self._certifications_lock:
            if event_type == "DELETED":
                self.certifications.discard(key)
            else:
                self.certifications.add(key)
        self.queue.add(key)

    def _on_workflow_list(self, items: list[dict[str, Any]]) -> None:
        for key in sorted(self.workflows.replace_all(items)):
            self.queue.add(key)

    def _on_workflow_event(self, event_type: str, item: dict[str, Any]) -> None:
        self.queue.add(self.workflows.apply(event_type, item))

    # -- the worker --------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Watch and reconcile until `stop` is set."""
        threads = [
            threading.Thread(
                target=self._watch_forever,
                args=(CERTIFICATIONS, None, self._on_certification_list, self._on_certification_event),
                name="watch-certifications",
                daemon=True,
            ),
            threading.Thread(
                target=self._watch_forever,
                args=(WORKFLOWS, LABEL_CERTIFICATION, self._on_workflow_list, self._on_workflow_event),
                name="watch-workflows",
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        # Not before both first lists are in: with Certifications listed but Workflows not yet, a reconcile would
        # judge a running Certification's Workflows deleted and write (and announce) a false failure.
        while not self._stop.is_set() and not self.synced.wait(0.5):
            pass
        next_resync = self._clock() + self._settings.resync_seconds
        while not self._stop.is_set():
            if self._clock() >= next_resync:
                with self._certifications_lock:
                    known = sorted(self.certifications)
                for key in known:
                    self.queue.add(key)
                next_resync = self._clock() + self._settings.resync_seconds
            queued = self.queue.get(timeout=0.5)
            if queued is not None and queued[1]:
                self.process(queued)

    def process(self, key: Key) -> None:
        namespace, name = key
        try:
            self._reconciler.reconcile(namespace, name, self.workflows.for_certification(key))
        except ApiError as error:
            log.warning("reconciling %s/%s: %s; will retry", namespace, name, error)
            self._requeue_later(key)
        except Exception:  # one bad object must not stop the watcher for every other Certification
            log.exception("reconciling %s/%s failed unexpectedly; will retry", namespace, name)
            self._requeue_later(key)

    def _requeue_later(self, key: Key) -> None:
        timer = threading.Timer(self._settings.error_backoff_seconds, self.queue.add, args=(key,))
        timer.daemon = True
        timer.start()
