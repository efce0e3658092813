"""What a benchmark watches beside a Certification while it runs: the step processes' peak memory, the machine's
CPU, the last state of objects the run deletes, and the sizes of what the run leaves.

Why apart from the drivers: the overhead benchmark and the scorecard both print the orchestration's cost (issue
15's items 3 and 4) from the same samples, so they take them the same way.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Self

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.follow import Callbacks, Follower, Selection
from nvcre_argo.kube.resources import Resource
from tests.bench import cpu_use, footprint
from tests.sim import scenario
from tests.sim.cluster import SimCluster
from tests.sim.processes import step_processes


class Periodic:
    """Calls `sample` every `interval` seconds on a thread of its own while the `with` block runs; a sample that
    fails with an API or OS error is counted in `errors` and the next one tried."""

    def __init__(self, name: str, interval: float) -> None:
        self.errors = 0
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except (ApiException, OSError):
                self.errors += 1
            self._stop.wait(self._interval)

    def sample(self) -> None:
        raise NotImplementedError


class StepMemory(Periodic):
    """The peak resident memory of each step command's processes (`tests/sim/processes.py`), sampled from
    `/proc` every second: the simulator runs step containers as local processes, and one certification runs at
    a time, so a command's processes are this run's."""

    def __init__(self) -> None:
        super().__init__("step-memory", 1.0)
        self.peaks_mib: dict[str, float] = {}

    def sample(self) -> None:
        for process in step_processes():
            if process.container_first:  # Argo's executor, not the step
                continue
            try:
                peak = footprint.high_water_mib(Path(f"/proc/{process.pid}/status").read_text(encoding="utf-8"))
            except OSError:  # the process ended since it was found
                continue
            if peak is not None:
                self.peaks_mib[process.command] = max(peak, self.peaks_mib.get(process.command, 0.0))


class CpuSampler(Periodic):
    """Snapshots of the machine's and each simulated-cluster component's CPU time every 5 s
    (`tests/bench/cpu_use.py`): whether a slow wave waited for a controller or for the machine's cores."""

    def __init__(self, sim: SimCluster) -> None:
        super().__init__("cpu-use", 5.0)
        self.groups = {**{name: component.pid for name, component in sim.components.items()}, **sim.plane.pids}
        self.snapshots: list[cpu_use.Snapshot] = []

    def sample(self) -> None:
        self.snapshots.append(cpu_use.take_snapshot(self.groups, at=time.monotonic()))

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        with contextlib.suppress(OSError):
            self.sample()  # the run's end, whatever the interval left


class LastSeen:
    """The last state of every object of one kind in a namespace, by a list + watch (the product's
    `kube.follow.Follower`), kept by name in `objects`: a deleted object keeps the state its DELETED event
    carried. For what a run deletes before it can be read back (the runner's TrainJobs, pod GC's pods)."""

    def __init__(
        self, api: k8s.ApiClient, resource: Resource, namespace: str, *, label_selector: str = "", what: str
    ) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        selection = Selection(label_selector=label_selector) if label_selector else Selection()
        callbacks = Callbacks(keep=lambda obj: True, on_list=self._note_all, on_event=lambda kind, obj: self._note(obj))
        self._follower = Follower(KubeClient(api), resource, namespace, selection, callbacks, what=what)

    def __enter__(self) -> Self:
        self._follower.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._follower.close()

    def _note(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self.objects[str(obj["metadata"]["name"])] = dict(obj)

    def _note_all(self, objects: list[Mapping[str, Any]]) -> None:
        for obj in objects:
            self._note(obj)

    def values(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.objects.values())


def largest_objects(
    api: k8s.ApiClient, namespace: str, trainjobs: Iterable[Mapping[str, Any]]
) -> list[footprint.LargestObject]:
    """The run's Workflows and ConfigMaps as they are at its end, and its TrainJobs as last seen (the runner
    deletes them), largest first per kind."""
    core = k8s.CoreV1Api(api)
    config_maps = [
        api.sanitize_for_serialization(item)  # type: ignore[no-untyped-call]
        for item in core.list_namespaced_config_map(namespace).items
    ]
    return footprint.largest_objects(
        [
            *(("Workflow", item) for item in scenario.workflows(api, namespace)),
            *(("ConfigMap", item) for item in config_maps),
            *(("TrainJob", item) for item in trainjobs),
        ]
    )
