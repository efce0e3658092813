"""What a group's run step shows in the Argo UI: its measurements as an output, its failure as one line.

Argo shows a failed step's termination message as the node's message ("main: Error (exit code 1): ..."), and
a step's output parameters in its side panel, so an operator sees which nodes failed and why, and the bus
bandwidth or goodput measured, without opening a log or a ConfigMap. Both are bounded: a full-scale group can
fail thousands of nodes at once. A step runs its group and, after it, the overflow group it hosts, if any:
what it shows covers both, each named.
"""

from __future__ import annotations

from collections.abc import Sequence

from nvcre_argo.steps.running import GroupResult

NODES_SHOWN = 5


def measurement_text(result: GroupResult) -> str:
    """`busBandwidthGBps=452.1` (each iteration's figures, in order, when the group ran several), or ``""``;
    a checkpointing workload that was restarted says how often and the work lost (`1 checkpoint restart, 12s
    of work lost`), since its goodput is charged for them."""
    parts = []
    for iteration in result.iterations:
        figures = ", ".join(f"{key}={value:.4g}" for key, value in sorted(iteration.measurements.items()))
        if iteration.restarts:
            lost = sum(restart["lost_work_seconds"] for restart in iteration.restarts)
            restarts = f"{len(iteration.restarts)} checkpoint restart(s), {lost:.0f}s of work lost"
            figures = f"{figures} ({restarts})" if figures else restarts
        if figures:
            parts.append(figures if len(result.iterations) == 1 else f"#{iteration.iteration + 1}: {figures}")
    return "; ".join(parts)


def measurements_text(results: Sequence[GroupResult]) -> str:
    """A step's measurements: its group's alone (`busBandwidthGBps=452.1`), or each group's, named, when it
    also ran a hosted overflow group (`g1: busBandwidthGBps=452.1; g2-overflow: ...`)."""
    if len(results) == 1:
        return measurement_text(results[0])
    return "; ".join(f"{result.group}: {text}" for result in results if (text := measurement_text(result)))


def failed_node_count(results: Sequence[GroupResult]) -> int:
    return len(
        {node["name"] for result in results for iteration in result.iterations for node in iteration.failed_nodes}
    )


def isolation_job_summary(result: GroupResult, *, round_number: int, stage: str) -> str:
    """A failed job of a diagnose round: it blames no node itself (a group fails for any one bad member, and
    which one is what the next rounds find out), so it says what the job was and why it failed."""
    return (
        f"isolation job failed (round {round_number}, {stage}, {len(result.nodes)} nodes; "
        f"the next rounds find which node or link is at fault): {_first_failure(result)}"
    )


def confirmation_job_summary(result: GroupResult, *, round_number: int) -> str:
    """A failed confirmation job (`plan.confirmation`): one suspect with known-healthy partners. The record
    step convicts the suspect, so the job itself blames no node."""
    return (
        f"confirmation job failed (round {round_number}, {len(result.nodes)} nodes: one suspect with known-healthy "
        f"partners, convicted by the record step): {_first_failure(result)}"
    )


def _first_failure(result: GroupResult) -> str:
    failed = next((iteration for iteration in result.iterations if not iteration.succeeded), None)
    return failed.message.splitlines()[0] if failed is not None and failed.message else "the group did not pass"


def failure_summary(results: Sequence[GroupResult]) -> str:
    """`2 node(s) failed: gpu-node-3 (WorkloadFailed), ...: <why>` for the first failed iteration of each failed
    group (named when the step ran more than one); a group that failed without blaming a node (its
    measurement unreadable) says so."""
    failed = [result for result in results if not result.succeeded]
    if len(results) == 1:
        return _group_failure(results[0])
    return "; ".join(f"{result.group}: {_group_failure(result)}" for result in failed) or "the group did not pass"


def _group_failure(result: GroupResult) -> str:
    failed = next((iteration for iteration in result.iterations if not iteration.succeeded), None)
    if failed is None:
        return "the group did not pass"
    why = failed.message.splitlines()[0] if failed.message else "no reason given"
    if not failed.failed_nodes:
        return f"no node blamed: {why}"
    nodes = sorted({(node["name"], node["reason"]) for node in failed.failed_nodes})
    shown = ", ".join(f"{name} ({reason})" for name, reason in nodes[:NODES_SHOWN])
    more = f" and {len(nodes) - NODES_SHOWN} more" if len(nodes) > NODES_SHOWN else ""
    return f"{len(nodes)} node(s) failed: {shown}{more}: {why}"
