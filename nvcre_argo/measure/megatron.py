"""Parse Megatron-LM `training_log` lines into per-interval records and the training summary.

Megatron prints one line every `--log-interval` iterations (from the last rank, `print_rank_last`):

    [2026-01-12 10:00:41.123456] iteration       20/      50 | consumed samples: ... |
    elapsed time per iteration (ms): 2010.4 | throughput per GPU (TFLOP/s/GPU): 402.3 | learning rate: ... |

`elapsed time per iteration (ms)` is the average over the interval since the previous line (Megatron's
`interval-time` timer divided by the iterations in it); the TFLOP/s figure is there only with
`--log-throughput` (AMD's fork prints `compute per GPU (TFLOP/s/GPU): X (avg Y)` instead, used when the
first is absent). The timestamp has microseconds in recent versions and whole seconds in older ones.

Summary, over the steady-state intervals only: the first logged interval is warm-up (initialisation,
compilation, first allocations) and is excluded, as is the first interval after a restart (a line whose
iteration does not exceed the previous one starts a new run segment):
- `avg_step_time_sec`: mean seconds per iteration, each interval weighted by its number of iterations;
- `avg_tflops_per_gpu`: mean TFLOP/s per GPU weighted by each interval's duration (total work / total time);
- `goodput_ratio`: the part of the wall-clock time between the first and the last logged line that Megatron
  spent in steady-state training intervals (their elapsed time summed), 0..1. Megatron stops its interval
  timer around checkpoint saves and evaluation, so time lost to those, to stalls, restarts and warm-up after
  restarts lowers the ratio. It is not the reference's checkpoint-aware formula (that needs restart and
  checkpoint events the log does not carry); with whole-second timestamps it is accurate to about one second
  over the measured span, so it is capped at 1.0.
Each is None when the log does not give what it needs (no steady interval, no throughput, no timestamps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_TIMESTAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
ELAPSED_LABEL = "elapsed time per iteration (ms)"
TFLOPS_LABELS = ("throughput per GPU (TFLOP/s/GPU)", "compute per GPU (TFLOP/s/GPU)")
MS_PER_SECOND = 1000.0


@dataclass(frozen=True)
class MegatronIteration:
    """One `training_log` line: the interval that ended at `iteration`."""

    iteration: int
    train_iters: int
    elapsed_ms: float
    tflops_per_gpu: float | None
    timestamp: datetime | None


@dataclass(frozen=True)
class _Interval:
    record: MegatronIteration
    iterations: int  # how many iterations the record's interval covers

    @property
    def seconds(self) -> float:
        return self.record.elapsed_ms * self.iterations / MS_PER_SECOND


@dataclass(frozen=True)
class MegatronResult:
    records: tuple[MegatronIteration, ...]

    def _steady(self) -> list[_Interval]:
        """Every interval except the first of each run segment (warm-up)."""
        steady = []
        for previous, record in zip(self.records, self.records[1:], strict=False):
            if record.iteration > previous.iteration:
                steady.append(_Interval(record, record.iteration - previous.iteration))
        return steady

    @property
    def avg_step_time_sec(self) -> float | None:
        steady = self._steady()
        iterations = sum(item.iterations for item in steady)
        return sum(item.seconds for item in steady) / iterations if iterations else None

    @property
    def avg_tflops_per_gpu(self) -> float | None:
        timed = [item for item in self._steady() if item.record.tflops_per_gpu is not None]
        seconds = sum(item.seconds for item in timed)
        if not seconds:
            return None
        return sum((item.record.tflops_per_gpu or 0.0) * item.seconds for item in timed) / seconds

    @property
    def goodput_ratio(self) -> float | None:
        stamped = [record.timestamp for record in self.records if record.timestamp is not None]
        steady = self._steady()
        if len(stamped) != len(self.records) or not steady:
            return None
        wall = (stamped[-1] - stamped[0]).total_seconds()
        if wall <= 0:
            return None
        return min(1.0, sum(item.seconds for item in steady) / wall)

    @property
    def steady_interval_count(self) -> int:
        """How many steady-state lines (intervals after a run segment's warm-up) the log has."""
        return len(self._steady())

    @property
    def log_interval(self) -> int | None:
        """The most iterations one steady line covers (Megatron's `--log-interval`; the last line of a run may
        cover fewer), or None without a steady line."""
        return max((item.iterations for item in self._steady()), default=None)

    @property
    def last_iteration(self) -> int | None:
        return self.records[-1].iteration if self.records else None


def parse_megatron_log(text: str) -> MegatronResult:
    """Every `training_log` line of a Megatron-LM log, in log order; other lines are ignored."""
    records = []
    for line in text.splitlines():
        if (record := parse_training_line(line)) is not None:
            records.append(record)
    return MegatronResult(tuple(records))


def parse_training_line(line: str) -> MegatronIteration | None:
    """One `training_log` line, or None for any other line (or one without the elapsed time)."""
    match = _ITERATION.search(line)
    if match is None:
        return None
    fields = _fields(line[match.end() :])
    elapsed = _first_number(fields.get(ELAPSED_LABEL))
    if elapsed is None:
        return None
    tflops = next((value for label in TFLOPS_LABELS if (value := _first_number(fields.get(label))) is not None), None)
    stamp = _TIMESTAMP.search(line[: match.start()])
    return MegatronIteration(
        iteration=int(match[1]),
        train_iters=int(match[2]),
        elapsed_ms=elapsed,
        tflops_per_gpu=tflops,
        timestamp=datetime.fromisoformat(stamp[1]) if stamp else None,
    )


def _fields(text: str) -> dict[str, str]:
    """`label: value | label: value |` → {label: value}; the label is everything before the last colon."""
    fields = {}
    for part in text.split("|"):
        label, colon, value = part.rpartition(":")
        if colon:
            fields[label.strip()] = value.strip()
    return fields


def _first_number(text: str | None) -> float | None:
    match = _NUMBER.search(text) if text else None
    return float(match[0]) if match else None
