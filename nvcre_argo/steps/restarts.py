"""Checkpoint restart of a failed training workload (`enableCheckpoint`, `maxRestarts`; nvcre-contract.md §7.10).

When a checkpointing workload fails (its TrainJob reports Failed: a rank crashed), restarts are left, and its
log showed at least one completed checkpoint, the run step deletes the failed TrainJob and creates the next
attempt (`<trainjob>-r1`, `-r2`, ...: same labels, so the same queue, and the same `CHECKPOINT_DIR`), which
resumes from the checkpoint on the category's PVC. Without a checkpoint the failure is final: a restart would
only repeat the same work. Failures the health check, a stall or a timeout ended are never restarted (the
reference restarts only workload failures; a sick node is not retried in place).

What a restart costs is recorded for the report and folded into goodput, with the reference's terms:
- lost work (t_ch): running time between the last checkpoint the step saw and the failure;
- reschedule (t_re): from the failure to a pod of the next workload running (deletion, queueing, scheduling,
  image pull);
- resume (t_rm): from then to its first training iteration, counted running time (loading the checkpoint).
goodput = measured goodput of the final workload x (t_w - t_ch - t_rm - t_re) / (t_w - t_re), where t_w is
the wall time from the first workload running to the last one ending. The measured ratio covers only the
final workload's own log (warm-up, saves, stalls); the factor charges the time the restarts wasted.
Times are the step's observations, so each is exact to within one poll interval.

The restarts so far travel with the newest TrainJob as an annotation, so a retried step pod picks up the
newest attempt and its history instead of starting the test over. Everything here is pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from nvcre_argo.measure.thresholds import GOODPUT_RATIO, evaluate_thresholds
from nvcre_argo.names import GROUP
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.measurement_wait import Measure

RESTARTS_ANNOTATION = f"{GROUP}/restarts"
# A restart record keeps this much of the failure it recovered from: enough to say what happened.
FAILURE_LIMIT = 300


@dataclass(frozen=True)
class CheckpointSeen:
    """The newest completed checkpoint the step saw in a workload's log, and when (counted running seconds)."""

    iteration: int
    seen_at: float


@dataclass(frozen=True)
class Restart:
    """One restart: the workload that failed, what it had saved, and what the restart cost."""

    trainjob: str
    failure: str
    checkpoint_iteration: int
    lost_work_seconds: float
    reschedule_seconds: float | None = None  # None until the next workload was seen running
    resume_seconds: float | None = None  # None until its first iteration was seen
    resumed_from: int | None = None  # the iteration the next workload loaded; None: it started afresh

    def describe(self) -> str:
        resumed = (
            f"resumed from iteration {self.resumed_from}"
            if self.resumed_from is not None
            else "loaded no checkpoint (started over)"
        )
        return (
            f"TrainJob/{self.trainjob} failed after saving iteration {self.checkpoint_iteration} "
            f"({self.lost_work_seconds:.0f}s of work lost); the next workload {resumed}"
        )


def may_restart(*, restarts_used: int, max_restarts: int, checkpoint: CheckpointSeen | None) -> bool:
    """Whether a failed workload is restarted: restarts left and something to resume from."""
    return checkpoint is not None and restarts_used < max_restarts


def restart_record(trainjob: str, failure: str, checkpoint: CheckpointSeen, failed_at: float) -> Restart:
    """The record of a restart decided now: `failed_at` is the counted running seconds at the failure."""
    return Restart(
        trainjob=trainjob,
        failure=failure[:FAILURE_LIMIT],
        checkpoint_iteration=checkpoint.iteration,
        lost_work_seconds=max(0.0, failed_at - checkpoint.seen_at),
    )


def completed_restart(
    restart: Restart, *, reschedule_seconds: float | None, resume_seconds: float | None, resumed_from: int | None
) -> Restart:
    """The record once the next workload has been followed (whatever it got to see)."""
    return replace(
        restart, reschedule_seconds=reschedule_seconds, resume_seconds=resume_seconds, resumed_from=resumed_from
    )


def goodput_factor(restarts: Sequence[Restart], wall_seconds: float) -> float:
    """(t_w - t_ch - t_rm - t_re) / (t_w - t_re) over an iteration's restarts, in 0..1 (1 without any)."""
    if not restarts:
        return 1.0
    lost = sum(item.lost_work_seconds for item in restarts)
    reschedule = sum(item.reschedule_seconds or 0.0 for item in restarts)
    resume = sum(item.resume_seconds or 0.0 for item in restarts)
    usable = wall_seconds - reschedule
    if usable <= 0:
        return 0.0
    return min(1.0, max(0.0, (usable - lost - resume) / usable))


def restart_aware(measure: Measure, factor: float) -> Measure:
    """The category's measurement with the final workload's goodput scaled by `factor` (`goodput_factor`),
    and every threshold judged on that: a run that lost half its time to restarts does not pass a goodput
    threshold on the strength of its last, undisturbed workload."""

    def measured(context: StepContext, text: str) -> tuple[dict[str, float], list[str]]:
        values, violations = measure(context, text)
        if GOODPUT_RATIO not in values:
            return values, violations
        values = {**values, GOODPUT_RATIO: values[GOODPUT_RATIO] * factor}
        return values, [item.message for item in evaluate_thresholds(context.category.thresholds, values)]

    return measured


def encode_restarts(restarts: Sequence[Restart]) -> dict[str, str]:
    """The annotation the next TrainJob carries (empty when there is nothing to carry)."""
    if not restarts:
        return {}
    return {RESTARTS_ANNOTATION: json.dumps([asdict(item) for item in restarts], sort_keys=True)}


def decode_restarts(trainjob: Mapping[str, Any]) -> list[Restart]:
    """The restarts a TrainJob's annotation carries; an unreadable one counts as none (the test goes on)."""
    text = ((trainjob.get("metadata") or {}).get("annotations") or {}).get(RESTARTS_ANNOTATION)
    if not text:
        return []
    try:
        return [Restart(**item) for item in json.loads(text)]
    except (TypeError, ValueError):
        return []
