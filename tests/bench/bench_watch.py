"""How quickly the watcher turns Workflow status changes into Certification status, at what rate, in how much
memory; printed next to the targets (never asserted).

Run as ``PYTHONPATH=. python -m tests.bench.bench_watch [CERTIFICATIONS]`` from the repository root (default
100). It starts its own control plane, creates the Certifications with their Argo Workflows in flight (parent
Running, category 0 Running), starts ``nvcre-argo watch`` as a subprocess (the real command, so its resident
memory is the watcher's alone), then plays Argo through three rounds of changes per Certification:

1. paced: category 0's Workflow Succeeded (with the record step's outputs), one Certification every 40 ms;
2. paced: category 1's Workflow created (Argo's resource step);
3. burst: category 1's Workflow Succeeded for every Certification as fast as the API server takes the writes.

Latency is from just before the Workflow write is sent to the moment the benchmark's own watch of the
Certifications delivers a status showing the change. Rates come from the watcher's /metrics (watch events
processed, reconciles, status writes) over each round. Targets: p99 latency < 2 s; watcher RSS < 150 MiB.
"""

from __future__ import annotations

import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.connect import connect
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CERTIFICATIONS
from tests.harness.controlplane import start_cluster
from tests.harness.crds import crd_files
from tests.integration.watcher_support import Argo, Step, category_manifest, certification_manifest, record_step

NAMESPACE = "bench"
DEFAULT_CERTIFICATIONS = 100
PACE_SECONDS = 0.04
ROUND_TIMEOUT_S = 120.0
TARGET_P99_S = 2.0
TARGET_RSS_MIB = 150.0
WATCH_COMMAND = Path(sys.executable).with_name("nvcre-argo")
Predicate = Callable[[dict[str, Any]], bool]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _phase(status: dict[str, Any], index: int) -> str | None:
    categories = status.get("categoryStatuses") or []
    return categories[index].get("status") if index < len(categories) else None


@dataclass
class Observer:
    """Watches the Certifications and times each expected change from its write to its appearance."""

    kube: KubeClient
    pending: dict[str, tuple[Predicate, float]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Condition = field(default_factory=threading.Condition)
    stop: threading.Event = field(default_factory=threading.Event)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)

    def expect(self, name: str, predicate: Predicate, started: float) -> None:
        with self.lock:
            self.pending[name] = (predicate, started)
            already = self.last.get(name)
        if already is not None:
            self._check(name, already)

    def _check(self, name: str, status: dict[str, Any]) -> None:
        now = time.monotonic()
        with self.lock:
            self.last[name] = status
            entry = self.pending.get(name)
            if entry is None or not entry[0](status):
                return
            del self.pending[name]
            self.latencies.append(now - entry[1])
        with self.done:
            self.done.notify_all()

    def run(self) -> None:
        try:
            self._follow()
        except Exception:  # the control plane stopping under an open watch
            if not self.stop.is_set():
                raise

    def _follow(self) -> None:
        while not self.stop.is_set():
            items, version = self.kube.list(CERTIFICATIONS, NAMESPACE)
            for item in items:
                self._check(item["metadata"]["name"], item.get("status") or {})
            try:
                for kind, item in self.kube.watch(
                    CERTIFICATIONS, NAMESPACE, resource_version=version, timeout_seconds=600
                ):
                    if self.stop.is_set():
                        return
                    if kind in ("ADDED", "MODIFIED"):
                        self._check(item["metadata"]["name"], item.get("status") or {})
            except ApiError:
                continue

    def wait_all(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.done:
            while True:
                with self.lock:
                    if not self.pending:
                        return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.done.wait(min(left, 0.2))


@dataclass
class WatcherProcess:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def metrics(self) -> dict[str, float]:
        """Sums of the watcher's counters, by metric name."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as response:
            text = response.read().decode()
        sums: dict[str, float] = {}
        for line in text.splitlines():
            match = re.match(r"^(nvcre_\w+?)(?:\{([^}]*)\})? ([0-9.e+-]+)$", line)
            if match is None:
                continue
            name, labels, value = match.groups()
            if name == "nvcre_reconcile_total" and 'outcome="ok"' not in (labels or ""):
                continue
            sums[name] = sums.get(name, 0.0) + float(value)
        return sums

    def memory_mib(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) of the watcher process in MiB."""
        fields = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_watcher(kubeconfig: Path, workdir: Path) -> WatcherProcess:
    port = _free_port()
    log = workdir / "watcher.log"
    command = [
        str(WATCH_COMMAND),
        "watch",
        "-n",
        NAMESPACE,
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-port",
        str(port),
        "--health-port",
        "0",
        "--bind-address",
        "127.0.0.1",
        "--resync-seconds",
        "60",
    ]
    with log.open("wb") as stream:
        process = subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT)
    return WatcherProcess(process, port, log)


def wait_ready(watcher: WatcherProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if watcher.process.poll() is not None:
            raise RuntimeError(f"the watcher exited: {watcher.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{watcher.port}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the watcher never became ready")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


@dataclass
class RoundResult:
    name: str
    latencies: list[float]
    seconds: float
    counters: dict[str, float]
    complete: bool


def measure_round(
    name: str,
    observer: Observer,
    watcher: WatcherProcess,
    changes: list[tuple[str, Callable[[], None], Predicate]],
    *,
    pace: float,
) -> RoundResult:
    """Apply each change (waiting `pace` seconds between them), then wait until every one is visible."""
    before = watcher.metrics()
    first = len(observer.latencies)
    started = time.monotonic()
    for certification, prepare_and_write, predicate in changes:
        sent = time.monotonic()
        prepare_and_write()
        observer.expect(certification, predicate, sent)
        if pace:
            time.sleep(max(0.0, pace - (time.monotonic() - sent)))
    complete = observer.wait_all(ROUND_TIMEOUT_S)
    seconds = time.monotonic() - started
    after = watcher.metrics()
    counters = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    return RoundResult(name, observer.latencies[first:], seconds, counters, complete)


def print_round(result: RoundResult) -> None:
    values = result.latencies
    events = result.counters.get("nvcre_watch_events_total", 0.0)
    reconciled = result.counters.get("nvcre_reconcile_total", 0.0)
    writes = result.counters.get("nvcre_status_writes_total", 0.0)
    print(
        f"  {result.name}: {len(values)} changes in {result.seconds:.2f} s{'' if result.complete else ' (TIMED OUT)'}"
    )
    if values:
        print(
            f"    latency median {statistics.median(values) * 1000:.0f} ms, "
            f"p99 {percentile(values, 0.99) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"
        )
    print(
        f"    watcher: {events:.0f} watch events ({events / result.seconds:.0f}/s), {reconciled:.0f} reconciles "
        f"({reconciled / result.seconds:.0f}/s), {writes:.0f} status writes"
    )


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else DEFAULT_CERTIFICATIONS
    started = time.monotonic()
    cluster = start_cluster(None, crd_files())
    watcher: WatcherProcess | None = None
    observer: Observer | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="bench-watch-") as workdir:
            kube = connect(str(cluster.kubeconfig))
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            argo = Argo(kube, NAMESPACE, load_catalog())
            names = [f"cert-{index:03d}" for index in range(count)]
            parents: dict[str, dict[str, Any]] = {}
            children: dict[str, dict[str, Any]] = {}
            for name in names:
                cert = kube.create(certification_manifest(NAMESPACE, name))
                parents[name] = argo.submit(cert)
                children[name] = argo.create_category(parents[name], 0)
            print(f"control plane and {count} Certifications in flight in {time.monotonic() - started:.1f} s")

            observer = Observer(connect(str(cluster.kubeconfig)))
            threading.Thread(target=observer.run, name="observer", daemon=True).start()
            launched = time.monotonic()
            watcher = start_watcher(cluster.kubeconfig, Path(workdir))
            wait_ready(watcher)
            for name in names:
                observer.expect(name, lambda status: _phase(status, 0) == "InProgress", launched)
            if not observer.wait_all(ROUND_TIMEOUT_S):
                raise RuntimeError(f"initial statuses never all appeared; see {watcher.log.read_text()[-2000:]}")
            initial = observer.latencies[:]
            print(
                f"watcher start to all {count} statuses written: {max(initial):.2f} s "
                f"(process start, lists, {count} reconciles)"
            )

            def finish(child: dict[str, Any]) -> Callable[[], None]:
                steps = [
                    Step("plan", "plan", "Succeeded"),
                    Step("group(0:g0)", "run-group", "Succeeded"),
                    record_step(succeeded=f"succeeded-nodes-{child['metadata']['uid'][:8]}"),
                ]

                def write() -> None:
                    argo.set_status(child["metadata"]["name"], "Succeeded", steps=steps)

                return write

            def create_second(name: str) -> Callable[[], None]:
                def write() -> None:
                    children[name] = argo.create(category_manifest(parents[name], 1))

                return write

            rounds = [
                measure_round(
                    "round 1, paced (category 0 Succeeded)",
                    observer,
                    watcher,
                    [(name, finish(children[name]), lambda s: _phase(s, 0) == "Succeeded") for name in names],
                    pace=PACE_SECONDS,
                ),
                measure_round(
                    "round 2, paced (category 1 Workflow created)",
                    observer,
                    watcher,
                    [(name, create_second(name), lambda s: _phase(s, 1) == "InProgress") for name in names],
                    pace=PACE_SECONDS,
                ),
            ]
            rounds.append(
                measure_round(
                    "round 3, burst (category 1 Succeeded)",
                    observer,
                    watcher,
                    [(name, finish(children[name]), lambda s: s.get("result") == "PASSED") for name in names],
                    pace=0.0,
                )
            )
            rss, peak = watcher.memory_mib()

            every = [value for result in rounds for value in result.latencies]
            median, p99 = statistics.median(every), percentile(every, 0.99)
            burst = rounds[2]
            burst_events = burst.counters.get("nvcre_watch_events_total", 0.0)
            print(f"\nwatcher benchmark: {count} Certifications, {len(every)} Workflow status changes")
            for result in rounds:
                print_round(result)
            print("\nsummary")
            print(f"  latency, change written -> Certification status shows it: median {median * 1000:.0f} ms")
            verdict = "met" if p99 < TARGET_P99_S and all(r.complete for r in rounds) else "NOT met"
            print(f"  latency p99: {p99 * 1000:.0f} ms (target < {TARGET_P99_S * 1000:.0f} ms: {verdict})")
            print(
                f"  events processed: {burst_events / burst.seconds:.0f}/s in the burst "
                f"({burst_events:.0f} watch events in {burst.seconds:.2f} s until every status showed its change)"
            )
            memory_verdict = "met" if peak < TARGET_RSS_MIB else "NOT met"
            print(
                f"  watcher resident memory: {rss:.1f} MiB now, {peak:.1f} MiB peak "
                f"(target < {TARGET_RSS_MIB:.0f} MiB: {memory_verdict})"
            )
    finally:
        if observer is not None:
            observer.stop.set()
        if watcher is not None:
            watcher.stop()
        cluster.plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
