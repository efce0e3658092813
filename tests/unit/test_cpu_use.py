"""Where the machine's CPU went during a benchmark run (`tests/bench/cpu_use.py`): parsing `/proc` and the shares."""

from __future__ import annotations

import os

import pytest

from tests.bench.cpu_use import (
    CLOCK_TICKS,
    REST,
    Snapshot,
    component_times,
    cpu_use,
    machine_times,
    process_times,
    take_snapshot,
)


def stat_line(pid: int, comm: str, pgrp: int, utime: int, stime: int) -> str:
    """A `/proc/<pid>/stat` line with the fields that matter set, the others plausible."""
    return f"{pid} ({comm}) S 1 {pgrp} {pgrp} 0 -1 4194560 100 0 0 0 {utime} {stime} 7 9 20 0 12 0 100 1000 50"


def test_the_machine_is_busy_for_all_but_idle_and_iowait() -> None:
    ticks = "cpu  100 10 40 800 50 0 0 0 0 0\ncpu0 50 5 20 400 25 0 0 0 0 0\n"
    busy, total = machine_times(ticks)
    assert busy == pytest.approx(150 / CLOCK_TICKS)
    assert total == pytest.approx(1000 / CLOCK_TICKS)


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() -> None:
    assert process_times(stat_line(42, "kube-apiserver", 41, 300, 100)) == (41, pytest.approx(400 / CLOCK_TICKS))
    assert process_times(stat_line(43, "odd (name) x", 7, 1, 2)) == (7, pytest.approx(3 / CLOCK_TICKS))


def test_each_component_sums_the_members_of_its_process_group_only() -> None:
    stats = [
        stat_line(10, "etcd", 10, 100, 0),
        stat_line(20, "python", 20, 50, 50),
        stat_line(21, "sandbox", 20, 10, 0),  # a child left in the kubelet's group counts for it
        stat_line(30, "sleep", 30, 999, 999),  # a step process in a session of its own: the rest
    ]
    times = component_times(stats, {"etcd": 10, "sim-kubelet": 20, "trainer": 40})
    assert times == {
        "etcd": pytest.approx(100 / CLOCK_TICKS),
        "sim-kubelet": pytest.approx(110 / CLOCK_TICKS),
        "trainer": 0.0,
    }


def test_shares_are_of_the_cores_capacity_and_the_rest_is_what_no_component_used() -> None:
    first = Snapshot(at=0.0, busy=10.0, total=100.0, components={"kube-apiserver": 5.0, "etcd": 1.0})
    last = Snapshot(at=100.0, busy=190.0, total=300.0, components={"kube-apiserver": 85.0, "etcd": 21.0})
    use = cpu_use([first, last], cores=2)
    assert use is not None
    assert use.seconds == 100.0
    assert use.busy_share == pytest.approx(0.9)
    assert use.component_shares == {
        "kube-apiserver": pytest.approx(0.4),
        REST: pytest.approx(0.4),
        "etcd": pytest.approx(0.1),
    }
    assert list(use.component_shares) == ["kube-apiserver", REST, "etcd"]  # largest first


def test_the_busiest_minute_is_found_among_quieter_ones() -> None:
    # 10 s snapshots of a 2-core machine (20 s of capacity each): idle for a minute, then fully busy for one.
    # The API server holds three quarters of the cores in that minute, and a tenth of them over the whole run.
    busy_per_step = [0.0] * 6 + [20.0] * 6 + [0.0] * 6
    snapshots, busy, apiserver = [], 0.0, 0.0
    for step, used in enumerate([0.0, *busy_per_step]):
        busy += used
        apiserver += 0.75 * used
        snapshots.append(
            Snapshot(at=10.0 * step, busy=busy, total=20.0 * step, components={"kube-apiserver": apiserver})
        )
    use = cpu_use(snapshots, cores=2)
    assert use is not None
    assert use.busy_share == pytest.approx(1 / 3)
    assert use.component_shares["kube-apiserver"] == pytest.approx(0.25)
    assert use.busiest_minute_share == pytest.approx(1.0)
    assert use.busiest_minute_starts_s == 60.0
    assert use.busiest_minute_components == {"kube-apiserver": pytest.approx(0.75), REST: pytest.approx(0.25)}


def test_a_run_shorter_than_a_minute_has_its_own_share_as_the_busiest() -> None:
    snapshots = [Snapshot(at=0.0, busy=0.0, total=0.0), Snapshot(at=20.0, busy=10.0, total=40.0)]
    use = cpu_use(snapshots, cores=2)
    assert use is not None
    assert use.busiest_minute_share == pytest.approx(0.25)
    assert use.busiest_minute_components == use.component_shares
    assert cpu_use(snapshots[:1], cores=2) is None


def test_a_snapshot_of_this_machine_reads_the_real_proc_and_counts_this_process_group() -> None:
    # Pytest has used CPU by now, so its own process group has time to find.
    snapshot = take_snapshot({"this test": os.getpgrp()}, at=1.0)
    assert snapshot.total > snapshot.busy > 0
    assert snapshot.components["this test"] > 0
