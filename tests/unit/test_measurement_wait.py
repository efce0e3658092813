"""The run step's wait for a finished workload's measurement (`measurementTimeout`), on an injected clock.

The reference (nvcre-contract.md §3.3, §7.9): after the workload succeeds, missing measurement data is waited
for until `measurementTimeout` (5m by default), then validation fails with `MeasurementTimeout`; nodes are
recorded `ThresholdViolation` only where thresholds were set. The log is served by a fake whose answers the test
scripts read by read; the clock only moves when the step sleeps, so every figure below is exact.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.loading import load_certifications
from nvcre_argo.resolve.category import resolve_certification
from nvcre_argo.results import THRESHOLD_VIOLATION, WORKLOAD_FAILED
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.iteration import IterationResult, measured_iteration
from nvcre_argo.steps.measurement_wait import MeasurementWait, await_measurement
from nvcre_argo.steps.measurements import measure_log

ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
TRAINJOB = "cert-0-g0"
NODES = ["gpu-node-1", "gpu-node-2"]
LAUNCHER_POD = f"{TRAINJOB}-launcher-0-0-x7k2q"
POLL_SECONDS = 10.0
THRESHOLD = {"busBandwidthGBps": "value >= 100"}

# What nccl-tests prints before its result table (the column header, rows and footer come later).
PREAMBLE = """\
# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf_mpi
# Using devices
#  Rank  0 Group  0 Pid   4000 on gpu-node-1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
"""
RESULTS = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  8589934592    2147483648     float     sum      -1  42949.7  200.00  375.00      0  43383.5  198.00  371.25      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 373.13
"""
CORRUPTED = RESULTS.replace("371.25      0", "371.25      4").replace("values : 0 OK", "values : 4 FAILED")


@dataclass
class Cluster:
    """The step's time and the launcher's log: `sleep` advances `now`; each read takes the next scripted
    answer (a log text, or an ApiError), the last one again once the script is used up, and `read_seconds`."""

    answers: Sequence[str | ApiError]
    read_seconds: float = 0.0
    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)
    reads_at: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def read_log(self, namespace: str, pod: str, *, container: str | None = None, limit_bytes: int = 65536) -> str:
        del namespace, container, limit_bytes
        assert pod == LAUNCHER_POD, "the launcher prints nccl-tests' results"
        self.reads_at.append(self.now)
        answer = self.answers[min(len(self.reads_at) - 1, len(self.answers) - 1)]
        self.now += self.read_seconds
        if isinstance(answer, ApiError):
            raise answer
        return answer


def context(category: dict[str, Any], **options: Any) -> StepContext:
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "cert"},
        "spec": {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "categories": [category], **options},
    }
    (loaded,) = load_certifications(json.dumps(document), "t.yaml")
    resolved, errors = resolve_certification(loaded.certification.spec, load_catalog())
    assert errors == []
    return StepContext(resolved[0], "cert", "cert-0", "uid-0", "nvcre")


def pods(*, workers: int) -> list[dict[str, Any]]:
    """The pods of the finished TrainJob: MPI workers and the launcher."""
    role = "jobset.sigs.k8s.io/replicatedjob-name"
    ranks = [{"metadata": {"name": f"{TRAINJOB}-node-0-{index}", "labels": {role: "node"}}} for index in range(workers)]
    return [*ranks, {"metadata": {"name": LAUNCHER_POD, "labels": {role: "launcher"}}}]


def wait_for(cluster: Cluster, step: StepContext, lines: list[str] | None = None) -> MeasurementWait:
    """The wait over the TrainJob's pods; where the script makes the log unreadable, the launcher alone (an
    unreadable log is skipped for the next pod's, and the workers' logs hold nothing to measure anyway)."""
    unreadable = any(isinstance(answer, ApiError) for answer in cluster.answers)
    return await_measurement(
        cast(KubeClient, cluster),
        step,
        pods(workers=0 if unreadable else 2),
        measure_log,
        clock=cluster.clock,
        sleep=cluster.sleep,
        poll_seconds=POLL_SECONDS,
        report=(lines if lines is not None else []).append,
    )


def judged(cluster: Cluster, step: StepContext) -> tuple[MeasurementWait, IterationResult]:
    wait = wait_for(cluster, step)
    return wait, measured_iteration(step, iteration=0, name=TRAINJOB, nodes=NODES, wait=wait)


# --- the measurement appears ------------------------------------------------------------------------------------


def test_a_measurement_that_appears_on_the_third_read_passes_after_two_polls() -> None:
    cluster = Cluster([PREAMBLE, PREAMBLE, PREAMBLE + RESULTS])
    lines: list[str] = []
    step = context(ALL_REDUCE, measurementTimeout="1m")

    wait = wait_for(cluster, step, lines)
    result = measured_iteration(step, iteration=0, name=TRAINJOB, nodes=NODES, wait=wait)

    assert (wait.reads, wait.waited_seconds, cluster.sleeps) == (3, 20.0, [10.0, 10.0])
    assert (result.succeeded, result.failed_nodes) == (True, [])
    assert result.measurements == {"algBandwidthGBps": 200.0, "busBandwidthGBps": 375.0}
    assert result.message == f"TrainJob/{TRAINJOB} completed (algBandwidthGBps=200, busBandwidthGBps=375)"
    assert lines == [  # said once, when the wait starts
        f"no nccl-bandwidth measurement yet (no measurement lines in the log of pod {LAUNCHER_POD}); reading the "
        "log again every 10s for up to measurementTimeout 1m"
    ]


def test_a_measurement_there_at_once_is_read_once_with_no_wait() -> None:
    cluster = Cluster([PREAMBLE + RESULTS])
    wait, result = judged(cluster, context(ALL_REDUCE))
    assert (wait.reads, wait.waited_seconds, cluster.sleeps, result.succeeded) == (1, 0.0, [], True)


def test_a_measurement_read_exactly_at_the_timeout_still_counts() -> None:
    cluster = Cluster([PREAMBLE, PREAMBLE, PREAMBLE + RESULTS])
    wait, result = judged(cluster, context(ALL_REDUCE, measurementTimeout="20s"))
    assert (wait.reads, wait.waited_seconds, result.succeeded) == (3, 20.0, True)


def test_a_log_unreadable_at_first_is_read_again_and_measured() -> None:
    cluster = Cluster([ApiError(500, "Internal Server Error", "kubelet unreachable"), PREAMBLE + RESULTS])
    wait, result = judged(cluster, context(ALL_REDUCE, measurementTimeout="30s"))
    assert (wait.reads, result.succeeded) == (2, True)


def test_thresholds_are_judged_on_the_measurement_once_it_appeared() -> None:
    cluster = Cluster([PREAMBLE, PREAMBLE + RESULTS])
    _, result = judged(cluster, context(ALL_REDUCE, thresholds={"busBandwidthGBps": "value >= 400"}))
    assert not result.succeeded
    assert [(node["name"], node["reason"]) for node in result.failed_nodes] == [
        ("gpu-node-1", THRESHOLD_VIOLATION),
        ("gpu-node-2", THRESHOLD_VIOLATION),
    ]
    assert result.message == 'Threshold "busBandwidthGBps" violated: measured 375.0000, expression: value >= 400'


def test_corrupted_data_ends_the_wait_at_once_and_fails_the_workload() -> None:
    cluster = Cluster([PREAMBLE + CORRUPTED])
    wait, result = judged(cluster, context(ALL_REDUCE))
    assert (wait.reads, cluster.sleeps) == (1, [])
    assert {node["reason"] for node in result.failed_nodes} == {WORKLOAD_FAILED}


# --- it never appears: MeasurementTimeout ------------------------------------------------------------------------


def test_a_measurement_that_never_appears_times_out_after_exactly_the_timeout_blaming_no_node() -> None:
    cluster = Cluster([PREAMBLE])
    wait, result = judged(cluster, context(ALL_REDUCE, measurementTimeout="25s"))

    # Reads at 0, 10, 20 and 25 s: the last sleep is cut to what is left, so the wait ends at the timeout.
    assert [at - cluster.reads_at[0] for at in cluster.reads_at] == [0, 10, 20, 25]
    assert (wait.reads, wait.waited_seconds, cluster.sleeps) == (4, 25.0, [10.0, 10.0, 5.0])
    assert not result.succeeded
    assert result.failed_nodes == [], "without thresholds nothing was violated"
    assert result.message == (
        f"MeasurementTimeout: TrainJob/{TRAINJOB} completed but no nccl-bandwidth measurement appeared within "
        f"measurementTimeout 25s (waited 25s, 4 read(s) of the log): no measurement lines in the log of pod "
        f"{LAUNCHER_POD}"
    )


def test_with_thresholds_a_measurement_that_never_appears_blames_every_node_with_threshold_violation() -> None:
    cluster = Cluster([PREAMBLE])
    wait, result = judged(cluster, context(ALL_REDUCE, measurementTimeout="20s", thresholds=THRESHOLD))

    assert (wait.reads, wait.waited_seconds) == (3, 20.0)
    assert result.message.startswith("MeasurementTimeout: ")
    assert result.message.endswith('; missing measurement for threshold "busBandwidthGBps"')
    assert result.failed_nodes == [
        {"name": node, "reason": THRESHOLD_VIOLATION, "message": result.message} for node in NODES
    ]


def test_a_log_that_never_can_be_read_times_out_saying_so() -> None:
    cluster = Cluster([ApiError(500, "Internal Server Error", "kubelet unreachable")])
    _, result = judged(cluster, context(ALL_REDUCE, measurementTimeout="10s"))
    assert result.message.startswith("MeasurementTimeout: ")
    assert result.message.endswith(
        f"(waited 10s, 2 read(s) of the log): the log of pod {LAUNCHER_POD} cannot be read (500 Internal Server Error)"
    )


def test_the_default_wait_is_the_reference_s_5_minutes() -> None:
    cluster = Cluster([PREAMBLE])
    wait, result = judged(cluster, context(ALL_REDUCE))
    assert (wait.waited_seconds, wait.reads, sum(cluster.sleeps)) == (300.0, 31, 300.0)
    assert "within measurementTimeout 5m (waited 300s, 31 read(s)" in result.message


@pytest.mark.parametrize("read_seconds", [0.5, 3.0])
def test_slow_reads_never_stretch_a_sleep_past_the_timeout(read_seconds: float) -> None:
    cluster = Cluster([PREAMBLE], read_seconds=read_seconds)
    wait, _ = judged(cluster, context(ALL_REDUCE, measurementTimeout="25s"))
    started = cluster.reads_at[0]
    assert all(at - started <= 25 for at in cluster.reads_at), "no read starts after the timeout"
    assert cluster.reads_at[-1] - started == 25
    assert wait.waited_seconds == 25 + read_seconds


def test_a_measurement_waits_for_every_thresholded_value_not_just_any_value() -> None:
    """A threshold on a value the log has not given yet keeps the wait going even when other values are there
    (Megatron's log gives step time and TFLOP/s before the goodput a threshold may be on)."""
    step = context(NEMOTRON, measurementTimeout="20s", thresholds={"goodputRatio": "value >= 0.5"})
    cluster = Cluster(["training log"])
    partial = {"avgStepTimeSec": 2.0, "avgTFLOPsPerGPU": 400.0}
    wait = await_measurement(
        cast(KubeClient, cluster),
        step,
        [{"metadata": {"name": LAUNCHER_POD, "labels": {}}}],
        lambda _context, _log: (dict(partial), ['missing measurement for threshold "goodputRatio"']),
        clock=cluster.clock,
        sleep=cluster.sleep,
        poll_seconds=POLL_SECONDS,
        report=lambda _line: None,
    )
    assert (wait.reads, wait.waited_seconds, wait.reading.missing) == (3, 20.0, ("goodputRatio",))
    assert wait.reading.why_unmeasured() == f"no value for goodputRatio in the log of pod {LAUNCHER_POD}"
    result = measured_iteration(step, iteration=0, name=TRAINJOB, nodes=NODES, wait=wait)
    assert result.message.startswith("MeasurementTimeout: ")
    assert {node["reason"] for node in result.failed_nodes} == {THRESHOLD_VIOLATION}
    assert result.measurements == partial
