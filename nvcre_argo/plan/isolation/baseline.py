"""The reference's published strategy (§7.6), stage after stage, as the yardstick for `planner`.

1. intra-screening: each domain one group (MNNVL on);
2. intra-screening-no-nvl: the failing domains again with MNNVL off; a domain failing without MNNVL has a
   fabric fault and its later tests run without MNNVL, one passing without it has an NVLink fault;
3. inter-screening: one representative of every healthy domain in one group;
4. bisection: failed groups halved (Hwang's binary splitting) until `minGroupSize`, every workstream in one
   pool; a half smaller than `minGroupSize` is padded with a healthy node; when both halves pass, the whole
   failed: cross-boundary probing pairs the halves' halves across the boundary (two rounds, node-disjoint)
   down to single nodes, which are reported as an infrastructure fault;
5. confirmation: every suspect paired with a different healthy node; a failure confirms, a pass clears.

The strategy is a state machine; to stay a pure function of the results it replays itself from round 1,
looking up each round's outcomes, until it reaches the first round without results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from nvcre_argo.plan.isolation.model import (
    DEFAULT_SETTINGS,
    Candidate,
    Group,
    InfrastructureFault,
    JobResult,
    Outcome,
    Round,
    Settings,
    Stage,
    Verdict,
)

_STAGES: tuple[Stage, ...] = (
    "intra-screening",
    "intra-screening-no-nvl",
    "inter-screening",
    "bisection",
    "confirmation",
)


@dataclass(frozen=True)
class _Split:
    nodes: tuple[str, ...]
    mnnvl: bool


@dataclass(frozen=True)
class _Cross:
    side_a: tuple[str, ...]
    side_b: tuple[str, ...]
    mnnvl: bool
    probes: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]


@dataclass(frozen=True)
class _State:
    stage_index: int = 0
    healthy: frozenset[str] = frozenset()
    failing_domains: tuple[str, ...] = ()
    healthy_domains: tuple[str, ...] = ()
    items: tuple[_Split | _Cross, ...] = ()
    suspects: tuple[tuple[str, bool], ...] = ()
    faulty: tuple[str, ...] = ()
    faults: tuple[InfrastructureFault, ...] = ()


_Tag = tuple[str, int, int]
"""What a group is for: (kind, item index, half or probe index)."""


def plan_baseline_round(
    candidates: Sequence[Candidate], results: Sequence[JobResult], settings: Settings = DEFAULT_SETTINGS
) -> Round | Verdict:
    """The reference strategy's next round, or its verdict."""
    domain_of = {c.node: c.domain for c in candidates}
    domains: dict[str, tuple[str, ...]] = {}
    for c in sorted(candidates, key=lambda c: (c.domain, c.node)):
        domains[c.domain] = (*domains.get(c.domain, ()), c.node)
    outcomes: dict[int, dict[tuple[tuple[str, ...], bool], Outcome]] = {}
    for r in results:
        outcomes.setdefault(r.round, {})[(r.group.nodes, r.group.mnnvl)] = r.outcome
    state = _State()
    number = 1
    while True:
        state, tagged = _propose(state, domains, domain_of, settings.min_group_size)
        if not tagged:
            return _verdict(candidates, state, rounds=number - 1)
        if number not in outcomes:
            return Round(number=number, groups=tuple(g for g, _ in tagged))
        seen = outcomes[number]
        state = _advance(
            state,
            tagged=tagged,
            passed={g: seen[(g.nodes, g.mnnvl)] == "passed" for g, _ in tagged},
            domains=domains,
            domain_of=domain_of,
            m=settings.min_group_size,
        )
        number += 1


def _propose(
    state: _State, domains: Mapping[str, tuple[str, ...]], domain_of: Mapping[str, str], m: int
) -> tuple[_State, list[tuple[Group, _Tag]]]:
    while state.stage_index < len(_STAGES):
        stage = _STAGES[state.stage_index]
        tagged = _groups_for(stage, state, domains, domain_of, m)
        if tagged:
            return state, tagged
        state = replace(state, stage_index=state.stage_index + 1)
    return state, []


def _groups_for(
    stage: Stage, state: _State, domains: Mapping[str, tuple[str, ...]], domain_of: Mapping[str, str], m: int
) -> list[tuple[Group, _Tag]]:
    if stage == "intra-screening":
        return [(Group(nodes, True, stage), ("screen", i, 0)) for i, nodes in enumerate(domains.values())]
    if stage == "intra-screening-no-nvl":
        return [(Group(domains[d], False, stage), ("no-nvl", i, 0)) for i, d in enumerate(state.failing_domains)]
    if stage == "inter-screening":
        if len(state.healthy_domains) < 2:
            return []
        nodes = tuple(sorted(domains[d][0] for d in state.healthy_domains))
        return [(Group(nodes, True, stage), ("inter", 0, 0))]
    # Nodes under test this round are never padding for another group (cross-boundary sides are healthy).
    used: set[str] = {n for item in state.items for n in (item.nodes if isinstance(item, _Split) else ())}
    used.update(n for item in state.items if isinstance(item, _Cross) for n in item.side_a + item.side_b)
    used.update(s for s, _ in state.suspects)
    tagged: list[tuple[Group, _Tag]] = []
    if stage == "bisection":
        for index, item in enumerate(state.items):
            if isinstance(item, _Split):
                half = math.ceil(len(item.nodes) / 2)
                for side, nodes in enumerate((item.nodes[:half], item.nodes[half:])):
                    padded = _pad(nodes, m=m, healthy=state.healthy, used=used, domains=domains, domain_of=domain_of)
                    used.update(padded)
                    tagged.append((Group(padded, item.mnnvl, stage), ("split", index, side)))
            else:
                taken: set[str] = set()
                for probe_index, (a, b) in enumerate(item.probes):
                    nodes = tuple(sorted(a + b))
                    if taken.intersection(nodes):
                        continue
                    taken.update(nodes)
                    padded = _pad(nodes, m=m, healthy=state.healthy, used=used, domains=domains, domain_of=domain_of)
                    used.update(padded)
                    tagged.append((Group(padded, item.mnnvl, "cross-boundary"), ("cross", index, probe_index)))
        return tagged
    for index, (suspect, mnnvl) in enumerate(state.suspects):
        padded = _pad((suspect,), m=2, healthy=state.healthy, used=used, domains=domains, domain_of=domain_of)
        used.update(padded)
        tagged.append((Group(padded, mnnvl, stage), ("confirm", index, 0)))
    return tagged


def _pad(
    nodes: tuple[str, ...],
    *,
    m: int,
    healthy: frozenset[str],
    used: set[str],
    domains: Mapping[str, tuple[str, ...]],
    domain_of: Mapping[str, str],
) -> tuple[str, ...]:
    """Fill a small group up to `m` with healthy nodes, its own domain's first, so bandwidth means something."""
    if len(nodes) >= m:
        return tuple(sorted(nodes))
    own = [domain_of[n] for n in nodes]
    pool = [n for d in own for n in domains[d]] + sorted(healthy)
    extra: list[str] = []
    for node in pool:
        if len(nodes) + len(extra) >= m:
            break
        if node in healthy and node not in used and node not in nodes and node not in extra:
            extra.append(node)
    return tuple(sorted(nodes + tuple(extra)))


def _advance(
    state: _State,
    *,
    tagged: list[tuple[Group, _Tag]],
    passed: Mapping[Group, bool],
    domains: Mapping[str, tuple[str, ...]],
    domain_of: Mapping[str, str],
    m: int,
) -> _State:
    stage = _STAGES[state.stage_index]
    healthy = set(state.healthy)
    for group, _ in tagged:
        if passed[group] and stage != "confirmation":
            healthy.update(group.nodes)
    nxt = replace(state, stage_index=state.stage_index + 1, healthy=frozenset(healthy))
    names = list(domains)
    if stage == "intra-screening":
        failing = tuple(names[t[1]] for g, t in tagged if not passed[g])
        return replace(nxt, failing_domains=failing, healthy_domains=tuple(d for d in names if d not in failing))
    if stage == "intra-screening-no-nvl":
        # A domain failing without MNNVL has a fabric fault: its later tests keep MNNVL off.
        items = tuple(_Split(domains[state.failing_domains[t[1]]], passed[g]) for g, t in tagged)
        return replace(nxt, items=state.items + items)
    if stage == "inter-screening":
        ((group, _),) = tagged
        return nxt if passed[group] else replace(nxt, items=(*state.items, _Split(group.nodes, True)))
    if stage == "confirmation":
        faulty = tuple(state.suspects[t[1]][0] for g, t in tagged if not passed[g])
        cleared = {state.suspects[t[1]][0] for g, t in tagged if passed[g]}
        return replace(nxt, faulty=tuple(sorted(faulty)), healthy=frozenset(healthy | cleared), suspects=())
    return _advance_bisection(state, tagged=tagged, passed=passed, healthy=frozenset(healthy), domain_of=domain_of, m=m)


def _advance_bisection(
    state: _State,
    *,
    tagged: list[tuple[Group, _Tag]],
    passed: Mapping[Group, bool],
    healthy: frozenset[str],
    domain_of: Mapping[str, str],
    m: int,
) -> _State:
    items: list[_Split | _Cross] = []
    suspects = list(state.suspects)
    faults = list(state.faults)
    outcome = {(t[1], t[2]): passed[g] for g, t in tagged}
    for index, item in enumerate(state.items):
        if isinstance(item, _Split):
            half = math.ceil(len(item.nodes) / 2)
            halves = (item.nodes[:half], item.nodes[half:])
            failed = [h for side, h in enumerate(halves) if not outcome[(index, side)]]
            for h in failed:
                if len(h) <= m:
                    suspects.extend((n, item.mnnvl) for n in h if n not in {s for s, _ in suspects})
                else:
                    items.append(_Split(h, item.mnnvl))
            if not failed:
                items.append(_cross(halves[0], halves[1], item.mnnvl))
            continue
        ran = [i for i in range(len(item.probes)) if (index, i) in outcome]
        failing = [item.probes[i] for i in ran if not outcome[(index, i)]]
        if failing:
            a, b = failing[0]
            if len(a) == 1 and len(b) == 1 and (a, b) == (item.side_a, item.side_b):
                domain = "|".join(sorted({domain_of[a[0]], domain_of[b[0]]}))
                faults.append(InfrastructureFault(domain, a, b, "cross-boundary"))
            else:
                items.append(_cross(a, b, item.mnnvl))
            continue
        remaining = tuple(p for i, p in enumerate(item.probes) if i not in ran)
        if remaining:
            items.append(replace(item, probes=remaining))
    return replace(
        state,
        stage_index=state.stage_index + (0 if items else 1),
        healthy=healthy - {s for s, _ in suspects},
        items=tuple(items),
        suspects=tuple(suspects),
        faults=tuple(faults),
    )


def _cross(side_a: tuple[str, ...], side_b: tuple[str, ...], mnnvl: bool) -> _Cross:
    """Probes pairing each half of one side with each half of the other (a single node is its own half)."""

    def halves(side: tuple[str, ...]) -> list[tuple[str, ...]]:
        if len(side) == 1:
            return [side]
        half = math.ceil(len(side) / 2)
        return [side[:half], side[half:]]

    probes = tuple((a, b) for a in halves(side_a) for b in halves(side_b))
    return _Cross(side_a, side_b, mnnvl, probes)


def _verdict(candidates: Sequence[Candidate], state: _State, *, rounds: int) -> Verdict:
    faulty = set(state.faulty)
    return Verdict(
        rounds=rounds,
        faulty=tuple(sorted(faulty)),
        healthy=tuple(sorted(c.node for c in candidates if c.node not in faulty)),
        infrastructure_faults=state.faults,
        untested=(),
    )
