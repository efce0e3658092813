"""Follow a set of objects for a while: list them once, then watch from that list's resourceVersion in a
daemon thread, handing every object seen to the caller's callbacks.

Why one follower for Nodes and Pods: a run step needs both, for the life of one TrainJob iteration. Its
Nodes, so a health check costs no request per poll; its TrainJob's pods, because a crashed rank's pod can be
terminated and deleted by JobSet between two polls, and only a watch sees every state a pod passed through.
The hard parts are the same for both and live here once:

- the list is read a page at a time and only what `keep` accepts is held (a Node list can be large);
- a watch that ends (the server's timeout) resumes from the last resourceVersion seen; one whose version
  expired (410 Gone) lists again; any other error waits and retries, doubling up to a cap, so a brief API
  outage never costs the caller its view;
- `close()` (the `with` block's end, also when the step is interrupted) shuts the open watch's socket down, so
  a read blocked for the next event returns at once, and joins the thread: nothing outlives the iteration.

Entering lists in the calling thread (so the first poll already sees every object), then starts the thread
and waits, bounded, until the watch is open. Callbacks run in the watch thread after that; they must be
thread-safe (hold their own lock) and quick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from nvcre_argo.kube.client import DEFAULT_PAGE_SIZE, KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import Resource
from nvcre_argo.kube.watch_stream import WatchStream

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300
# After an unexpected watch error (not 410): wait this long before watching again, doubling up to the cap.
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
# How long opening the watch may take before the caller goes on without it (its events then arrive later).
OPEN_TIMEOUT_SECONDS = 30.0
JOIN_TIMEOUT_SECONDS = 10.0

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Selection:
    """Which objects one list + watch covers: a label selector, or a field selector (e.g. one name)."""

    label_selector: str | None = None
    field_selector: str | None = None


@dataclass(frozen=True)
class Callbacks:
    """What the follower tells its owner. `on_list` gets every kept object of a (re)list at once (objects not
    in it are no longer covered); `on_event` gets each watch event, `kind` being ADDED, MODIFIED or DELETED
    (a DELETED object is its last state)."""

    keep: Callable[[Obj], bool]
    on_list: Callable[[list[Obj]], None]
    on_event: Callable[[str, Obj], None]


class Follower:
    """`with Follower(kube, resource, namespace, selection, callbacks, what="Nodes"):` follows until closed."""

    def __init__(
        self,
        kube: KubeClient,
        resource: Resource,
        namespace: str | None,
        selection: Selection,
        callbacks: Callbacks,
        *,
        what: str,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.selection = selection
        self.callbacks = callbacks
        self.what = what
        self.page_size = page_size
        self.timeout_seconds = timeout_seconds
        self._version = ""
        self._stopping = threading.Event()
        self._opened = threading.Event()
        self._lock = threading.Lock()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Follower:
        self._relist()
        self._thread = threading.Thread(target=self._follow, name=f"{self.what.lower()}-watch", daemon=True)
        self._thread.start()
        if not self._opened.wait(OPEN_TIMEOUT_SECONDS):
            log.warning(
                "the %s watch did not open within %.0fs; going on, events will follow", self.what, OPEN_TIMEOUT_SECONDS
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
                log.warning("the %s watch thread did not stop within %.0fs", self.what, JOIN_TIMEOUT_SECONDS)

    # -- the watch thread -------------------------------------------------------------------------------------

    def _relist(self) -> None:
        """List the selection (a page at a time, keeping what `keep` accepts) and remember its version."""
        version = ""
        kept: list[Obj] = []
        for page in self.kube.pages(
            self.resource,
            self.namespace,
            label_selector=self.selection.label_selector,
            field_selector=self.selection.field_selector,
            limit=self.page_size,
        ):
            kept += [item for item in page.get("items", []) if self.callbacks.keep(item)]
            version = str(page.get("metadata", {}).get("resourceVersion", "") or version)
            if self._stopping.is_set():
                return
        self.callbacks.on_list(kept)
        self._version = version

    def _follow(self) -> None:
        """Watch until closed: resume after the server's timeout, list again after 410 Gone, wait and retry
        after anything else."""
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
                log.warning("watching %s: %s (again in %.0fs)", self.what, error, delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
            except Exception:
                log.exception("watching %s failed (again in %.0fs)", self.what, delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
            finally:
                self._opened.set()  # never leave the caller waiting for a watch that failed to open

    def _relist_quietly(self) -> None:
        try:
            self._relist()
        except ApiError as error:
            log.warning("listing %s again after 410 Gone: %s", self.what, error)
            self._stopping.wait(RETRY_SECONDS)

    def _watch_once(self) -> bool:
        """Follow one watch request to its end; True when its version expired (410 as an ERROR event)."""
        stream = self.kube.open_watch(
            self.resource,
            self.namespace,
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
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.callbacks.on_event(kind, obj)
        return False
