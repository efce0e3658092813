"""What the job results prove, under the OR model (a persistent fault fails every group it is in).

- A node is *cleared* by a passed job with MNNVL on that holds another node of its domain: node, slow and
  NVLink faults would all have failed it (NVLink traffic only flows between nodes of one domain). A node alone
  in its domain is cleared by any passed job, and so is a node whose every domain peer turned out faulty:
  no NVLink test is left for it (a fixpoint, since clearing it can isolate more faulty peers).
- A domain pair is *verified* by any passed job spanning both domains: a link fault between them would fail it.
- A failed job *isolates* a node when every other member is cleared and every domain pair it spans is
  verified, and *isolates* a link when every member is cleared and it spans just that pair, still unverified.
  Two isolating failures make a fault: a transient fails one job only, so it is never blamed. (One isolating
  failure plus any other is not enough: two suspects of one failed pair, one faulty, the other failing its
  confirmation transiently, would look alike.) Once the results show transients (`transients_seen`), a failure
  isolates a node only if its other members were cleared in an earlier round: a partner cleared only
  afterwards may have been the transient, and two such partners in a row, each failing once, would blame a
  healthy node.
- A failed job inside one domain that nothing explains any more (all cleared) and is larger than
  `minGroupSize` was a transient if a later job over the same nodes passed, and an infrastructure fault inside
  the domain if it failed `PROBE_FAILURES` times. (Smaller ones were confirmed node by node; spanning ones are
  settled by the link search.)
- A job that never ran (`not-run`: the controllers created none of its pods in time) proves nothing and counts
  for none of the above. A node no job ran with yet is *unscreened*; one whose jobs never ran `NOT_RUN_LIMIT`
  times and that nothing cleared is *abandoned*: planning it again would only load the controllers again.

Deriving this from the whole history on every call keeps the planner a pure function; nothing is carried.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from nvcre_argo.plan.isolation.model import Candidate, JobResult

Pair = tuple[str, str]
LINK_ISOLATIONS = 2
"""Failures of direct tests of a domain pair (cleared nodes of those two domains only) that make a link fault.
Wider failures do not count even once every other pair they span is verified: they borrow many nodes, and
each can have met a different node's one transient failure."""
PROBE_FAILURES = 3
"""Failures of one unexplained group (no pass in between) that make an infrastructure fault: the first and
two probes, since a probe over many nodes can meet another node's one transient failure."""
NOT_RUN_LIMIT = 3
"""Jobs of a node that never ran after which the node is no longer planned and is left untested."""


@dataclass(frozen=True)
class FailedJob:
    """A failed job with what is still unknown about it."""

    result: JobResult
    unknown: tuple[str, ...]
    unverified: tuple[Pair, ...]


@dataclass(frozen=True)
class Knowledge:
    """Everything the results so far prove (see the module docstring)."""

    domain_of: Mapping[str, str]
    cleared: frozenset[str]
    passes: Mapping[str, int]
    verified: frozenset[Pair]
    faulty: frozenset[str]
    faulty_links: Mapping[Pair, tuple[str, ...]]
    failed: tuple[FailedJob, ...]
    unexplained_once: tuple[JobResult, ...]
    unexplained_repeatedly: tuple[JobResult, ...]
    passed_alone: frozenset[str] = frozenset()
    """Nodes that passed a job on their own: free of node and slow faults, only NVLink is left to test."""
    unscreened: frozenset[str] = frozenset()
    """Nodes no job ran with yet (their jobs never started): screened again, not split."""
    abandoned: frozenset[str] = frozenset()
    """Uncleared nodes whose jobs never ran `NOT_RUN_LIMIT` times: no longer planned, left untested."""


def domain_pairs(domains: Iterable[str]) -> list[Pair]:
    """Every unordered pair of distinct domains, each sorted."""
    return list(combinations(sorted(set(domains)), 2))


def derive_knowledge(
    candidates: Sequence[Candidate], results: Sequence[JobResult], *, min_group_size: int
) -> Knowledge:
    """The knowledge the results prove; `min_group_size` decides which unexplained failures are worth a probe."""
    domain_of = {c.node: c.domain for c in candidates}
    domain_size = Counter(domain_of.values())
    cleared: set[str] = set()
    cleared_in: dict[str, int] = {}
    passes: Counter[str] = Counter()
    verified: set[Pair] = set()
    for result in results:
        if not result.passed:
            continue
        members = Counter(domain_of[n] for n in result.group.nodes)
        for node in result.group.nodes:
            passes[node] += 1
            dom = domain_of[node]
            if domain_size[dom] == 1 or (result.group.mnnvl and members[dom] >= 2):
                cleared.add(node)
                cleared_in[node] = min(cleared_in.get(node, result.round), result.round)
        verified.update(domain_pairs(members))

    strict = transients_seen(results, cleared, verified, domain_of)
    failed, faulty, faulty_links = _failures(results, domain_of, cleared, verified, cleared_in if strict else None)
    while lonely := _without_healthy_peer(domain_of, passes, faulty) - cleared:
        cleared |= lonely
        failed, faulty, faulty_links = _failures(results, domain_of, cleared, verified, cleared_in if strict else None)

    not_run = Counter(n for r in results if not r.ran for n in r.group.nodes)
    passed_sets = {(r.group.nodes, r.group.mnnvl) for r in results if r.passed}
    unexplained: Counter[tuple[tuple[str, ...], bool]] = Counter()
    first: dict[tuple[tuple[str, ...], bool], JobResult] = {}
    for job in failed:
        key = (job.result.group.nodes, job.result.group.mnnvl)
        if job.unknown or job.unverified or len(key[0]) <= min_group_size or key in passed_sets:
            continue
        if len({domain_of[n] for n in key[0]}) > 1:  # between domains, the link search has the last word
            continue
        unexplained[key] += 1
        first.setdefault(key, job.result)
    return Knowledge(
        domain_of=domain_of,
        cleared=frozenset(cleared),
        passes=dict(passes),
        verified=frozenset(verified),
        faulty=faulty,
        faulty_links=faulty_links,
        failed=tuple(failed),
        unexplained_once=tuple(first[k] for k in sorted(first) if unexplained[k] < PROBE_FAILURES),
        unexplained_repeatedly=tuple(first[k] for k in sorted(first) if unexplained[k] >= PROBE_FAILURES),
        passed_alone=frozenset(r.group.nodes[0] for r in results if len(r.group.nodes) == 1 and r.passed),
        unscreened=frozenset(domain_of) - {n for r in results if r.ran for n in r.group.nodes},
        abandoned=frozenset(n for n, count in not_run.items() if count >= NOT_RUN_LIMIT) - cleared - faulty,
    )


def transients_seen(
    results: Sequence[JobResult], cleared: set[str], verified: set[Pair], domain_of: Mapping[str, str]
) -> bool:
    """Whether some failed job has nothing left to explain it: every member cleared and every domain pair it
    spans verified by passes. Only a transient (or a fault inside the whole group, which a probe settles) fails
    such a job, so the nodes of this cluster do fail once now and then."""
    return any(
        r.failed
        and all(n in cleared for n in r.group.nodes)
        and all(p in verified for p in domain_pairs(domain_of[n] for n in r.group.nodes))
        for r in results
    )


def _failures(
    results: Sequence[JobResult],
    domain_of: Mapping[str, str],
    cleared: set[str],
    verified: set[Pair],
    cleared_in: Mapping[str, int] | None = None,
) -> tuple[list[FailedJob], frozenset[str], dict[Pair, tuple[str, ...]]]:
    """The failed jobs with what is still unknown about them, and the nodes and links they isolate.

    With `cleared_in` (the round each node was first cleared in, given once transients were seen), a failure
    isolates a node only if its other members were cleared before the failure's round."""
    failed: list[FailedJob] = []
    node_isolations: Counter[str] = Counter()
    link_isolations: Counter[Pair] = Counter()
    link_evidence: dict[Pair, tuple[str, ...]] = {}
    for result in results:
        if not result.failed:
            continue
        unknown = tuple(n for n in result.group.nodes if n not in cleared)
        unverified = tuple(p for p in domain_pairs(domain_of[n] for n in result.group.nodes) if p not in verified)
        failed.append(FailedJob(result=result, unknown=unknown, unverified=unverified))
        if len(unknown) == 1 and not unverified and _cleared_before(result, unknown[0], cleared_in):
            node_isolations[unknown[0]] += 1
        if not unknown and len(unverified) == 1 and {domain_of[n] for n in result.group.nodes} == set(unverified[0]):
            link_isolations[unverified[0]] += 1
            link_evidence[unverified[0]] = result.group.nodes
    faulty = frozenset(n for n, count in node_isolations.items() if count >= 2)
    faulty_links = {p: link_evidence[p] for p, count in sorted(link_isolations.items()) if count >= LINK_ISOLATIONS}
    return failed, faulty, faulty_links


def _cleared_before(result: JobResult, suspect: str, cleared_in: Mapping[str, int] | None) -> bool:
    """Whether every member of `result` but `suspect` was cleared before its round (always, without `cleared_in`).
    A node cleared only because every peer of its domain is faulty (`_without_healthy_peer`) has no round and
    counts as cleared later."""
    if cleared_in is None:
        return True
    return all(cleared_in.get(n, result.round) < result.round for n in result.group.nodes if n != suspect)


def _without_healthy_peer(domain_of: Mapping[str, str], passes: Mapping[str, int], faulty: frozenset[str]) -> set[str]:
    """Nodes that passed a job while every other node of their domain is faulty: no NVLink test is possible
    for them (as for a node alone in its domain), so a pass clears them."""
    peers: defaultdict[str, list[str]] = defaultdict(list)
    for node, domain in domain_of.items():
        peers[domain].append(node)
    return {
        node
        for node, domain in domain_of.items()
        if passes.get(node, 0) and node not in faulty and all(p in faulty for p in peers[domain] if p != node)
    }
