"""From a finished workload's log to measured values and threshold verdicts.

NCCL entries report bus and algorithm bandwidth (the maximum over message sizes); training entries report
goodput, TFLOPS per GPU and step time. Only keys the log actually gave are measured; a threshold on a value
that was not measured is a violation of its own kind, never silently passed.
"""

from __future__ import annotations

from nvcre_argo.measure.megatron import parse_megatron_log
from nvcre_argo.measure.nccl import parse_nccl_log
from nvcre_argo.measure.thresholds import evaluate_thresholds, measured_values
from nvcre_argo.steps.context import StepContext


def measure_log(context: StepContext, log_text: str) -> tuple[dict[str, float], list[str]]:
    """(measured values, violation messages) for the category's measurement kind."""
    kind = context.category.entry.measurement
    if kind == "nccl-bandwidth":
        values = measured_values(nccl=parse_nccl_log(log_text))
    elif kind == "megatron-goodput":
        values = measured_values(megatron=parse_megatron_log(log_text))
    else:
        return {}, []
    violations = evaluate_thresholds(context.category.thresholds, values)
    return values, [violation.message for violation in violations]
