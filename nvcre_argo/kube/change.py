"""Wait, bounded, for one object to change: a poll loop's pause that ends as soon as there is news.

Why: a step that polls an object every N seconds learns of its end N/2 seconds late on average, and a wave of
groups pays that delay once per wave. Watching the one object (a field selector on its name, from the
resourceVersion the caller last read) for at most the poll interval ends the pause on the first change, and
costs the same one request per pause as a sleep followed by a poll. Anything unexpected (the watch refused, a
dropped connection) falls back to sleeping out the interval, so the poll loop never spins. A BOOKMARK is not
news: the API server sends one to a watcher shortly before the watch's timeout, carrying only a version.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import Resource

log = logging.getLogger(__name__)


def wait_for_change(
    kube: KubeClient,
    resource: Resource,
    seen: Mapping[str, Any],
    timeout_seconds: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Return once the object `seen` (as last read) has changed or is gone, or after `timeout_seconds`: True
    when a change ended the wait early."""
    metadata = seen.get("metadata") or {}
    started = clock()
    if not metadata.get("resourceVersion"):
        # A watch without a version starts with the object as it is now: every pause would end at once.
        sleep(timeout_seconds)
        return False
    try:
        stream = kube.open_watch(
            resource,
            metadata.get("namespace"),
            resource_version=str(metadata["resourceVersion"]),
            field_selector=f"metadata.name={metadata.get('name')}",
            timeout_seconds=max(1, math.ceil(timeout_seconds)),
        )
    except ApiError as error:
        log.info("cannot watch %s %s (%s); polling instead", resource.kind, metadata.get("name"), error)
        sleep(timeout_seconds)
        return False
    try:
        for kind, _object in stream:
            if kind != "BOOKMARK":
                return True
    except ApiError as error:
        log.info("the watch of %s %s ended: %s", resource.kind, metadata.get("name"), error)
    finally:
        stream.close()
    # No news: a watch the server ended early must not make the poll loop spin.
    sleep(max(0.0, timeout_seconds - (clock() - started)))
    return False
