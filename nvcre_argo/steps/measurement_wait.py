"""After a workload succeeds: read its measurement from its log, waiting up to `measurementTimeout` for it.

Why wait: a workload's last lines can reach its log a little after the TrainJob reports Complete (a kubelet
flushing, a log collector catching up), and a log read can fail for a moment, so one read straight after the
end would fail good nodes. The reference waits for the measurement data up to `measurementTimeout` (5m by
default) and then fails validation with `MeasurementTimeout` (nvcre-contract.md §3.3, §7.9). Here the run
step re-reads the log every poll until the measurement is there or the time is up; both the clock and the
sleep are the step's injectable ones, so tests control time.

"The measurement is there" means a value for every threshold the category checks, or, without thresholds,
any value at all. Corrupted data (nccl-tests' data check) ends the wait at once: no later line can undo it.
A category whose verdict is the exit code never reaches here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.measure.nccl import data_check_failure
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.workload import is_mpi_launcher

log = logging.getLogger(__name__)

MEASUREMENT_TIMEOUT = "MeasurementTimeout"
LOG_READ_BYTES = 1 << 20

# A callable that turns a finished workload's log into measurements and threshold verdicts.
Measure = Callable[[StepContext, str], tuple[dict[str, float], list[str]]]


@dataclass(frozen=True)
class PrimaryLog:
    """The log that carries the results, or why there is none: `pod` is None when no log could be read."""

    text: str
    pod: str | None
    problem: str = ""


@dataclass(frozen=True)
class Reading:
    """What one read of the log measured."""

    values: dict[str, float]
    violations: list[str]
    missing: tuple[str, ...]  # threshold keys the log gave no value for
    corrupted: str | None  # nccl-tests' data check failure, if the log shows one
    source: PrimaryLog

    @property
    def settled(self) -> bool:
        """Nothing more to wait for: corrupted data, or a value for everything the category checks."""
        return self.corrupted is not None or (bool(self.values) and not self.missing)

    def why_unmeasured(self) -> str:
        """Why this read is not the measurement: the log could not be read, or it has no measurement lines."""
        if self.source.pod is None:
            return self.source.problem
        if not self.values:
            return f"no measurement lines in the log of pod {self.source.pod}"
        return f"no value for {', '.join(self.missing)} in the log of pod {self.source.pod}"


@dataclass(frozen=True)
class MeasurementWait:
    """The last reading, how long the step waited after the first one, and how many reads it made."""

    reading: Reading
    waited_seconds: float
    reads: int


def take_reading(context: StepContext, source: PrimaryLog, measure: Measure) -> Reading:
    """Measure one read of the log (pure: the log is already read)."""
    corrupted = data_check_failure(source.text) if context.category.entry.measurement == "nccl-bandwidth" else None
    values, violations = measure(context, source.text)
    missing = tuple(sorted(key for key in context.category.thresholds if key not in values))
    return Reading(values, violations, missing, corrupted, source)


def await_measurement(
    kube: KubeClient,
    context: StepContext,
    pods: Sequence[dict[str, Any]],
    measure: Measure,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    poll_seconds: float,
    report: Callable[[str], None],
) -> MeasurementWait:
    """Read the log until the measurement is settled or `measurementTimeout` has passed since the first read.

    The last sleep is cut to what is left, so the final read happens exactly at the timeout and the wait is
    never longer than the user allowed."""
    limit = context.category.measurement_wait_seconds
    started = clock()
    reads = 0
    while True:
        reading = take_reading(context, read_primary_log(kube, context, pods), measure)
        reads += 1
        waited = clock() - started
        if reading.settled or waited >= limit:
            return MeasurementWait(reading, waited, reads)
        if reads == 1:
            report(
                f"no {context.category.entry.measurement} measurement yet ({reading.why_unmeasured()}); reading "
                f"the log again every {poll_seconds:g}s for up to measurementTimeout "
                f"{context.category.measurement_timeout}"
            )
        sleep(min(poll_seconds, limit - waited))


def timeout_message(context: StepContext, trainjob: str, wait: MeasurementWait) -> str:
    """`MeasurementTimeout: ...`: how long the step waited, and why nothing could be measured."""
    category = context.category
    message = (
        f"{MEASUREMENT_TIMEOUT}: TrainJob/{trainjob} completed but no {category.entry.measurement} measurement "
        f"appeared within measurementTimeout {category.measurement_timeout} (waited {wait.waited_seconds:.0f}s, "
        f"{wait.reads} read(s) of the log): {wait.reading.why_unmeasured()}"
    )
    if category.thresholds:
        message += "; " + "; ".join(wait.reading.violations)
    return message


def read_primary_log(kube: KubeClient, context: StepContext, pods: Sequence[dict[str, Any]]) -> PrimaryLog:
    """The log of the pod that prints the results: the MPI launcher (nccl-tests prints there); for training,
    the last node (Megatron-LM logs from the last rank). Pods whose log cannot be read are skipped."""
    last_rank_first = context.category.entry.measurement == "megatron-goodput"
    problems = []
    for pod in sorted(pods, key=lambda pod: _log_priority(pod, last_rank_first)):
        pod_name = pod["metadata"]["name"]
        try:
            return PrimaryLog(kube.read_log(context.namespace, pod_name, limit_bytes=LOG_READ_BYTES), pod_name)
        except ApiError as error:
            log.warning("cannot read the log of pod %s: %s", pod_name, error)
            problems.append(f"the log of pod {pod_name} cannot be read ({error.status} {error.reason})")
    return PrimaryLog("", None, "; ".join(problems) or "the workload left no pod whose log could be read")


def _log_priority(pod: dict[str, Any], last_rank_first: bool) -> tuple[bool, int, str]:
    labels = pod.get("metadata", {}).get("labels", {})
    annotations = pod.get("metadata", {}).get("annotations", {})
    index = int(
        annotations.get(
            "batch.kubernetes.io/job-completion-index", labels.get("batch.kubernetes.io/job-completion-index", 0)
        )
        or 0
    )
    return (not is_mpi_launcher(pod), -index if last_rank_first else index, pod["metadata"]["name"])
