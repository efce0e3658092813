"""The scorecard's printed tables (pure): per fault kind, per kind and category, the crash groups, the runs.

Why separate from the driver: the same verdicts print one table per cluster size and one over every size, and
formatting a table from plain values is easier to read (and to change) away from the cluster code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tests.bench.footprint import object_size_lines, step_memory_text
from tests.bench.scorecard_faults import KIND_NAMES
from tests.bench.scorecard_scoring import CATEGORY_ORDER, NO_CAUSE, CrashGroup, NodeVerdict, Tally, tally

KIND_WIDTH = 17
_SHORT = {"wrong-reason": "W", "missed": "M", "untested": "U", "false-positive": "FP"}


@dataclass(frozen=True)
class RunLine:
    """One run, as the runs table prints it."""

    name: str
    kinds: tuple[str, ...]
    result: str
    expected: str
    seconds: float
    error: str = ""
    category_seconds: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class CostLine:
    """One run's orchestration cost, as the cost lines print it: the largest object of each kind (`LargestObject`s
    as dicts), each step command's peak resident memory, and each category's planning steps' longest time."""

    name: str
    largest_objects: Sequence[Mapping[str, object]]
    step_memory_mib: Mapping[str, float]
    plan_seconds: Sequence[tuple[str, Mapping[str, float]]]  # (category, {template: seconds})


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def kind_table(verdicts: Sequence[NodeVerdict], injected: dict[str, int]) -> list[str]:
    """One row per fault kind, then the totals: how many (node, category) pairs each kind should show in,
    how many were found, reported with the wrong reason, certified or untested, recall, the false positives
    it caused and precision; transient nodes show how often their one failure was reported."""
    header = (
        f"{'kind':<{KIND_WIDTH}} {'nodes':>5} {'expect':>6} {'found':>5} {'wrong':>5} {'missed':>6} {'untest':>6}"
        f" {'recall':>6} {'FP':>4} {'precis':>6}  transient"
    )
    lines = [header, "-" * len(header)]
    for kind in [*(name for name in KIND_NAMES if name in injected), NO_CAUSE]:
        counts = tally(verdicts, kind=kind)
        if kind == NO_CAUSE and not counts["false-positive"]:
            continue
        lines.append(_kind_row(kind, injected.get(kind, 0), counts))
    lines.append("-" * len(header))
    lines.append(_kind_row("total", sum(injected.values()), tally(verdicts)))
    return lines


def _kind_row(kind: str, nodes: int, counts: Tally) -> str:
    once = counts["failed-once"] + counts["passed-once"]
    transient = f"failed once reported {counts['failed-once']}/{once}" if once else ""
    return (
        f"{kind:<{KIND_WIDTH}} {nodes:>5} {counts.expected:>6} {counts.found:>5} {counts['wrong-reason']:>5}"
        f" {counts['missed']:>6} {counts['untested']:>6} {percent(counts.recall):>6}"
        f" {counts['false-positive']:>4} {percent(counts.precision):>6}  {transient}"
    ).rstrip()


def category_cell(counts: Tally) -> str:
    """`found/expected` plus the other outcomes in short: W wrong reason, M missed (certified), U untested,
    FP false positives; `-` when the kind is invisible there and nothing was reported."""
    parts = [f"{counts.found}/{counts.expected}"] if counts.expected else []
    once = counts["failed-once"] + counts["passed-once"]
    if once:
        parts.append(f"once {counts['failed-once']}/{once}")
    parts += [f"{_SHORT[name]}{counts[name]}" for name in _SHORT if counts[name]]
    return " ".join(parts) or "-"


def category_table(
    verdicts: Sequence[NodeVerdict], kinds: Iterable[str], domains: Sequence[str] = CATEGORY_ORDER
) -> list[str]:
    """One row per injected fault kind (in `KIND_NAMES` order), one column per category (in run order)."""
    width = 22
    header = f"{'kind':<{KIND_WIDTH}} " + " ".join(f"{domain:<{width}}" for domain in domains)
    lines = [header.rstrip(), "-" * len(header.rstrip())]
    injected = set(kinds)
    for kind in [*(name for name in KIND_NAMES if name in injected), NO_CAUSE]:
        cells = [category_cell(tally(verdicts, kind=kind, domain=domain)) for domain in domains]
        if kind == NO_CAUSE and all(cell == "-" for cell in cells):
            continue
        lines.append((f"{kind:<{KIND_WIDTH}} " + " ".join(f"{cell:<{width}}" for cell in cells)).rstrip())
    return lines


def crash_table(groups: Iterable[CrashGroup]) -> list[str]:
    """The groups with one crashing node: how many blamed only it, and every one that did not."""
    found = list(groups)
    if not found:
        return ["crash groups: none"]
    attributed = sum(group.attributed for group in found)
    whole = sum(group.whole_group for group in found)
    lines = [
        f"crash groups (one crashing node, healthy groupmates): {len(found)}; only the crashing node blamed: "
        f"{attributed}; whole group blamed: {whole} ({percent(whole / len(found))})"
    ]
    for domain in sorted({group.domain for group in found}):
        mine = [group for group in found if group.domain == domain]
        blamed = sum(group.whole_group for group in mine)
        lines.append(f"  {domain}: {len(mine)} groups, whole group blamed in {blamed} ({percent(blamed / len(mine))})")
    for group in sorted(found, key=lambda item: (item.domain, item.after_seconds)):
        if not group.attributed:
            blamed = ", ".join(group.blamed) or "nobody"
            lines.append(
                f"  {group.domain:<13} {group.kind:<9} {group.node} after {group.after_seconds:>4.1f}s in "
                f"[{', '.join(group.group)}]: blamed {blamed}"
            )
    return lines


def runs_table(runs: Sequence[RunLine]) -> list[str]:
    lines = []
    for run in runs:
        verdict = run.error or f"result {run.result} (a correct product: {run.expected})"
        kinds = ", ".join(run.kinds) if run.kinds else "no fault"
        each = " + ".join("?" if seconds is None else duration(seconds) for seconds in run.category_seconds)
        lines.append(f"  {run.name:<9} {duration(run.seconds):>7}  {verdict}; categories {each or '-'}")
        lines.append(f"  {'':<9} {'':>7}  injected: {kinds}")
    return lines


def cost_lines(runs: Sequence[CostLine]) -> list[str]:
    """What the runs left and cost: object sizes (none may pass 1 MiB), the step processes' peak memory, and
    how long planning took in each category."""
    lines = object_size_lines([(run.name, run.largest_objects) for run in runs])
    lines.append("step processes' peak resident memory (MiB, sampled every second), and planning's longest step:")
    for run in runs:
        planning = "; ".join(
            f"{domain} " + ", ".join(f"{template} {seconds:.0f} s" for template, seconds in steps.items())
            for domain, steps in run.plan_seconds
            if steps
        )
        lines.append(f"  {run.name}: {step_memory_text(run.step_memory_mib)}; planning: {planning or '-'}")
    return lines
