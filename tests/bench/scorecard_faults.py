"""The scorecard's fault kinds and where they go: seeded, pure, decided before any cluster starts.

Why decided up front from the product's own plan: a fault can only be attributed when it is alone in its node
group (two faults in one group decide its outcome together, and the simulator's rule for which one wins is not
what is being measured). So the scorecard asks the product where the groups will be (`nvcre-argo plan`, the
preview a user runs, which calls the plan step's own function), then puts at most one faulty node in a group,
on a node drawn at random inside it. The groups are the pairs of `nodesPerJob: 2`, which the training
category runs and the communication category too with `--communication pairs`, so a fault stays alone in its
group in both; diagnostics runs per node, and a diagnose category isolates faults wherever they fall.

The kinds are the simulator's fault kinds (`tests/sim/faults.py`), with `health` split by what the health
system does (a condition, a taint, a cordon) and `slow` split by what is slow (NCCL bus bandwidth, Megatron's
step time), since each is caught, or missed, by a different mechanism. Kinds that take `afterSeconds` get a
random one in `AFTER_SECONDS`: where a crash falls against the run step's 10 s poll is part of what is measured.

Runs: every kind needs a group of its own and some groups stay healthy (`HEALTHY_SHARE`, so a run also counts
false positives far from any fault). When every kind fits in one run it gets as many copies of each kind as
fit; otherwise the kinds are split over several runs, the long ones (which hold a group until `timeoutPerJob`
or the health grace) together, so the short runs end quickly. One more run, on the largest cluster unless
asked for on every size, has no fault at all.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

AFTER_SECONDS: Final = (0.5, 15.0)
HEALTHY_SHARE: Final = 0.25
MIN_HEALTHY_GROUPS: Final = 2
SLOW_BUS_BANDWIDTH_GBPS: Final = (5.0, 60.0)  # well below the threshold (100) and the healthy 380
SLOW_STEP_TIME_MS: Final = (8000.0, 20000.0)  # well above the threshold (5 s) and the healthy 2 s
HEALTH_CONDITION: Final = {
    "type": "GpuUnhealthy",
    "status": "True",
    "reason": "XidError",
    "message": "GPU 0: Xid 79 (GPU has fallen off the bus)",
}
HEALTH_TAINT: Final = {"key": "nvidia.com/gpu-unhealthy", "value": "true", "effect": "NoSchedule"}
NO_FAULT_RUN: Final = "no-fault"
MARK_FAULTS: Final = frozenset({"health", "notready"})  # the simulator's faults that change the Node object

Entry = Callable[[random.Random], dict[str, Any]]


def _after(rng: random.Random) -> float:
    return round(rng.uniform(*AFTER_SECONDS), 1)


def _crash(rng: random.Random) -> dict[str, Any]:
    return {"fault": "crash", "exitCode": rng.choice((1, 137)), "afterSeconds": _after(rng)}


def _transient(rng: random.Random) -> dict[str, Any]:
    return {"fault": "transient", "exitCode": 1, "afterSeconds": _after(rng)}


def _slow_nccl(rng: random.Random) -> dict[str, Any]:
    return {"fault": "slow", "busBandwidthGBps": round(rng.uniform(*SLOW_BUS_BANDWIDTH_GBPS))}


def _slow_training(rng: random.Random) -> dict[str, Any]:
    return {"fault": "slow", "stepTimeMs": round(rng.uniform(*SLOW_STEP_TIME_MS))}


def _health(signal: str, value: object) -> Entry:
    return lambda rng: {"fault": "health", "afterSeconds": _after(rng), signal: value}


def _plain(kind: str) -> Entry:
    return lambda rng: {"fault": kind}


@dataclass(frozen=True)
class FaultKind:
    """One scorecard fault kind: how to write it in a fault plan, and whether it holds its group long (until
    `timeoutPerJob` for a blocked collective, or the health grace of the simulator)."""

    name: str
    entry: Entry
    long: bool


KINDS: Final[tuple[FaultKind, ...]] = (
    FaultKind("crash", _crash, long=False),
    FaultKind("transient", _transient, long=False),
    FaultKind("slow-nccl", _slow_nccl, long=False),
    FaultKind("slow-training", _slow_training, long=False),
    FaultKind("datacheck", _plain("datacheck"), long=False),
    FaultKind("hang", _plain("hang"), long=True),
    FaultKind("stall", _plain("stall"), long=True),
    FaultKind("health-condition", _health("condition", HEALTH_CONDITION), long=True),
    FaultKind("health-taint", _health("taint", HEALTH_TAINT), long=True),
    FaultKind("health-cordon", _health("cordon", True), long=True),
    FaultKind("notready", lambda rng: {"fault": "notready", "afterSeconds": _after(rng)}, long=True),
)
KIND_NAMES: Final = tuple(kind.name for kind in KINDS)


@dataclass(frozen=True)
class Injection:
    """One faulty node of a run: its scorecard kind and its fault-plan entry."""

    node: str
    kind: str
    entry: Mapping[str, Any]

    @property
    def marks(self) -> bool:
        """Whether the fault marks its Node object (a taint, condition, cordon or NotReady)."""
        return self.entry.get("fault") in MARK_FAULTS


@dataclass(frozen=True)
class RunSpec:
    """One Certification run: its name and the faults it injects (none for the no-fault run)."""

    name: str
    injections: tuple[Injection, ...]

    def fault_plan(self, defaults: Mapping[str, Any], *, marks: bool = True) -> dict[str, Any]:
        """The simulator's fault plan document for this run; without `marks`, the node marks (health and
        notready faults) are left out: once made, a mark stays on the node until the run's namespace is
        deleted, so later workloads need not make it again."""
        kept = [item for item in self.injections if marks or not item.marks]
        nodes = {item.node: dict(item.entry) for item in sorted(kept, key=lambda item: item.node)}
        return {"defaults": dict(defaults), "nodes": nodes}

    @property
    def has_marks(self) -> bool:
        return any(item.marks for item in self.injections)

    def kind_of(self) -> dict[str, str]:
        return {item.node: item.kind for item in self.injections}


def fault_capacity(group_count: int) -> int:
    """How many groups of a run may hold a fault: all but a healthy share (at least `MIN_HEALTHY_GROUPS`)."""
    healthy = max(MIN_HEALTHY_GROUPS, math.ceil(group_count * HEALTHY_SHARE))
    return max(group_count - healthy, 0)


def batch_kinds(kinds: Sequence[FaultKind], capacity: int) -> list[list[FaultKind]]:
    """The kinds of each fault run, copies included: one run with as many copies of every kind as fit, or,
    when they do not all fit, runs of at most `capacity` kinds with the long kinds kept together."""
    if capacity <= 0:
        raise ValueError("no group is left for a fault: the cluster is too small for the scorecard")
    if len(kinds) <= capacity:
        return [list(kinds) * (capacity // len(kinds))]
    ordered = [kind for kind in kinds if kind.long] + [kind for kind in kinds if not kind.long]
    return [ordered[start : start + capacity] for start in range(0, len(ordered), capacity)]


def place_faults(name: str, kinds: Sequence[FaultKind], groups: Sequence[Sequence[str]], rng: random.Random) -> RunSpec:
    """One run: each kind on a random node of its own random group (no two faults share a group)."""
    if len(kinds) > len(groups):
        raise ValueError(f"{len(kinds)} faults need as many groups, got {len(groups)}")
    chosen = rng.sample(range(len(groups)), len(kinds))
    injections = []
    for kind, index in zip(kinds, chosen, strict=True):
        node = rng.choice(sorted(groups[index]))
        injections.append(Injection(node=node, kind=kind.name, entry=kind.entry(rng)))
    return RunSpec(name=name, injections=tuple(sorted(injections, key=lambda item: (item.kind, item.node))))


def plan_runs(
    groups: Sequence[Sequence[str]],
    rng: random.Random,
    kinds: Sequence[FaultKind] = KINDS,
    *,
    no_fault: bool = True,
) -> list[RunSpec]:
    """Every run of one cluster size: the fault runs, then (with `no_fault`) the run without a fault."""
    batches = batch_kinds(kinds, fault_capacity(len(groups)))
    runs = [place_faults(f"faults-{index + 1}", batch, groups, rng) for index, batch in enumerate(batches)]
    return [*runs, RunSpec(name=NO_FAULT_RUN, injections=())] if no_fault else runs
