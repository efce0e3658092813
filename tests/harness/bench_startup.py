"""Measure how long the test control plane takes to start and to take the CRDs.

Run as ``python -m tests.harness.bench_startup [RUNS]`` (default 3 runs). Each run starts a fresh
etcd + kube-apiserver, times the start up to ``/readyz`` = ok, times the CRD installation (apply plus wait
for Established), and stops everything. The numbers size the readiness budget and tell whether one control
plane per test session is affordable.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

from tests.harness.controlplane import ControlPlane
from tests.harness.crds import crd_files, install_crds
from tests.harness.versions import binary_dirs

DEFAULT_RUNS = 3


@dataclass(frozen=True)
class RunTiming:
    """Seconds spent in one start/install/stop cycle."""

    start_s: float
    crd_apply_s: float
    crd_establish_s: float
    stop_s: float

    @property
    def crd_total_s(self) -> float:
        return self.crd_apply_s + self.crd_establish_s


def one_run() -> RunTiming:
    """Start a control plane, install the CRDs, stop it; return the timings."""
    files = crd_files()
    plane = ControlPlane(binary_dirs(), progress=lambda _message: None)
    began = time.monotonic()
    plane.start()
    started = time.monotonic() - began
    try:
        with plane.api_client() as api:
            report = install_crds(api, files)
    finally:
        stop_began = time.monotonic()
        plane.stop()
    return RunTiming(
        start_s=started,
        crd_apply_s=report.apply_seconds,
        crd_establish_s=report.establish_seconds,
        stop_s=time.monotonic() - stop_began,
    )


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else DEFAULT_RUNS
    timings: list[RunTiming] = []
    for index in range(1, runs + 1):
        timing = one_run()
        timings.append(timing)
        print(
            f"run {index}: start to /readyz {timing.start_s:6.2f} s | CRDs {timing.crd_total_s:6.2f} s "
            f"(apply {timing.crd_apply_s:.2f} s, Established {timing.crd_establish_s:.2f} s) | "
            f"stop {timing.stop_s:.2f} s",
            flush=True,
        )
    print(
        f"median of {runs}: start {statistics.median(t.start_s for t in timings):.2f} s, "
        f"CRD install {statistics.median(t.crd_total_s for t in timings):.2f} s, "
        f"stop {statistics.median(t.stop_s for t in timings):.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
