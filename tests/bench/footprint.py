"""What the orchestration of a certification holds and asks for (pure): its step pods at their peak, their
summed resource requests, and its API requests per minute.

Why apart from `tests/bench/bench_overhead.py`: the driver samples the cluster; the figures are decided here,
from plain dictionaries (pods and Workflow statuses as the API returns them, audit events as the API server
writes them), so each one can be checked on hand-made objects without a cluster.

- **Step pods at once**: every Argo Pod node of the certification and category Workflows holds its pod from
  the node's start to its end (Argo's one-second timestamps); the peak is the largest number held at one
  time, a pod ending in the second another starts counting as gone.
- **Summed requests**: what the scheduler reserves for a pod is the larger of its biggest init container
  and the sum of its other containers (Argo's `init` and `wait` containers included); the peak is the
  largest sum over the pods held at one time (it need not be at the peak count).
- **API requests**: the API server's audit log of service accounts' requests, one event per completed
  request (a watch counts once, when it ends); per service account of the run's namespace, over a window.
- **Step memory**: the simulator runs each step pod's container as a local process, so its peak resident
  memory is the kernel's high-water mark (`VmHWM` in `/proc/<pid>/status`), sampled while it runs; per step
  command (`plan`, `run-groups`, ...), the largest over its processes. Sampling misses only what a process
  adds after its last sample.
- **Object sizes**: per kind, how many objects the run left and the largest, as compact JSON (about what the
  API server stores and what its 1.5 MiB request limit and etcd's value limit apply to).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from kubernetes.utils.quantity import parse_quantity

from tests.bench.overhead import NODE_NAME_ANNOTATION, Span, parse_time

MIB: Final = Decimal(1024 * 1024)
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"


@dataclass(frozen=True)
class Requests:
    """CPU (cores) and memory (MiB) a pod's containers request."""

    cpu: float = 0.0
    memory_mib: float = 0.0

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.cpu + other.cpu, self.memory_mib + other.memory_mib)

    def __sub__(self, other: Requests) -> Requests:
        return Requests(self.cpu - other.cpu, self.memory_mib - other.memory_mib)


def _quantity(requests: Mapping[str, Any], resource: str) -> Decimal:
    """A request as a number (`100m` -> 0.1, `256Mi` -> 268435456); 0 when not requested."""
    if resource not in requests:
        return Decimal(0)
    value: Decimal = parse_quantity(requests[resource])  # type: ignore[no-untyped-call]
    return value


def _container_requests(container: Mapping[str, Any]) -> Requests:
    requests = (container.get("resources") or {}).get("requests") or {}
    return Requests(float(_quantity(requests, "cpu")), float(_quantity(requests, "memory") / MIB))


def pod_requests(pod: Mapping[str, Any]) -> Requests:
    """What the scheduler reserves for `pod`: per resource, the larger of its biggest init container and the
    sum of its containers."""
    spec = pod.get("spec") or {}
    init = [_container_requests(container) for container in spec.get("initContainers") or []]
    running = sum((_container_requests(container) for container in spec.get("containers") or []), Requests())
    return Requests(
        max([running.cpu, *(item.cpu for item in init)]),
        max([running.memory_mib, *(item.memory_mib for item in init)]),
    )


def requests_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[str, Requests]:
    """Each step pod's requests, keyed by its Argo node's name (the annotation Argo puts on it)."""
    found = {}
    for pod in pods:
        node = ((pod.get("metadata") or {}).get("annotations") or {}).get(NODE_NAME_ANNOTATION)
        if node:
            found[str(node)] = pod_requests(pod)
    return found


@dataclass(frozen=True)
class Footprint:
    """The orchestration pods of a run at their peak; `unmatched` counts pods whose requests were not seen."""

    pods: int
    peak_pods: int
    peak: Requests
    unmatched: int = 0


def footprint(spans: Sequence[Span], requests: Mapping[str, Requests]) -> Footprint:
    """The peak number of pods held at once among `spans` (Argo Pod nodes, by name in `requests`) and the
    peak of their summed requests."""
    events: list[tuple[datetime, int, Requests]] = []
    unmatched = 0
    for span in spans:
        held = requests.get(span.name)
        if held is None:
            unmatched += 1
            held = Requests()
        events += [(span.started, 1, held), (span.finished, -1, held)]
    # At one timestamp, ends before starts: a pod ending in the second another starts is gone.
    events.sort(key=lambda event: (event[0], event[1]))
    count, peak_pods, total = 0, 0, Requests()
    peak_cpu, peak_memory = 0.0, 0.0
    for _, delta, held in events:
        count += delta
        total = total + held if delta > 0 else total - held
        peak_pods = max(peak_pods, count)
        peak_cpu, peak_memory = max(peak_cpu, total.cpu), max(peak_memory, total.memory_mib)
    return Footprint(len(spans), peak_pods, Requests(peak_cpu, peak_memory), unmatched)


def service_account(event: Mapping[str, Any], namespace: str) -> str | None:
    """The name of the service account of `namespace` that made an audit event's request, or None."""
    user = str((event.get("user") or {}).get("username", ""))
    prefix = f"{SERVICE_ACCOUNT_PREFIX}{namespace}:"
    return user.removeprefix(prefix) if user.startswith(prefix) else None


def api_requests(events: Iterable[Mapping[str, Any]], namespace: str, start: datetime, end: datetime) -> dict[str, int]:
    """Per service account of `namespace`, the requests it made (received) between `start` and `end`."""
    counts: dict[str, int] = {}
    for event in events:
        account = service_account(event, namespace)
        received = event.get("requestReceivedTimestamp")
        if account is None or not received or not start <= parse_time(str(received)) <= end:
            continue
        counts[account] = counts.get(account, 0) + 1
    return dict(sorted(counts.items()))


def per_minute(count: int, start: datetime, end: datetime) -> float | None:
    """`count` requests over the window, per minute (None for an empty window)."""
    seconds = (end - start).total_seconds()
    return count * 60.0 / seconds if seconds > 0 else None


@dataclass(frozen=True)
class LargestObject:
    """Of one kind of object: how many there were, and the largest one's name and size in bytes, with the part
    of it that is `metadata.managedFields` (the API server's record of who wrote which field, stored with the
    object and counted by etcd, but left out by controllers that trim it from their caches)."""

    kind: str
    count: int
    name: str
    size_bytes: int
    managed_fields_bytes: int = 0


def object_size(obj: Mapping[str, Any]) -> int:
    """The object's size as compact JSON, in bytes."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def largest_objects(objects: Iterable[tuple[str, Mapping[str, Any]]]) -> list[LargestObject]:
    """Per kind of the `(kind, object)` pairs, in the order the kinds first appear: the count and the largest."""
    found: dict[str, LargestObject] = {}
    for kind, obj in objects:
        size = object_size(obj)
        metadata = obj.get("metadata") or {}
        name = str(metadata.get("name", ""))
        held = found.get(kind)
        if held is None or size > held.size_bytes:
            managed = object_size(metadata["managedFields"]) if metadata.get("managedFields") else 0
            found[kind] = LargestObject(kind, 1 if held is None else held.count + 1, name, size, managed)
        else:
            found[kind] = replace(held, count=held.count + 1)
    return list(found.values())


OBJECT_LIMIT_BYTES: Final = 1024 * 1024  # the bound for any one object; etcd's own limit is 1.5 MiB


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns as wide as their widest cell, the first left-aligned, the others right-aligned."""
    widths = [max(len(str(row[index])) for row in [header, *rows]) for index in range(len(header))]
    line = "  ".join(f"{{:<{width}}}" if index == 0 else f"{{:>{width}}}" for index, width in enumerate(widths))
    return [line.format(*header), *(line.format(*row) for row in rows)]


def object_size_lines(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[str]:
    """Per run (its name, its `LargestObject`s as dicts), each kind's count and largest object, then the
    objects over `OBJECT_LIMIT_BYTES`."""
    rows = [
        [
            name,
            item["kind"],
            str(item["count"]),
            f"{item['size_bytes']:,}",
            f"{item.get('managed_fields_bytes', 0):,}",
            item["name"],
        ]
        for name, largest in runs
        for item in largest
    ]
    over = [row for row in rows if int(row[3].replace(",", "")) > OBJECT_LIMIT_BYTES]
    return [
        "largest object of each kind (compact JSON; etcd refuses values over 1.5 MiB):",
        *table(["run", "kind", "objects", "largest B", "of it managedFields B", "its name"], rows),
        f"objects over 1 MiB: {len(over)}" + "".join(f"; {row[0]} {row[1]} {row[5]}" for row in over),
    ]


def step_memory_text(peaks_mib: Mapping[str, float]) -> str:
    """Each step command's peak resident memory, e.g. `run-groups 236, record 105` (MiB)."""
    return ", ".join(f"{command} {mib:.0f}" for command, mib in peaks_mib.items()) or "none sampled"


def high_water_mib(status: str) -> float | None:
    """`VmHWM` (peak resident memory) of a `/proc/<pid>/status` text, in MiB; None without it."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return None
