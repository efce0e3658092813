"""Scoring a scorecard run (pure): what a correct product reports for each injected fault in each category,
and how what the product did report compares.

Why pure: the figures are only as good as their definitions, so the definitions are functions of hand-made
inputs that the unit tests pin (`tests/unit/test_scorecard.py`), and the driver only feeds them what a user
reads after a run: each category's failed-node and succeeded-node ConfigMaps, and its node groups (from the
group-result ConfigMaps, so a false positive can be tied to the fault in its group).

`EXPECTATIONS` is the table in `tests/bench/scorecard.py`'s docstring, keyed by (kind, category domain);
categories run in `CATEGORY_ORDER`, so a health mark made during the first category is already on the node
when the later ones are planned. Each (node, category) pair gets one outcome:

- `detected`: an injected node the category can see, reported with an expected reason;
- `excluded`: such a node left out of the category's plan (neither list) where that is expected (a cordoned
  node); it counts as found, but is not a report;
- `wrong-reason`: reported, with none of the expected reasons;
- `missed`: certified (in the succeeded list) although the category can see its fault;
- `untested`: in neither list although it should have been tested; counted as a miss;
- `failed-once` / `passed-once`: a transient node in the category that runs its first workload, reported or
  not; neither is a miss (it failed once and is healthy afterwards);
- `false-positive`: reported in a category that cannot see any fault on it (a healthy node, a transient node
  after its one failure, or a fault this category's workload does not exercise). Its `causes` are the kinds
  injected in its group in that category (its own included), `none` when the group had none.

Recall = (detected + excluded) / (detected + excluded + wrong-reason + missed + untested). Precision =
correct reports / all reports, where correct reports are detected + wrong-reason + failed-once (a right node,
even with the wrong reason) and every false positive counts against the kinds in its `causes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from nvcre_argo.results import HARDWARE_FAILURE_DETECTED, THRESHOLD_VIOLATION, WORKLOAD_FAILED
from tests.bench.scorecard_faults import KINDS, FaultKind, RunSpec

CATEGORY_ORDER: Final = ("communication", "diagnostics", "training")
NO_CAUSE: Final = "none"
CRASH_KINDS: Final = frozenset({"crash", "transient"})


@dataclass(frozen=True)
class Expectation:
    """What a correct product reports for a node with one fault kind in one category.

    `visible`: the category's workload, or its plan, can see the fault. `reasons`: the acceptable failure
    reasons (empty: any). `excluded_ok`: leaving the node out of the plan is as good as reporting it.
    `transient`: the node fails once here and is healthy afterwards (neither outcome is a miss)."""

    visible: bool
    reasons: frozenset[str] = frozenset()
    excluded_ok: bool = False
    transient: bool = False


INVISIBLE: Final = Expectation(visible=False)
HEALTHY: Final = INVISIBLE
_WORKLOAD: Final = Expectation(visible=True, reasons=frozenset({WORKLOAD_FAILED}))
_THRESHOLD: Final = Expectation(visible=True, reasons=frozenset({THRESHOLD_VIOLATION}))
_HARDWARE: Final = Expectation(visible=True, reasons=frozenset({HARDWARE_FAILURE_DETECTED}))
_NOT_CERTIFIED: Final = Expectation(visible=True, excluded_ok=True)
_ONCE: Final = Expectation(visible=False, transient=True)
_MARKED: Final = {"communication": _HARDWARE, "diagnostics": _NOT_CERTIFIED, "training": _NOT_CERTIFIED}
_EVERYWHERE: Final = dict.fromkeys(CATEGORY_ORDER, _WORKLOAD)

# (kind, domain) -> expectation; see the table in tests/bench/scorecard.py.
EXPECTATIONS: Final[Mapping[tuple[str, str], Expectation]] = {
    (kind, domain): expectation
    for kind, by_domain in {
        "crash": _EVERYWHERE,
        "hang": _EVERYWHERE,
        "stall": _EVERYWHERE,
        "transient": {"communication": _ONCE, "diagnostics": INVISIBLE, "training": INVISIBLE},
        "slow-nccl": {"communication": _THRESHOLD, "diagnostics": INVISIBLE, "training": INVISIBLE},
        "slow-training": {"communication": INVISIBLE, "diagnostics": INVISIBLE, "training": _THRESHOLD},
        "datacheck": {"communication": _WORKLOAD, "diagnostics": INVISIBLE, "training": INVISIBLE},
        "health-condition": _MARKED,
        "health-taint": _MARKED,
        "health-cordon": _MARKED,
        "notready": _MARKED,
    }.items()
    for domain, expectation in by_domain.items()
}


def kinds_seen_in(domains: Sequence[str], kinds: Sequence[FaultKind] = KINDS) -> tuple[FaultKind, ...]:
    """The kinds at least one of these categories can see (or fail once on): injecting any other would only
    take a group away from the run."""
    return tuple(
        kind
        for kind in kinds
        if any(EXPECTATIONS[(kind.name, domain)].visible or EXPECTATIONS[(kind.name, domain)].transient
               for domain in domains)
    )  # fmt: skip


def expectation_for(kind: str | None, domain: str) -> Expectation:
    """A healthy node (`kind` None) is expected to pass everywhere."""
    return HEALTHY if kind is None else EXPECTATIONS[(kind, domain)]


@dataclass(frozen=True)
class CategoryObservation:
    """What a user reads about one category after a run: its failed nodes with every (reason, message) the
    failed-nodes ConfigMap lists for them, its certified nodes, and its node groups."""

    domain: str
    variant: str
    status: str
    failed: Mapping[str, Mapping[str, str]]
    succeeded: frozenset[str]
    groups: tuple[tuple[str, ...], ...]

    def group_of(self, node: str) -> tuple[str, ...]:
        return next((group for group in self.groups if node in group), (node,))


@dataclass(frozen=True)
class NodeVerdict:
    """One (node, category) pair that was injected or reported, and how it was scored."""

    node: str
    domain: str
    kind: str | None
    outcome: str
    reasons: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()


def score_category(kind_of: Mapping[str, str], observed: CategoryObservation) -> list[NodeVerdict]:
    """Every injected or reported node of one category, scored (sorted by node)."""
    verdicts = []
    for node in sorted(set(kind_of) | set(observed.failed)):
        kind = kind_of.get(node)
        reasons = tuple(sorted(observed.failed.get(node, {})))
        outcome = _outcome(expectation_for(kind, observed.domain), node, reasons, observed)
        if outcome is None:
            continue
        causes = _causes(node, kind_of, observed) if outcome == "false-positive" else ()
        verdicts.append(NodeVerdict(node, observed.domain, kind, outcome, reasons, causes))
    return verdicts


def _outcome(expected: Expectation, node: str, reasons: Sequence[str], observed: CategoryObservation) -> str | None:
    """The node's outcome, None for a true negative (a node nobody expects reported, not reported)."""
    if expected.transient:
        return "failed-once" if reasons else "passed-once"
    if not expected.visible:
        return "false-positive" if reasons else None
    if reasons:
        accepted = not expected.reasons or bool(expected.reasons & set(reasons))
        return "detected" if accepted else "wrong-reason"
    if node in observed.succeeded:
        return "missed"
    return "excluded" if expected.excluded_ok else "untested"


def _causes(node: str, kind_of: Mapping[str, str], observed: CategoryObservation) -> tuple[str, ...]:
    kinds = {kind_of[member] for member in observed.group_of(node) if member in kind_of}
    return tuple(sorted(kinds)) or (NO_CAUSE,)


@dataclass(frozen=True)
class Tally:
    """Outcome counts over a set of verdicts, with the figures derived from them."""

    counts: Mapping[str, int] = field(default_factory=dict)

    def __getitem__(self, outcome: str) -> int:
        return self.counts.get(outcome, 0)

    @property
    def expected(self) -> int:
        return sum(self[name] for name in ("detected", "excluded", "wrong-reason", "missed", "untested"))

    @property
    def found(self) -> int:
        return self["detected"] + self["excluded"]

    @property
    def correct_reports(self) -> int:
        return self["detected"] + self["wrong-reason"] + self["failed-once"]

    @property
    def recall(self) -> float | None:
        return self.found / self.expected if self.expected else None

    @property
    def precision(self) -> float | None:
        reports = self.correct_reports + self["false-positive"]
        return self.correct_reports / reports if reports else None


def tally(verdicts: Iterable[NodeVerdict], *, kind: str | None = None, domain: str | None = None) -> Tally:
    """Count outcomes, optionally for one kind (its own verdicts, plus the false positives it caused) and/or
    one category domain."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        if domain is not None and verdict.domain != domain:
            continue
        if kind is not None and not _concerns(verdict, kind):
            continue
        counts[verdict.outcome] = counts.get(verdict.outcome, 0) + 1
    return Tally(counts)


def _concerns(verdict: NodeVerdict, kind: str) -> bool:
    if verdict.outcome == "false-positive":
        return kind in verdict.causes
    return verdict.kind == kind


@dataclass(frozen=True)
class CrashGroup:
    """A multi-node group with one crashing node and healthy groupmates: did the product blame only the
    crashing node, or the whole group (the run step's poll missed the evidence of who failed first)?"""

    domain: str
    group: tuple[str, ...]
    node: str
    kind: str
    after_seconds: float
    blamed: tuple[str, ...]

    @property
    def whole_group(self) -> bool:
        return set(self.blamed) == set(self.group)

    @property
    def attributed(self) -> bool:
        return self.blamed == (self.node,)


def crash_groups(run: RunSpec, observed: CategoryObservation) -> list[CrashGroup]:
    """The category's multi-node groups where exactly one node crashes (a crash, or a transient fault in the
    category where it fails), the others healthy."""
    kind_of = run.kind_of()
    after = {item.node: float(item.entry.get("afterSeconds", 1.0)) for item in run.injections}
    found = []
    for group in observed.groups:
        faulty = [node for node in group if node in kind_of]
        if len(group) < 2 or len(faulty) != 1:
            continue
        node = faulty[0]
        expected = expectation_for(kind_of[node], observed.domain)
        if kind_of[node] not in CRASH_KINDS or not (expected.visible or expected.transient):
            continue
        blamed = tuple(sorted(member for member in group if member in observed.failed))
        found.append(CrashGroup(observed.domain, tuple(group), node, kind_of[node], after[node], blamed))
    return found


def expected_result(run: RunSpec) -> str:
    """The Certification's result a correct product gives: FAILED when any fault is injected (a transient one
    fails its first category too), PASSED when none is."""
    return "FAILED" if run.injections else "PASSED"
