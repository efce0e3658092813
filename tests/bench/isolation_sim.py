"""A simulated cluster with injected faults, to drive isolation planners without GPUs (test side only).

Fault kinds, under the model the planners assume:
- node: every group holding the node fails;
- nvlink: fails only with MNNVL on and another node of its domain in the group (NVLink traffic flows only
  inside a domain);
- slow: the group exits 0 below the bandwidth threshold (`below-threshold`);
- link: a fault between two domains; only groups spanning both fail;
- transient: a node that fails exactly one of its first three jobs (which one is seeded), then never again.

`make_scenario` draws a cluster (domains of 4-18 nodes) and `d` persistent faults of mixed kinds from one seed;
`FaultOracle` answers job outcomes and is the only stateful part (transients count jobs). `run_planner` plays
the planner -> jobs -> results loop and returns the verdict with its costs.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nvcre_argo.plan.isolation import Candidate, Group, JobResult, Outcome, Round, Settings, Verdict
from nvcre_argo.plan.isolation.model import DEFAULT_SETTINGS

Planner = Callable[[Sequence[Candidate], Sequence[JobResult], Settings], Round | Verdict]
KINDS = ("node", "nvlink", "slow", "link")
KIND_WEIGHTS = (0.35, 0.25, 0.25, 0.15)


@dataclass(frozen=True)
class Scenario:
    """A cluster and its injected faults."""

    candidates: tuple[Candidate, ...]
    node_faults: frozenset[str] = frozenset()
    nvlink_faults: frozenset[str] = frozenset()
    slow_nodes: frozenset[str] = frozenset()
    link_faults: frozenset[tuple[str, str]] = frozenset()
    transients: tuple[tuple[str, int], ...] = ()

    @property
    def faulty_nodes(self) -> frozenset[str]:
        """Every node a persistent fault should make the verdict name."""
        return self.node_faults | self.nvlink_faults | self.slow_nodes


def make_domains(n: int, rng: random.Random) -> tuple[Candidate, ...]:
    """`n` nodes in domains of 4-18 nodes (fewer than 4 nodes: one domain)."""
    sizes: list[int] = []
    left = n
    while left > 0:
        size = min(rng.randint(4, 18), left)
        if 0 < left - size < 4:
            size = left - 4 if size > 4 + 4 else left
        sizes.append(size)
        left -= size
    candidates = []
    index = 0
    for d, size in enumerate(sizes):
        for _ in range(size):
            candidates.append(Candidate(node=f"n{index:04d}", domain=f"c{d:03d}"))
            index += 1
    return tuple(candidates)


def make_scenario(n: int, d: int, seed: int, *, transient_rate: float = 0.01) -> Scenario:
    """A seeded cluster of `n` nodes with `d` persistent faults (mixed kinds) and some transient nodes."""
    rng = random.Random(f"{n}-{d}-{seed}")
    candidates = make_domains(n, rng)
    nodes = [c.node for c in candidates]
    domains = sorted({c.domain for c in candidates})
    chosen: dict[str, set[str]] = {k: set() for k in ("node", "nvlink", "slow")}
    links: set[tuple[str, str]] = set()
    taken: set[str] = set()
    for _ in range(d):
        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
        if kind == "link" and len(domains) >= 2:
            a, b = sorted(rng.sample(domains, 2))
            links.add((a, b))
            continue
        kind = "node" if kind == "link" else kind
        node = rng.choice([x for x in nodes if x not in taken])
        taken.add(node)
        chosen[kind].add(node)
    transients = tuple(
        (node, rng.randrange(3)) for node in nodes if node not in taken and rng.random() < transient_rate
    )
    return Scenario(
        candidates=candidates,
        node_faults=frozenset(chosen["node"]),
        nvlink_faults=frozenset(chosen["nvlink"]),
        slow_nodes=frozenset(chosen["slow"]),
        link_faults=frozenset(links),
        transients=transients,
    )


@dataclass
class FaultOracle:
    """Outcomes of jobs on the scenario's cluster; counts jobs per node for the transients."""

    scenario: Scenario
    jobs_run: Counter[str] = field(default_factory=Counter)

    def run(self, group: Group) -> Outcome:
        """The outcome of one job."""
        s = self.scenario
        domain_of = {c.node: c.domain for c in s.candidates}
        domains = Counter(domain_of[n] for n in group.nodes)
        transient = dict(s.transients)
        failed = any(n in s.node_faults for n in group.nodes)
        failed |= group.mnnvl and any(n in s.nvlink_faults and domains[domain_of[n]] >= 2 for n in group.nodes)
        failed |= any(a in domains and b in domains for a, b in s.link_faults)
        for n in group.nodes:
            failed |= transient.get(n) == self.jobs_run[n]
            self.jobs_run[n] += 1
        if failed:
            return "failed"
        return "below-threshold" if any(n in s.slow_nodes for n in group.nodes) else "passed"


@dataclass(frozen=True)
class Run:
    """One planner's run on one scenario."""

    verdict: Verdict
    rounds: int
    jobs: int
    node_jobs: int
    max_rounds_disjoint: bool


def run_planner(planner: Planner, scenario: Scenario, settings: Settings = DEFAULT_SETTINGS) -> Run:
    """Play planner -> jobs -> results until the verdict."""
    oracle = FaultOracle(scenario)
    results: list[JobResult] = []
    disjoint = True
    while True:
        step = planner(scenario.candidates, tuple(results), settings)
        if isinstance(step, Verdict):
            return Run(
                verdict=step,
                rounds=step.rounds,
                jobs=len(results),
                node_jobs=sum(len(r.group.nodes) for r in results),
                max_rounds_disjoint=disjoint,
            )
        seen: set[str] = set()
        for group in step.groups:
            disjoint &= not seen.intersection(group.nodes)
            seen.update(group.nodes)
            results.append(JobResult(round=step.number, group=group, outcome=oracle.run(group)))


def reported_links(verdict: Verdict, scenario: Scenario) -> frozenset[tuple[str, str]]:
    """The domain pairs the verdict blames for inter-domain link faults."""
    domain_of = {c.node: c.domain for c in scenario.candidates}
    pairs = set()
    for fault in verdict.infrastructure_faults:
        doms = sorted({domain_of[n] for n in fault.group_a + fault.group_b})
        if len(doms) == 2:
            pairs.add((doms[0], doms[1]))
    return frozenset(pairs)


def is_exact(verdict: Verdict, scenario: Scenario) -> bool:
    """The verdict names exactly the injected persistent faults: every faulty node, every link, nothing else."""
    return (
        set(verdict.faulty) == scenario.faulty_nodes
        and reported_links(verdict, scenario) == scenario.link_faults
        and len(verdict.infrastructure_faults) == len(scenario.link_faults)
        and not verdict.untested
    )


def blames_healthy(verdict: Verdict, scenario: Scenario) -> bool:
    """Whether the verdict reports a node faulty that has no persistent fault."""
    return bool(set(verdict.faulty) - scenario.faulty_nodes)
