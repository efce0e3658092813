"""The vocabulary of fault isolation: candidate nodes, the groups of a round, job results and the verdict.

Everything is a frozen value with sorted tuples, so a planner's output is a deterministic function of its
input and two planners can be compared on the same history. A round is one wave of jobs that run at once;
its groups are node-disjoint because a node runs one job at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Stage = Literal[
    "intra-screening",
    "intra-screening-no-nvl",
    "inter-screening",
    "bisection",
    "confirmation",
    "cross-boundary",
]
"""Why a group exists (reference §7.6 stage names); reported per group so progress is visible round by round."""

Outcome = Literal["passed", "failed", "below-threshold", "not-run"]
"""A job that exits 0 below the bandwidth threshold is as much a failure as one that exits non-zero. A job that
never started (the controllers created none of its pods in time) is neither: it says nothing about its nodes."""


@dataclass(frozen=True)
class Settings:
    """Planner knobs. `min_group_size` is where splitting stops (reference default 2); `max_rounds` bounds the
    loop so a fault outside the model (not OR-like) ends in a verdict with untested nodes, never a hang."""

    min_group_size: int = 2
    max_rounds: int = 40


DEFAULT_SETTINGS = Settings()


@dataclass(frozen=True)
class Candidate:
    """A node to certify and its topology domain (NVLink clique, catalog topologyKey value, or chunk)."""

    node: str
    domain: str


@dataclass(frozen=True)
class Group:
    """One job of a round: its nodes (sorted), whether MNNVL is on, and the stage that asked for it."""

    nodes: tuple[str, ...]
    mnnvl: bool
    stage: Stage


@dataclass(frozen=True)
class JobResult:
    """What one job of round `round` (1-based) did."""

    round: int
    group: Group
    outcome: Outcome

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def failed(self) -> bool:
        """Below threshold counts as failed: a slow node must be found like a broken one."""
        return self.outcome in ("failed", "below-threshold")

    @property
    def ran(self) -> bool:
        return self.outcome != "not-run"


@dataclass(frozen=True)
class Round:
    """The next wave of jobs (node-disjoint groups)."""

    number: int
    groups: tuple[Group, ...]


@dataclass(frozen=True)
class InfrastructureFault:
    """A fault that no single node explains: inside a domain (NVSwitch trunk, cable) between `group_a` and
    `group_b`, or a link between two domains (`domain` is then `"<a>|<b>"`)."""

    domain: str
    group_a: tuple[str, ...]
    group_b: tuple[str, ...]
    stage: Stage


@dataclass(frozen=True)
class Untested:
    """A node the planner could not settle, and why (a person decides what to do with it)."""

    node: str
    reason: str


@dataclass(frozen=True)
class Verdict:
    """The end of an isolation run after `rounds` rounds."""

    rounds: int
    faulty: tuple[str, ...]
    healthy: tuple[str, ...]
    infrastructure_faults: tuple[InfrastructureFault, ...]
    untested: tuple[Untested, ...]


def next_round_number(results: tuple[JobResult, ...] | list[JobResult]) -> int:
    """Rounds are numbered from 1; the next one follows the last recorded."""
    return max((r.round for r in results), default=0) + 1
