"""Our isolation strategy: the reference's stages, overlapped so that a round does every useful thing at once.

Round 1 screens each domain (MNNVL on) and, in the same round, two representatives taken out of every domain
form one group spanning all domains: a healthy cluster is certified, links included, in a single round.
(Two per domain, so the representatives also exercise NVLink with a peer of their own domain.) From
`WHOLE_DOMAIN_SCREENING` domains on, that group is so large that one transient node almost always fails it and
clearing its members costs its size again: round 1 then screens whole domains only, and the domain pairs no
group has spanned yet are open, to be screened by cleared nodes like the pairs of a failed group.

Every later round is planned from what the results prove (`knowledge`), in four parts that use disjoint
nodes and share the round:

- splitting: the unknown nodes of a failed group are cut straight into groups of `minGroupSize` inside their
  domain (one k-way split instead of log2 rounds of halving, and cheaper: every level of halving costs as many
  node-jobs as the whole split); a remainder joins the last group, and fewer unknown nodes than
  `minGroupSize` are confirmed one by one instead (padded with a cleared node);
- confirmation: every suspect (a member of a failed group of fewer than 2 x `minGroupSize` unknown nodes, the
  largest piece a split makes) is paired with a different cleared node of its own domain, the one with most
  passes, so a transient failure is cleared rather than blamed. A domain without a cleared node (most of it
  faulty) tests its suspects alone first: a node or slow fault fails alone and is confirmed so, and the nodes
  that passed alone are paired with each other (in pairs not yet seen failing) until a pass clears two of
  them; a node whose peers all turned out faulty is cleared by its pass alone (`knowledge`);
- link search (`links`): tests of the open domain pairs with the cleared nodes the other parts leave, a
  re-screen while a failure may still be a node's, then blocks of domains tested pair by pair (across many
  domains, only the domains of the pairs the failures point at). From
  `WHOLE_DOMAIN_SCREENING` on, a cross-boundary probe (which takes a whole domain) takes only the nodes the
  link tests leave;
- cross-boundary probing: a failed group inside one domain, larger than `minGroupSize`, whose members were all
  cleared by smaller groups is tested again; a pass makes it a transient, repeated failures an infrastructure
  fault between its halves.

A job that never ran (its pods were never created) proves nothing: its nodes are planned again as if it had
not been planned, unscreened nodes screened again per domain (not split, which would only ask the slow
controllers for more jobs), until `knowledge.NOT_RUN_LIMIT` such jobs leave a node untested.

When no part has a test left, or the round limit is reached, the round is the verdict (`verdict`).

No-NVL screening is not needed for the verdict (it tells NVLink from fabric faults, not which node is at
fault), so this planner leaves it to the baseline; every group runs with MNNVL on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from nvcre_argo.plan.isolation.knowledge import Knowledge, derive_knowledge
from nvcre_argo.plan.isolation.links import BATCH_DOMAINS, BlockRounds, count_block_rounds, plan_link_groups
from nvcre_argo.plan.isolation.model import (
    DEFAULT_SETTINGS,
    Candidate,
    Group,
    JobResult,
    Round,
    Settings,
    Stage,
    Verdict,
    next_round_number,
)
from nvcre_argo.plan.isolation.verdict import build_verdict

REPRESENTATIVES_PER_DOMAIN = 2
WHOLE_DOMAIN_SCREENING = 32
"""From this many domains on, round 1 screens whole domains and links are screened afterwards by cleared nodes:
a group of two representatives per domain is then so large that one transient node almost always fails it, and
clearing its members costs its size again."""


def plan_isolation_round(
    candidates: Sequence[Candidate], results: Sequence[JobResult], settings: Settings = DEFAULT_SETTINGS
) -> Round | Verdict:
    """The next round's node-disjoint groups, or the verdict when nothing is left to learn."""
    number = next_round_number(list(results))
    if not candidates:
        return Verdict(rounds=0, faulty=(), healthy=(), infrastructure_faults=(), untested=())
    if not results:
        return Round(number=1, groups=_screening_groups(candidates, settings.min_group_size))
    knowledge = derive_knowledge(candidates, results, min_group_size=settings.min_group_size)
    groups = (
        _follow_up_groups(candidates, knowledge, settings.min_group_size, count_block_rounds(results))
        if number <= settings.max_rounds
        else ()
    )
    if groups:
        return Round(number=number, groups=groups)
    return build_verdict(candidates, knowledge, rounds=number - 1, round_limit=number > settings.max_rounds)


def _by_domain(candidates: Sequence[Candidate]) -> dict[str, list[str]]:
    nodes: dict[str, list[str]] = defaultdict(list)
    for c in sorted(candidates, key=lambda c: (c.domain, c.node)):
        nodes[c.domain].append(c.node)
    return dict(nodes)


def _screening_groups(candidates: Sequence[Candidate], min_group_size: int) -> tuple[Group, ...]:
    domains = _by_domain(candidates)
    if len(domains) == 1 or len(domains) >= WHOLE_DOMAIN_SCREENING:
        return tuple(Group(nodes=tuple(nodes), mnnvl=True, stage="intra-screening") for nodes in domains.values())
    groups: list[Group] = []
    representatives: list[str] = []
    for nodes in domains.values():
        if len(nodes) < REPRESENTATIVES_PER_DOMAIN + min_group_size:
            representatives.extend(nodes)
            continue
        representatives.extend(nodes[:REPRESENTATIVES_PER_DOMAIN])
        groups.append(Group(nodes=tuple(nodes[REPRESENTATIVES_PER_DOMAIN:]), mnnvl=True, stage="intra-screening"))
    groups.append(Group(nodes=tuple(sorted(representatives)), mnnvl=True, stage="inter-screening"))
    return tuple(groups)


def _follow_up_groups(
    candidates: Sequence[Candidate], k: Knowledge, min_group_size: int, block_rounds: BlockRounds
) -> tuple[Group, ...]:
    used: set[str] = set()
    groups: list[Group] = []

    def take(nodes: Sequence[str], stage: Stage) -> None:
        used.update(nodes)
        groups.append(Group(nodes=tuple(sorted(nodes)), mnnvl=True, stage=stage))

    domains = _by_domain(candidates)
    many = len(domains) >= WHOLE_DOMAIN_SCREENING
    probes = [result.group.nodes for result in k.unexplained_once]
    used.update(k.abandoned)

    def take_probes() -> None:
        for nodes in probes:
            if not used.intersection(nodes):
                take(nodes, "cross-boundary")

    if not many:
        take_probes()
    spare = {d: [n for n in _by_health(nodes, k) if n in k.cleared] for d, nodes in domains.items()}
    suspects, to_split = _classify_unknown(candidates, k, min_group_size)
    for nodes in domains.values():
        unscreened = [n for n in nodes if n in k.unscreened and n not in used]
        if len(unscreened) >= min_group_size:
            take(unscreened, "intra-screening")
    for domain, unsettled in sorted(to_split.items()):
        nodes = [n for n in unsettled if n not in used]
        if len(nodes) < min_group_size:
            suspects[domain].extend(nodes)
            continue
        chunks = [nodes[i : i + min_group_size] for i in range(0, len(nodes), min_group_size)]
        if len(chunks[-1]) < min_group_size:
            chunks[-2].extend(chunks.pop())
        for chunk in chunks:
            take(chunk, "bisection")
    failed_sets = {frozenset(job.result.group.nodes) for job in k.failed}
    for domain, nodes in sorted(suspects.items()):
        alone: list[str] = []
        for suspect in sorted(nodes):
            if suspect in used:
                continue
            if len(domains[domain]) == 1:
                take([suspect], "confirmation")
                continue
            partners = [n for n in spare[domain] if n not in used]
            if partners:
                take([suspect, partners[0]], "confirmation")
            else:
                alone.append(suspect)
        # No cleared node of the domain left for them (most of it faulty): each suspect runs alone first (a node
        # or slow fault fails there, twice makes it faulty), then the ones that passed alone are paired in pairs
        # not yet seen failing, since a healthy node is only cleared by a pass with a peer of its own domain.
        for suspect in alone:
            if suspect not in used and suspect not in k.passed_alone:
                take([suspect], "confirmation")
        for suspect in alone:
            if suspect in used:
                continue
            peer = next((n for n in alone if n not in used and n != suspect and {suspect, n} not in failed_sets), None)
            if peer is not None:
                take([suspect, peer], "confirmation")

    # Across many domains a link test needs one node of nearly every domain; a probe (a whole failed screening
    # group again) would hold its domain back from it, so probes there take what the link tests leave.
    can_wait = len(domains) >= BATCH_DOMAINS and bool(groups or probes)
    for group in plan_link_groups(k, spare, used, block_rounds, can_wait=can_wait):
        take(group.nodes, group.stage)
    if many:
        take_probes()
    return tuple(groups)


def _by_health(nodes: Sequence[str], k: Knowledge) -> list[str]:
    """Partners with the most passed jobs first: the likeliest to be truly healthy (transients fail once)."""
    return sorted(nodes, key=lambda n: (-k.passes.get(n, 0), n))


def _classify_unknown(
    candidates: Sequence[Candidate], k: Knowledge, min_group_size: int
) -> tuple[defaultdict[str, list[str]], defaultdict[str, list[str]]]:
    """Unknown nodes per domain: suspects (in a failed group smaller than 2 x minGroupSize unknown nodes, the
    largest a split makes) and the rest, which are split. A node never seen in a failed group is split too."""
    smallest: dict[str, int] = {}
    for job in k.failed:
        for node in job.unknown:
            smallest[node] = min(smallest.get(node, len(job.unknown)), len(job.unknown))
    suspects: defaultdict[str, list[str]] = defaultdict(list)
    to_split: defaultdict[str, list[str]] = defaultdict(list)
    for c in sorted(candidates, key=lambda c: (c.domain, c.node)):
        if c.node in k.cleared or c.node in k.faulty:
            continue
        if smallest.get(c.node, 2 * min_group_size) < 2 * min_group_size:
            suspects[c.domain].append(c.node)
        else:
            to_split[c.domain].append(c.node)
    return suspects, to_split
