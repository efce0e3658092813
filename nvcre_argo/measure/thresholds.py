"""Measured values under the threshold registry's keys, and the CEL verdict of each threshold over them.

The registry is closed (`busBandwidthGBps`, `algBandwidthGBps`, `goodputRatio`, `avgTFLOPsPerGPU`,
`avgStepTimeSec`): the compiler rejects any other key, so every threshold reaching here names a value one of
the parsers can produce. A threshold whose value the log did not give is reported as missing, never as
passed: an unmeasured run is not a certified one. Verdicts come in key order so messages are stable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from nvcre_argo.cel import CelError, evaluate_threshold
from nvcre_argo.measure.megatron import MegatronResult
from nvcre_argo.measure.nccl import NcclResult

BUS_BANDWIDTH = "busBandwidthGBps"
ALG_BANDWIDTH = "algBandwidthGBps"
GOODPUT_RATIO = "goodputRatio"
AVG_TFLOPS_PER_GPU = "avgTFLOPsPerGPU"
AVG_STEP_TIME = "avgStepTimeSec"

ViolationKind = Literal["violated", "missing", "invalid"]


@dataclass(frozen=True)
class Violation:
    """A threshold that did not pass: `violated` (the expression was false), `missing` (no measured value),
    or `invalid` (the expression failed to evaluate)."""

    key: str
    kind: ViolationKind
    expression: str
    value: float | None
    message: str


def measured_values(*, nccl: NcclResult | None = None, megatron: MegatronResult | None = None) -> dict[str, float]:
    """The registry keys the logs gave a value for (a value the log lacks is absent, not zero)."""
    candidates: dict[str, float | None] = {}
    if nccl is not None:
        candidates[BUS_BANDWIDTH] = nccl.bus_bandwidth_gbps
        candidates[ALG_BANDWIDTH] = nccl.alg_bandwidth_gbps
    if megatron is not None:
        candidates[GOODPUT_RATIO] = megatron.goodput_ratio
        candidates[AVG_TFLOPS_PER_GPU] = megatron.avg_tflops_per_gpu
        candidates[AVG_STEP_TIME] = megatron.avg_step_time_sec
    return {key: value for key, value in sorted(candidates.items()) if value is not None}


def evaluate_thresholds(thresholds: Mapping[str, str], values: Mapping[str, float]) -> list[Violation]:
    """Every threshold that did not pass, in key order; an empty list means all passed."""
    violations = []
    for key, expression in sorted(thresholds.items()):
        value = values.get(key)
        if value is None:
            violations.append(Violation(key, "missing", expression, None, f'missing measurement for threshold "{key}"'))
            continue
        try:
            passed = evaluate_threshold(expression, float(value))
        except CelError as error:
            violations.append(Violation(key, "invalid", expression, value, f'Threshold "{key}": {error}'))
            continue
        if not passed:
            message = f'Threshold "{key}" violated: measured {value:.4f}, expression: {expression}'
            violations.append(Violation(key, "violated", expression, value, message))
    return violations
