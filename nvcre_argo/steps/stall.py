"""Stall detection for training workloads: a run that stops making progress fails long before `timeoutPerJob`.

Why: a training entry's `timeoutPerJob` is 24h (the catalog's), so a Megatron-LM run that blocks in a
collective, or never reaches its first iteration, would hold a group's GPUs for a day before failing. The
reference fails such a Job `WorkloadStalled` (nvcre-contract.md §7.8), and so does the run step:

- **startup stall**: no `training_log` line within `startupStallTimeoutSeconds` (the category's, else the
  catalog entry's default, 1200 s for the training entries) of the workload's start;
- **training stall**: no new `training_log` line for `STALL_MULTIPLIER` x the average step time x the
  iterations one line covers (Megatron prints one line per `--log-interval` iterations, so that is the
  reference's "scaled by the LogProfile's `logInterval`"). Judged only once the log shows at least
  `MIN_STEADY_INTERVALS` steady lines after the warm-up one; before that there is no step time to scale,
  and `timeoutPerJob` bounds the run, as in the reference.

Both clocks are the run step's counted running time (`steps.workload.Clock.active_seconds`, the one
`timeoutPerJob` uses): time queued or blocked in scheduling is excluded. "When the last line appeared" is
when the run step first saw it (one poll late at most), not the log's timestamps, which are the pod's clock
and may not be comparable with the step's; that can only make a stall look shorter, never fail a run early.

The multiplier is not a Certification option (the seed page has no `stallMultiplier`): it is the reference's
training entries' Job setting, 3. Only entries whose workload prints Megatron-LM iterations are watched
(`ResolvedCategory.startup_stall_seconds` is None for the others): NCCL tests print their result rows only
as each message size finishes, and DCGM prints nothing until its verdict, so neither has a heartbeat whose
absence means a stall; `timeoutPerJob` bounds them.

Everything here is pure except `read_training_log`, the one log read per poll of a running training group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.measure.megatron import MegatronIteration, MegatronResult
from nvcre_argo.steps.context import StepContext

log = logging.getLogger(__name__)

WORKLOAD_STALLED = "WorkloadStalled"
STALL_MULTIPLIER = 3  # the reference's training entries set the Job's stallMultiplier to 3 (nvcre-contract.md §6.3)
MIN_STEADY_INTERVALS = 2  # the reference needs two non-warm-up steps before it judges a training stall
# A poll reads only the log's end: Megatron prints a line per log interval, so the last lines hold the
# newest ones unless something floods the log (then the stall clock runs on, as if no line came).
TAIL_LINES = 200
TAIL_BYTES = 128 << 10
# Reads the end of a running training workload's log from its pods (`read_training_log`, or a test's).
TrainingLog = Callable[[KubeClient, StepContext, Sequence[dict[str, Any]]], str]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass(frozen=True)
class StallLimits:
    """What a category allows: the startup budget and the training-stall multiplier."""

    startup_seconds: int
    multiplier: int = STALL_MULTIPLIER


@dataclass(frozen=True)
class Progress:
    """What the run step has seen of one workload's training so far.

    `last_line` is the newest `training_log` line seen and `seen_at` the counted running time when it was
    first seen; `step_seconds` and `log_interval` are the last steady-state estimates (kept when a later
    read has too few lines to estimate again, e.g. right after a restart)."""

    last_line: MegatronIteration | None = None
    seen_at: float = 0.0
    step_seconds: float | None = None
    log_interval: int | None = None

    def observe(self, result: MegatronResult, active_seconds: float) -> Progress:
        """The progress after one read of the log's end, at `active_seconds` of counted running time."""
        if not result.records or result.records[-1] == self.last_line:
            return self
        step, interval = self.step_seconds, self.log_interval
        if result.steady_interval_count >= MIN_STEADY_INTERVALS:
            step, interval = result.avg_step_time_sec, result.log_interval
        return Progress(result.records[-1], active_seconds, step, interval)

    def stall(self, limits: StallLimits, active_seconds: float, trainjob: str) -> str | None:
        """`WorkloadStalled: ...` when the workload of `trainjob` has stalled by now, else None."""
        if self.last_line is None:
            if active_seconds <= limits.startup_seconds:
                return None
            return (
                f"{WORKLOAD_STALLED}: no training iteration within startupStallTimeoutSeconds "
                f"{limits.startup_seconds} (TrainJob/{trainjob} running for {active_seconds:.0f}s, time queued "
                "or blocked in scheduling not counted)"
            )
        if self.step_seconds is None or self.log_interval is None:
            return None
        window = limits.multiplier * self.step_seconds * self.log_interval
        quiet = active_seconds - self.seen_at
        if quiet <= window:
            return None
        line = self.last_line
        return (
            f"{WORKLOAD_STALLED}: no new iteration for {quiet:.0f}s, more than {limits.multiplier} x the average "
            f"step time {self.step_seconds:.3g}s x {self.log_interval} iteration(s) per log line "
            f"({window:.0f}s); TrainJob/{trainjob} last logged iteration {line.iteration}/{line.train_iters}"
        )


def stall_limits(context: StepContext) -> StallLimits | None:
    """The category's limits, or None when its workload has no iterations to watch."""
    seconds = context.category.startup_stall_seconds
    return None if seconds is None else StallLimits(seconds)


def read_training_log(kube: KubeClient, context: StepContext, pods: Sequence[dict[str, Any]]) -> str:
    """The end of the last rank's log (Megatron-LM prints its `training_log` lines there), or "" while that
    pod has no log to read yet (not scheduled, its image still pulling): no line seen, so no progress."""
    return _read_rank_log(kube, context, pods, last=True)


def read_checkpoint_log(kube: KubeClient, context: StepContext, pods: Sequence[dict[str, Any]]) -> str:
    """The end of the first rank's log: Megatron-LM prints its checkpoint save and load lines from global rank
    0 (`print_rank_0`), the first node's pod, where a multi-node run's last rank never shows them."""
    return _read_rank_log(kube, context, pods, last=False)


def _read_rank_log(kube: KubeClient, context: StepContext, pods: Sequence[dict[str, Any]], *, last: bool) -> str:
    ranks = [
        pod for pod in pods if _labels(pod).get(REPLICATED_JOB_LABEL) in context.category.entry.gpu_replicated_jobs
    ]
    if not ranks:
        return ""
    pick = max if last else min
    chosen = pick(ranks, key=lambda pod: (_completion_index(pod), str(pod.get("metadata", {}).get("name", ""))))
    name = chosen["metadata"]["name"]
    try:
        return kube.read_log(context.namespace, name, tail_lines=TAIL_LINES, limit_bytes=TAIL_BYTES)
    except ApiError as error:
        log.debug("no log of pod %s yet: %s", name, error)
        return ""


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = pod.get("metadata", {}).get("labels") or {}
    return labels


def _completion_index(pod: dict[str, Any]) -> int:
    metadata = pod.get("metadata", {})
    value = (metadata.get("annotations") or {}).get(COMPLETION_INDEX, _labels(pod).get(COMPLETION_INDEX, "0"))
    return int(value) if str(value).isdigit() else 0
