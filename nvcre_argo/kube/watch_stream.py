"""One open watch of the API server, as raw (type, object) events, that any thread can end at once."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

from nvcre_argo.kube.errors import ApiError, connection_problem

log = logging.getLogger(__name__)


class WatchStream:
    """One open watch: iterating it yields (type, object) events until the server ends the watch (its
    `timeoutSeconds`) or `close()` is called. Why `close` shuts the socket down rather than only setting a
    flag: the reading thread is blocked waiting for the next event, possibly for minutes, and only a shut
    down socket wakes it, so a stopping step never waits for a watch to time out."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._closed = False

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        try:
            for line in iter_resp_lines(self._response):
                if line:
                    event = json.loads(line)
                    yield event["type"], event["object"]
        except Exception as error:
            if self._closed:
                return
            if isinstance(error, OSError) or type(error).__module__.startswith("urllib3"):
                raise ApiError(0, "ConnectionError", connection_problem(error)) from None
            raise
        finally:
            self._response.release_conn()

    def close(self) -> None:
        """End the watch from any thread; the iteration stops at once, without an error."""
        self._closed = True
        shutdown = getattr(self._response, "shutdown", None)  # urllib3 >= 2.3: unblocks a pending read
        try:
            if shutdown is not None:
                shutdown()
            self._response.close()
        except Exception as error:  # the connection may already be gone; closing must not raise
            log.debug("closing a watch: %s", error)
