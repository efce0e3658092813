"""What one test of a group ended with (pure): passed with its measurements, or failed with each blamed node
and its reason. The run step's verdicts (`steps.following`) and its records of them (`steps.running`) share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nvcre_argo.results import THRESHOLD_VIOLATION, WORKLOAD_FAILED
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.measurement_wait import MeasurementWait, timeout_message


@dataclass
class IterationResult:
    """One test (iteration) of a group: its TrainJob, whether it passed, and what a failure blames."""

    iteration: int
    trainjob: str
    succeeded: bool
    message: str
    failed_nodes: list[dict[str, str]] = field(default_factory=list)  # {name, reason, message}
    measurements: dict[str, float] = field(default_factory=dict)
    restarts: list[dict[str, Any]] = field(default_factory=list)  # `steps.restarts.Restart`s, as dicts
    # The workload never started: the controllers created none of its pods in time. Says nothing about the
    # nodes, so fault isolation plans the test again instead of suspecting them (`steps.diagnosing`).
    never_ran: bool = False


def measured_iteration(
    context: StepContext, *, iteration: int, name: str, nodes: Sequence[str], wait: MeasurementWait
) -> IterationResult:
    """A completed workload's iteration, judged by what the wait for its measurement found (pure).

    Corrupted data fails the workload whatever its bandwidth (nccl-tests exits 1 for it; a wrapper may not).
    No measurement within `measurementTimeout` does not pass: the nodes are blamed (`ThresholdViolation`) only
    when the category set thresholds, which an unmeasured run cannot meet; without thresholds nothing was
    violated, so no node is blamed and they stay uncertified (nvcre-contract.md §7.9)."""
    reading = wait.reading
    if reading.corrupted:
        return failed_iteration(
            iteration, name, f"TrainJob/{name} completed but {reading.corrupted}", nodes, WORKLOAD_FAILED
        )
    if not reading.settled:
        message = timeout_message(context, name, wait)
        blamed = nodes if context.category.thresholds else []
        return replace(
            failed_iteration(iteration, name, message, blamed, THRESHOLD_VIOLATION), measurements=reading.values
        )
    if reading.violations:
        message = "; ".join(reading.violations)
        return replace(
            failed_iteration(iteration, name, message, nodes, THRESHOLD_VIOLATION), measurements=reading.values
        )
    figures = ", ".join(f"{key}={value:.4g}" for key, value in sorted(reading.values.items()))
    return IterationResult(iteration, name, True, f"TrainJob/{name} completed ({figures})", [], reading.values)


def failed_iteration(iteration: int, name: str, message: str, nodes: Sequence[str], reason: str) -> IterationResult:
    """A failed iteration blaming `nodes` (none: nobody is blamed, nobody certified) for `reason`."""
    failed = [{"name": node, "reason": reason, "message": message} for node in sorted(nodes)]
    return IterationResult(iteration, name, False, message, failed)
