"""A small dict-in, dict-out client over the Kubernetes REST API.

Why not the generated typed API classes: the product handles custom resources (Workflows, TrainJobs,
Certifications) as plain JSON and wants one code path for all of them, with errors it can classify (not
found, conflict, gone, transient) and a watch that hands back raw events. Transient failures are retried with
backoff here, so no step loses a result it has already observed to a brief API outage.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from kubernetes import client as k8s_client

from nvcre_argo.kube.errors import ApiError, UnreachableError, connection_problem, error_from
from nvcre_argo.kube.resources import Resource, resource_of
from nvcre_argo.kube.watch_stream import WatchStream

log = logging.getLogger(__name__)
T = TypeVar("T")

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
DEFAULT_PAGE_SIZE = 500


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff for transient errors; `sleep` is injectable so tests need not wait."""

    attempts: int = 6
    first_delay: float = 0.5
    max_delay: float = 10.0
    sleep: Callable[[float], None] = time.sleep

    def run(self, action: Callable[[], T], what: str) -> T:
        delay = self.first_delay
        for attempt in range(1, self.attempts + 1):
            try:
                return action()
            except ApiError as error:
                if not error.transient or attempt == self.attempts:
                    raise
                log.warning("%s: %s (attempt %d/%d, retrying in %.1fs)", what, error, attempt, self.attempts, delay)
            self.sleep(delay)
            delay = min(delay * 2, self.max_delay)
        raise AssertionError("unreachable")


class KubeClient:
    """JSON over the API server, with the authentication of a kubeconfig or the in-cluster service account."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        backoff: Backoff | None = None,
        namespace: str = "default",
    ) -> None:
        self._api = api_client
        self._backoff = backoff or Backoff()
        self.namespace = namespace  # the kubeconfig context's namespace (kubectl's default for -n)

    @property
    def server(self) -> str:
        return str(self._api.configuration.host)

    def with_backoff(self, backoff: Backoff) -> KubeClient:
        """The same connection with another retry policy (leader election must not retry for 15 s)."""
        return KubeClient(self._api, backoff=backoff, namespace=self.namespace)

    def check_reachable(self, *, attempts: int = 3, timeout: float = 5.0, delay: float = 0.5) -> None:
        """Raise UnreachableError, once, when the API server does not answer within a bounded time.

        For commands a person runs: the full backoff is for steps that must survive a brief outage, not for
        telling someone their kubeconfig points nowhere (it took 17 s and six raw warnings).
        """
        problem = ""
        for attempt in range(attempts):
            try:
                self._send("GET", "/version", timeout=(timeout, timeout))
                return
            except ApiError as error:
                if error.status != 0:
                    return  # it answered (401/403 are the next request's to report)
                problem = error.message
            if attempt + 1 < attempts:
                self._backoff.sleep(delay)
        raise UnreachableError(f"cannot reach the Kubernetes API server at {self.server}: {problem}")

    # -- raw requests ---------------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        serialized = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(key, value) for key, value in (query or {}).items() if value is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api.call_api(*serialized, _request_timeout=timeout)
        except k8s_client.ApiException as error:
            raise ApiError(error.status or 0, error.reason or "", str(error.body or "")) from None
        except OSError as error:  # connection refused, reset, DNS: transient by nature
            raise ApiError(0, "ConnectionError", connection_problem(error)) from None
        except Exception as error:
            if type(error).__module__.startswith("urllib3"):
                raise ApiError(0, "ConnectionError", connection_problem(error)) from None
            raise
        return response

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One request with retries on transient errors; the decoded JSON answer."""

        def attempt() -> dict[str, Any]:
            response = self._send(method, path, **kwargs)
            data = response.read()
            if not 200 <= response.status < 300:
                raise error_from(response.status, data)
            decoded: dict[str, Any] = json.loads(data) if data else {}
            return decoded

        return self._backoff.run(attempt, f"{method} {path}")

    # -- typed helpers --------------------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.request("GET", resource.path(namespace, name))
        except ApiError as error:
            if error.not_found:
                return None
            raise

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object (following `continue` pages) and the list's resourceVersion, to watch from."""
        items: list[dict[str, Any]] = []
        version = ""
        for page in self.pages(
            resource, namespace, label_selector=label_selector, field_selector=field_selector, limit=limit
        ):
            items.extend(page.get("items", []))
            version = str(page.get("metadata", {}).get("resourceVersion", ""))
        return items, version

    def pages(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> Iterator[dict[str, Any]]:
        """The list, one page (`limit` objects, then `continue`) at a time, so a caller can keep only what it
        needs of each page instead of holding every full object at once."""
        token: str | None = None
        while True:
            page = self.request(
                "GET",
                resource.path(namespace),
                query={
                    "labelSelector": label_selector,
                    "fieldSelector": field_selector,
                    "limit": limit,
                    "continue": token,
                },
            )
            yield page
            token = page.get("metadata", {}).get("continue")
            if not token:
                return

    def create(self, manifest: dict[str, Any], *, dry_run: bool = False, strict: bool = False) -> dict[str, Any]:
        resource = resource_of(manifest)
        namespace = manifest.get("metadata", {}).get("namespace")
        query = {"dryRun": "All" if dry_run else None, "fieldValidation": "Strict" if strict else None}
        return self.request("POST", resource.path(namespace), body=manifest, query=query)

    def apply(self, manifest: dict[str, Any], *, field_manager: str, force: bool = True) -> dict[str, Any]:
        """Server-side apply (never client-side: the large CRDs exceed the last-applied annotation)."""
        resource = resource_of(manifest)
        metadata = manifest["metadata"]
        return self.request(
            "PATCH",
            resource.path(metadata.get("namespace"), metadata["name"]),
            body=manifest,
            query={"fieldManager": field_manager, "force": "true" if force else None},
            content_type="application/apply-patch+yaml",
        )

    def create_or_replace(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create the object, or overwrite the one that exists (for objects this product owns and rewrites)."""
        try:
            return self.create(manifest)
        except ApiError as error:
            if not error.already_exists:
                raise
        return self.replace(manifest)

    def create_if_absent(self, manifest: dict[str, Any]) -> bool:
        """Create the object unless one of that name exists; True when this call created it."""
        try:
            self.create(manifest)
        except ApiError as error:
            if not error.already_exists:
                raise
            return False
        return True

    def replace(self, manifest: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        resource = resource_of(manifest)
        metadata = manifest["metadata"]
        return self.request(
            "PUT", resource.path(metadata.get("namespace"), metadata["name"], subresource), body=manifest
        )

    def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return self.request("PATCH", resource.path(namespace, name, subresource), body=patch, content_type=MERGE_PATCH)

    def json_patch(
        self, resource: Resource, name: str, operations: Sequence[Mapping[str, Any]], namespace: str | None = None
    ) -> dict[str, Any]:
        """An RFC 6902 patch: with a `test` operation first, a change made only if the object is still as read."""
        return self.request("PATCH", resource.path(namespace, name), body=operations, content_type=JSON_PATCH)

    def delete(
        self, resource: Resource, name: str, namespace: str | None = None, *, propagation: str = "Background"
    ) -> bool:
        """True when something was deleted, False when it was already gone."""
        try:
            self.request(
                "DELETE",
                resource.path(namespace, name),
                body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation},
            )
        except ApiError as error:
            if error.not_found:
                return False
            raise
        return True

    def read_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        limit_bytes: int = 65536,
        tail_lines: int = 2000,
    ) -> str:
        """The last bytes of a pod's log (at most its last `tail_lines` lines, served by the kubelet through the
        API server)."""

        def attempt() -> str:
            response = self._send(
                "GET",
                f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
                query={"container": container, "limitBytes": None, "tailLines": tail_lines},
                timeout=(10, 60),
            )
            data = response.read() or b""
            if not 200 <= response.status < 300:
                raise error_from(response.status, data)
            text: str = data[-limit_bytes:].decode("utf-8", errors="replace")
            return text

        # Logs are best effort (the kubelet may be gone with its node): two quick tries, not the full backoff.
        return replace(self._backoff, attempts=2, first_delay=1.0).run(attempt, f"log of pod {pod}")

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) events from a resourceVersion; ends when the server closes the watch.

        A 410 Gone (expired resourceVersion) arrives either as an ApiError or as an ERROR event whose object
        is a Status with code 410; callers relist on both. A dropped connection is an ApiError (status 0).
        """
        yield from self.open_watch(
            resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
        )

    def open_watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> WatchStream:
        """Start a watch from a resourceVersion and return it open (the request is sent, its answer's headers
        read): for a caller that watches from a thread and must be able to end it from another (`close`).

        Errors as for `watch`: a 410 Gone arrives as an ApiError here or as an ERROR event in the stream."""
        response = self._send(
            "GET",
            resource.path(namespace),
            query={
                "watch": "true",
                "resourceVersion": resource_version,
                "labelSelector": label_selector,
                "fieldSelector": field_selector,
                "timeoutSeconds": timeout_seconds,
                "allowWatchBookmarks": "true",
            },
            timeout=(10, timeout_seconds + 30),
        )
        if not 200 <= response.status < 300:
            raise error_from(response.status, response.read())
        return WatchStream(response.response)
