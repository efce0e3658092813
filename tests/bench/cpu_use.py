"""Where the machine's CPU went while a run was measured: the whole machine, and each component of the simulated
cluster (the API server, etcd, the Trainer, JobSet and Argo controllers, the sim kubelet ...).

Why: on the simulated cluster every controller, every step and every workload shares the machine's cores. A
wave that starts slowly could be a controller that works one object at a time or a machine with no core left;
only the CPU figures tell the two apart, and they say how far a figure measured here carries to a cluster whose
control plane has cores of its own.

How: `/proc/stat` gives the machine's busy and total time; each component is the process group the simulator
started it in (its leader's pid), and its time is the sum of `utime + stime` of the group's live members
(`/proc/<pid>/stat`). A process that ended between two snapshots takes its time with it, so step and workload
processes (short-lived, each in a session of its own) are left to "the rest": the machine's busy time less the
components'. The parsing is pure; `take_snapshot` is the only I/O.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
REST = "the rest"
"""Everything busy that is not a component: step and workload processes, the benchmark itself, the kernel."""


@dataclass(frozen=True)
class Snapshot:
    """Cumulative CPU times (seconds) at one moment: the machine's busy and total time over all its cores, and
    each component's."""

    at: float
    busy: float
    total: float
    components: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CpuUse:
    """CPU use between two snapshots, as shares of the machine's capacity (its cores x the time between)."""

    seconds: float
    cores: int
    busy_share: float
    component_shares: Mapping[str, float]
    """Each component's share, and `REST`, largest first."""
    busiest_minute_share: float
    busiest_minute_starts_s: float
    """When the busiest minute began, in seconds after the first snapshot."""
    busiest_minute_components: Mapping[str, float]
    """The same over the busiest minute (`busiest_minute_share` busy): who held the cores when they ran out."""


def machine_times(proc_stat: str) -> tuple[float, float]:
    """(busy, total) seconds over all cores from `/proc/stat`'s first line; idle and iowait are not busy."""
    fields = proc_stat.splitlines()[0].split()
    if fields[0] != "cpu":
        raise ValueError(f"not /proc/stat: {fields[0]!r}")
    ticks = [int(value) for value in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / CLOCK_TICKS, sum(ticks) / CLOCK_TICKS


def process_times(stat: str) -> tuple[int, float]:
    """(process group, utime + stime seconds) from one `/proc/<pid>/stat`; the command name, in parentheses,
    may hold spaces and parentheses itself, so fields are counted from the last ')'."""
    after = stat[stat.rindex(")") + 2 :].split()
    # after[0] is the state (field 3); pgrp is field 5, utime and stime fields 14 and 15.
    return int(after[2]), (int(after[11]) + int(after[12])) / CLOCK_TICKS


def component_times(stats: Iterable[str], groups: Mapping[str, int]) -> dict[str, float]:
    """Each named process group's CPU seconds, summed over the `/proc/<pid>/stat` texts of its members."""
    name_of = {pgid: name for name, pgid in groups.items()}
    times = dict.fromkeys(groups, 0.0)
    for stat in stats:
        pgid, seconds = process_times(stat)
        if pgid in name_of:
            times[name_of[pgid]] += seconds
    return times


def take_snapshot(groups: Mapping[str, int], *, at: float, proc: Path = Path("/proc")) -> Snapshot:
    """The machine's and each component's CPU times now (`groups`: component name -> process group id)."""
    busy, total = machine_times((proc / "stat").read_text(encoding="ascii"))
    return Snapshot(at=at, busy=busy, total=total, components=component_times(_stats(proc), groups))


def _stats(proc: Path) -> Iterable[str]:
    for entry in os.scandir(proc):
        if entry.name.isdigit():
            try:
                yield (proc / entry.name / "stat").read_text(encoding="utf-8", errors="replace")
            except OSError:  # the process ended since the directory was listed
                continue


def cpu_use(snapshots: Sequence[Snapshot], *, cores: int, window_s: float = 60.0) -> CpuUse | None:
    """CPU use from the first snapshot to the last (None with fewer than two), and over the busiest `window_s`."""
    if len(snapshots) < 2 or snapshots[-1].total <= snapshots[0].total:
        return None
    busy, shares = _shares(snapshots[0], snapshots[-1])
    first, last = _busiest(snapshots, window_s)
    busiest, busiest_shares = _shares(first, last)
    return CpuUse(
        seconds=snapshots[-1].at - snapshots[0].at,
        cores=cores,
        busy_share=busy,
        component_shares=shares,
        busiest_minute_share=busiest,
        busiest_minute_starts_s=first.at - snapshots[0].at,
        busiest_minute_components=busiest_shares,
    )


def _shares(first: Snapshot, last: Snapshot) -> tuple[float, dict[str, float]]:
    """The machine's busy share between two snapshots, and each component's and the rest's, largest first."""
    capacity = last.total - first.total
    if capacity <= 0:
        return 0.0, {}
    shares = {
        name: max(0.0, last.components.get(name, 0.0) - first.components.get(name, 0.0)) / capacity
        for name in first.components
    }
    busy = (last.busy - first.busy) / capacity
    shares[REST] = max(0.0, busy - sum(shares.values()))
    return busy, dict(sorted(shares.items(), key=lambda item: (-item[1], item[0])))


def _busiest(snapshots: Sequence[Snapshot], window_s: float) -> tuple[Snapshot, Snapshot]:
    """The two snapshots, at least `window_s` apart (the first and last when the run is shorter), between which
    the machine was busiest."""
    best = (snapshots[0], snapshots[-1])
    best_share = -1.0
    end = 0
    for start, first in enumerate(snapshots[:-1]):
        end = max(end, start + 1)
        while end < len(snapshots) - 1 and snapshots[end].at - first.at < window_s:
            end += 1
        last = snapshots[end]
        if last.at - first.at < window_s and start > 0:
            break  # only shorter spans are left
        if last.total > first.total and (last.busy - first.busy) / (last.total - first.total) > best_share:
            best, best_share = (first, last), (last.busy - first.busy) / (last.total - first.total)
    return best
