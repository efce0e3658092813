"""Prometheus metrics and health endpoints of the watcher.

Each watcher owns its metrics registry (no process-global default registry), so two watchers in one test
process do not share counters. Gauges describe the certifications (result, per-category status, failed and
excluded nodes); counters and a histogram describe the watcher itself (reconciles, latency, writes, relists).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from nvcre_argo.api.status import CertificationStatus

RESULTS = ("PASSED", "FAILED", "INCOMPLETE", "RUNNING")
PHASES = ("Pending", "InProgress", "Succeeded", "Failed")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._result = Gauge(
            "nvcre_certification_result",
            "1 for the Certification's current result",
            ["namespace", "name", "result"],
            registry=self.registry,
        )
        self._category = Gauge(
            "nvcre_category_status",
            "1 for each category's current status",
            ["namespace", "certification", "index", "domain", "variant", "status"],
            registry=self.registry,
        )
        self._failed_nodes = Gauge(
            "nvcre_certification_failed_nodes", "Distinct failed nodes", ["namespace", "name"], registry=self.registry
        )
        self._excluded_nodes = Gauge(
            "nvcre_certification_excluded_nodes", "Excluded nodes", ["namespace", "name"], registry=self.registry
        )
        self._reconciles = Counter(
            "nvcre_reconcile_total", "Reconciles by outcome", ["outcome"], registry=self.registry
        )
        self._latency = Histogram("nvcre_reconcile_duration_seconds", "Reconcile latency", registry=self.registry)
        self._writes = Counter("nvcre_status_writes_total", "Status subresource writes", registry=self.registry)
        self._submitted = Counter(
            "nvcre_workflows_submitted_total", "Workflows created by --submit", registry=self.registry
        )
        self._relists = Counter(
            "nvcre_relists_total", "Full relists (start, 410 Gone)", ["resource"], registry=self.registry
        )
        self._events = Counter(
            "nvcre_watch_events_total", "Watch events processed", ["resource"], registry=self.registry
        )
        self._known: dict[tuple[str, str], list[tuple[str, ...]]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def reconcile_timer(self) -> Iterator[None]:
        with self._latency.time():
            try:
                yield
            except Exception:
                self._reconciles.labels("error").inc()
                raise
        self._reconciles.labels("ok").inc()

    def observe(self, namespace: str, name: str, status: CertificationStatus) -> None:
        with self._lock:
            self._forget(namespace, name)
            for result in RESULTS:
                self._result.labels(namespace, name, result).set(1 if status.result == result else 0)
            category_labels: list[tuple[str, ...]] = []
            for index, category in enumerate(status.category_statuses or []):
                for phase in PHASES:
                    labels = (namespace, name, str(index), category.domain, category.variant, phase)
                    self._category.labels(*labels).set(1 if category.status == phase else 0)
                    category_labels.append(labels)
            self._failed_nodes.labels(namespace, name).set(status.failed_nodes or 0)
            self._excluded_nodes.labels(namespace, name).set(status.excluded_nodes or 0)
            self._known[(namespace, name)] = category_labels

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted Certification's series so dashboards do not show ghosts."""
        with self._lock:
            self._forget(namespace, name)

    def _forget(self, namespace: str, name: str) -> None:
        labels = self._known.pop((namespace, name), None)
        if labels is None:
            return
        for series in labels:
            self._category.remove(*series)
        for result in RESULTS:
            self._result.remove(namespace, name, result)
        self._failed_nodes.remove(namespace, name)
        self._excluded_nodes.remove(namespace, name)

    def status_written(self) -> None:
        self._writes.inc()

    def workflow_submitted(self) -> None:
        self._submitted.inc()

    def relisted(self, resource: str) -> None:
        self._relists.labels(resource).inc()

    def event_seen(self, resource: str) -> None:
        self._events.labels(resource).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def serve(
    *, bind: str, port: int, metrics: Metrics | None, ready: Callable[[], bool], alive: Callable[[], bool]
) -> ThreadingHTTPServer:
    """`/metrics`, `/healthz` (alive) and `/readyz` (synced, and leading or standing by) on one port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics" and metrics is not None:
                self._answer(200, metrics.exposition(), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                self._answer(200 if alive() else 500, b"ok\n" if alive() else b"unhealthy\n")
            elif self.path == "/readyz":
                self._answer(200 if ready() else 503, b"ok\n" if ready() else b"not ready\n")
            else:
                self._answer(404, b"not found\n")

        def _answer(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    server = _server_class(bind)((bind, port), Handler)
    threading.Thread(target=server.serve_forever, name=f"http-{port}", daemon=True).start()
    return server


class _ThreadingHTTPServerV6(ThreadingHTTPServer):
    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        # `::` serves IPv4 clients too (dual stack), whatever the node's `net.ipv6.bindv6only` default.
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def _server_class(bind: str) -> type[ThreadingHTTPServer]:
    """An IPv6 bind address (`::`, `::1`) needs an AF_INET6 socket; the standard server only opens AF_INET,
    so on an IPv6-only cluster the probes and the metrics scrape would never reach the watcher."""
    return _ThreadingHTTPServerV6 if ":" in bind else ThreadingHTTPServer
