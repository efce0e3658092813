"""What the API server and the kubeconfig can answer besides success, classified so callers decide by kind.

`ApiError` is the server's non-2xx answer (not found, conflict, gone, transient); `KubeConfigError` and
`UnreachableError` are the two a person fixes (exit code 1 at the command line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from nvcre_argo.errors import NvcreError

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class KubeConfigError(NvcreError):
    """No usable kubeconfig (missing, unreadable or malformed), said in one line without the client's text."""


class UnreachableError(NvcreError):
    """The API server named by the kubeconfig does not answer."""


@dataclass
class ApiError(Exception):
    """A non-2xx answer from the API server, with the server's own message (never the request body)."""

    status: int
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.status} {self.reason}: {self.message}"

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT_STATUSES or self.status == 0


def error_from(status: int, data: bytes | None) -> ApiError:
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        body = {}
    return ApiError(status, str(body.get("reason", "")), str(body.get("message", (data or b"")[:300])))


def connection_problem(error: BaseException) -> str:
    """The root cause of a connection failure (`Connection refused`), not urllib3's nested retry message."""
    problem = ""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            problem = str(current.strerror)
        elif not problem and current.args and isinstance(current.args[-1], str):
            problem = current.args[-1].rsplit(": ", 1)[-1]
        reason = getattr(current, "reason", None)
        current = reason if isinstance(reason, BaseException) else (current.__cause__ or current.__context__)
    return problem or type(error).__name__
