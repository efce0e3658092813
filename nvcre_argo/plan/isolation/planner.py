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
- link search: while a failure may still be a node's, one re-screen of the involved domains with cleared
  nodes; once a group of cleared nodes failed, the domains are cut into k blocks and every pair of blocks is
  tested at once (each domain lends k-1 cleared nodes), so the open pairs shrink by about k^2 per round
  instead of halving, and the last few pairs are tested one by one. When the open pairs lie between two sides
  (as after a block round: only the failed union of two blocks stays open), each side is cut into blocks
  instead, so no open pair lies inside a block and a faulty link fails one test rather than every test with
  its block. Across many domains (`RESCREEN_DOMAINS`)
  the block search waits for two failures of cleared nodes spanning every open pair, so a lone failed
  re-screen is repeated first: there it meets a transient node more often than a link fault, and a re-screen
  costs one node per domain where a block round costs k-1 (from `LARGE_RESCREEN_DOMAINS` on, three failures).
  From `BATCH_DOMAINS` on, the link tests also wait while a domain has no cleared node to lend yet and other tests
  run anyway, so the late domains join one batch instead of each costing another screen of every domain; from
  `WHOLE_DOMAIN_SCREENING` on, a cross-boundary probe (which takes a whole domain) takes only the nodes the
  link tests leave.
  Known faulty links are kept out of every test. A test of a single pair also runs a second time at
  once on nodes left over, while the pair still needs both failures that make a link fault, so the round
  that reaches a faulty link usually proves it too;
- cross-boundary probing: a failed group inside one domain, larger than `minGroupSize`, whose members were all
  cleared by smaller groups is tested again; a pass makes it a transient, repeated failures an infrastructure
  fault between its halves.

No-NVL screening is not needed for the verdict (it tells NVLink from fabric faults, not which node is at
fault), so this planner leaves it to the baseline; every group runs with MNNVL on.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from nvcre_argo.plan.isolation.knowledge import LINK_ISOLATIONS, Knowledge, Pair, derive_knowledge, domain_pairs
from nvcre_argo.plan.isolation.model import (
    DEFAULT_SETTINGS,
    Candidate,
    Group,
    InfrastructureFault,
    JobResult,
    Round,
    Settings,
    Stage,
    Untested,
    Verdict,
    next_round_number,
)

REPRESENTATIVES_PER_DOMAIN = 2
MAX_LINK_BLOCKS = 6
"""Blocks per link-search round: k blocks cost k-1 nodes per domain and (k-1) x domains node-jobs."""
BIPARTITE_BLOCKS = 3
"""Blocks per side when the open pairs lie between two sides: 3 x 3 tests leave a ninth of them open for three
nodes per domain."""
BATCH_DOMAINS = 16
"""From this many domains on, link tests wait for late domains (`_late_domains`) while other tests run anyway."""
RESCREEN_DOMAINS = 32
"""From this many domains on, a failed re-screen of cleared nodes is repeated before the block search."""
RESCREEN_FAILURES = 2
"""Failures of a re-screen of all open pairs (cleared nodes only) that start the block search."""
LARGE_RESCREEN_DOMAINS = 128
"""From this many domains on, a re-screen is so large that two transients in a row are common: one failure more
starts the block search (whose rounds cost several re-screens each)."""
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
        _follow_up_groups(candidates, knowledge, settings.min_group_size, _block_rounds(results))
        if number <= settings.max_rounds
        else ()
    )
    if groups:
        return Round(number=number, groups=groups)
    return _verdict(candidates, knowledge, rounds=number - 1, round_limit=number > settings.max_rounds)


def _block_rounds(results: Sequence[JobResult]) -> int | None:
    """How many rounds searched links block by block (several inter-screening groups): the block layout
    rotates with it, independently of how many other rounds came in between. None when the last such round
    failed in every group: several faulty links defeat the blocks, and pairs are then tested one by one."""
    per_round: defaultdict[int, list[bool]] = defaultdict(list)
    for r in results:
        if r.group.stage == "inter-screening":
            per_round[r.round].append(r.failed)
    block_rounds = sorted(n for n, outcomes in per_round.items() if len(outcomes) > 1)
    if block_rounds and all(per_round[block_rounds[-1]]):
        return None
    return len(block_rounds)


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
    candidates: Sequence[Candidate], k: Knowledge, min_group_size: int, link_rounds: int | None
) -> tuple[Group, ...]:
    used: set[str] = set()
    groups: list[Group] = []

    def take(nodes: Sequence[str], stage: Stage) -> None:
        used.update(nodes)
        groups.append(Group(nodes=tuple(sorted(nodes)), mnnvl=True, stage=stage))

    domains = _by_domain(candidates)
    many = len(domains) >= WHOLE_DOMAIN_SCREENING
    probes = [result.group.nodes for result in k.unexplained_once]

    def take_probes() -> None:
        for nodes in probes:
            if not used.intersection(nodes):
                take(nodes, "cross-boundary")

    if not many:
        take_probes()
    spare = {d: [n for n in _by_health(nodes, k) if n in k.cleared] for d, nodes in domains.items()}
    suspects, to_split = _classify_unknown(candidates, k, min_group_size)
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
    for group in _link_groups(k, spare, used, link_rounds, can_wait=can_wait):
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


def _open_pairs(k: Knowledge) -> set[Pair]:
    """Domain pairs that no passed group has verified and no fault explains: those some failed group spans, and
    those no group has spanned yet (round 1 screened whole domains)."""
    return {p for p in domain_pairs(k.domain_of.values()) if p not in k.verified and p not in k.faulty_links}


def _link_groups(
    k: Knowledge, spare: dict[str, list[str]], used: set[str], link_rounds: int | None, *, can_wait: bool
) -> list[Group]:
    """Tests of the open domain pairs with cleared nodes.

    While no failed group is down to cleared nodes (its failure may be a node's), one re-screen of every
    domain involved settles all pairs at the cost of one node per domain. Once one is (a link fault is the
    only explanation left), the domains are cut into k blocks and every pair of blocks is tested in the same
    round, or each pair on its own once the open pairs are few or the last block round failed everywhere
    (several faulty links). Known faulty pairs are kept out of every test: they would fail it regardless.
    The tests wait while a domain is late (`_late_domains`) and other tests run this round anyway (`can_wait`).
    """
    pairs = _open_pairs(k)
    available = {d: [n for n in nodes if n not in used] for d, nodes in spare.items()}
    if can_wait and _late_domains(k, pairs):
        return []
    pairs = {p for p in pairs if available[p[0]] and available[p[1]]}
    if not pairs:
        return []
    domains = sorted({d for p in pairs for d in p})
    link_evident = any(not job.unknown and set(job.unverified) & pairs for job in k.failed)
    wide = [d for d in domains if len(available[d]) >= 2]
    blocks_count = min(MAX_LINK_BLOCKS, 1 + min((len(available[d]) for d in wide), default=0), len(wide))
    if not link_evident or _unconfirmed(k, pairs, domains):
        tests = [domains]
    elif link_rounds is None or len(pairs) <= len(domains) or blocks_count < 3:
        tests = _pair_tests(pairs, available)
    else:
        wide_pairs = {(a, b) for a, b in pairs if a in wide and b in wide}
        blocks = _blocks(wide, wide_pairs, blocks_count, link_rounds)
        tests = (
            _pair_tests(pairs, available)
            if not blocks
            else [
                sorted(blocks[i] + blocks[j])
                for i in range(len(blocks))
                for j in range(i + 1, len(blocks))
                if any(a in blocks[i] + blocks[j] and b in blocks[i] + blocks[j] for a, b in wide_pairs)
            ]
        )
    tests = _with_repeats(tests, _direct_failures(k))
    lent: defaultdict[str, int] = defaultdict(int)
    groups: list[Group] = []
    for members in (t for test in tests for t in _avoid_faulty_links(test, set(k.faulty_links))):
        if any(lent[d] >= len(available[d]) for d in members):
            continue
        nodes = []
        for domain in members:
            nodes.append(available[domain][lent[domain]])
            lent[domain] += 1
        groups.append(Group(nodes=tuple(sorted(nodes)), mnnvl=True, stage="inter-screening"))
    return groups


def _late_domains(k: Knowledge, pairs: set[Pair]) -> bool:
    """Whether a domain of an open pair has no cleared node yet but may have one later (it has a node not known
    faulty).

    A test of the pairs with such a domain needs a node of every domain it pairs with: testing the others now
    and the late domain next round screens nearly every domain twice, so the link tests wait for one batch. A
    domain whose cleared nodes are only busy this round (confirmation partners) does not hold the batch back:
    that would cost a round for nothing more than the one node it lends."""
    hopeful = {domain for node, domain in k.domain_of.items() if node not in k.faulty}
    cleared = {k.domain_of[node] for node in k.cleared}
    return any(d not in cleared and d in hopeful for d in {d for p in pairs for d in p})


def _direct_failures(k: Knowledge) -> Counter[Pair]:
    """Failed tests of exactly one domain pair with cleared nodes: `LINK_ISOLATIONS` of them make a fault."""
    counts: Counter[Pair] = Counter()
    for job in k.failed:
        domains = sorted({k.domain_of[n] for n in job.result.group.nodes})
        if not job.unknown and len(domains) == 2:
            counts[(domains[0], domains[1])] += 1
    return counts


def _with_repeats(tests: list[list[str]], direct: Counter[Pair]) -> list[list[str]]:
    """A test of exactly two domains runs as often at once as the pair still needs failures to be a fault,
    on different nodes: a faulty link is then proven in the round that reaches it, while a transient fails
    only one of the copies and the pass verifies the pair. The copies come last, so they only take nodes
    that no first test of this round needs."""
    copies = [test for test in tests if len(test) == 2 for _ in range(LINK_ISOLATIONS - 1 - direct[(test[0], test[1])])]
    return tests + copies


def _unconfirmed(k: Knowledge, pairs: set[Pair], domains: list[str]) -> bool:
    """Whether a failure of many domains' cleared nodes is tested once more, whole, before the block search.

    Across many domains a group of cleared nodes meets a node's one transient failure more often than a link
    fault; the block search costs k-1 nodes per domain, a re-screen one. Two failures of groups of cleared
    nodes spanning every open pair make the link search worth its cost (the representatives' group counts
    once its members are cleared, so a re-screen is only repeated when a faulty node explained that one).
    """
    if len(domains) < RESCREEN_DOMAINS:
        return False
    needed = RESCREEN_FAILURES + (len(domains) >= LARGE_RESCREEN_DOMAINS)
    return sum(1 for job in k.failed if not job.unknown and pairs <= set(job.unverified)) < needed


def _pair_tests(pairs: set[Pair], available: dict[str, list[str]]) -> list[list[str]]:
    """Each open pair on its own, or, around a domain with more open pairs than cleared nodes to lend, its
    partners shared out over the nodes it has (one test per node): a star of open pairs must not take one
    round per pair. Tests that do not fit the lenders this round wait for the next."""
    remaining = set(pairs)
    degree = Counter(d for p in pairs for d in p)
    tests: list[list[str]] = []
    for center in sorted(degree, key=lambda d: (-degree[d], d)):
        partners = sorted(b if a == center else a for a, b in remaining if center in (a, b))
        if not partners:
            continue
        slots = max(1, len(available[center]))
        chunks = [[p] for p in partners] if len(partners) <= slots else [partners[i::slots] for i in range(slots)]
        tests.extend(sorted([center, *chunk]) for chunk in chunks)
        remaining -= {(min(center, p), max(center, p)) for p in partners}
    return tests


def _avoid_faulty_links(members: list[str], faulty: set[Pair]) -> list[list[str]]:
    """The same pairs as one test over `members`, less the known faulty ones: a vertex cover of the faulty
    pairs is left out of the main test, and each cover domain is tested with the rest less its faulty partners
    (a test holding a faulty pair would fail whatever else it holds)."""
    inside = {(a, b) for a, b in faulty if a in members and b in members}
    if not inside:
        return [members]
    cover: list[str] = []
    left = set(inside)
    while left:
        degree: Counter[str] = Counter(d for p in left for d in p)
        pick = min(degree, key=lambda d: (-degree[d], d))
        cover.append(pick)
        left = {p for p in left if pick not in p}
    base = [d for d in members if d not in cover]

    def partners(domain: str) -> set[str]:
        return {b if a == domain else a for a, b in inside if domain in (a, b)}

    tests = [base] + [sorted([c, *(d for d in base if d not in partners(c))]) for c in cover]
    tests += [[a, b] for i, a in enumerate(cover) for b in cover[i + 1 :] if tuple(sorted((a, b))) not in faulty]
    tests = [t for t in tests if len(t) >= 2]
    return [t for t in tests if not any(set(t) < set(other) for other in tests)]


def _blocks(domains: list[str], pairs: set[Pair], count: int, rotation: int) -> list[list[str]]:
    """The blocks of a link-search round, per connected group of open pairs: each side cut apart where the open
    pairs lie between two sides (`_bipartite_blocks`), the rest together by a rotating digit (`_digit_blocks`).
    Tests pair blocks with an open pair between them, so blocks of different groups are never tested together."""
    blocks: list[list[str]] = []
    rest: list[str] = []
    for component in _components(domains, pairs):
        sides = _sides(component, pairs)
        if sides is None:
            rest.extend(component)
        else:
            blocks.extend(_bipartite_blocks(sides, min(BIPARTITE_BLOCKS, count - 1)))
    if rest:
        blocks.extend(_digit_blocks(sorted(rest), {p for p in pairs if p[0] in rest}, count, rotation))
    return blocks


def _components(domains: list[str], pairs: set[Pair]) -> list[list[str]]:
    """The domains joined by open pairs, group by group (each sorted); domains without an open pair are left out.
    Several faulty links far apart each leave their own group: cut together, their blocks would line up the same
    way round after round."""
    neighbours: defaultdict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    seen: set[str] = set()
    components: list[list[str]] = []
    for start in domains:
        if start in seen or start not in neighbours:
            continue
        seen.add(start)
        stack, members = [start], [start]
        while stack:
            for there in neighbours[stack.pop()] - seen:
                seen.add(there)
                stack.append(there)
                members.append(there)
        components.append(sorted(members))
    return components


def _sides(domains: list[str], pairs: set[Pair]) -> tuple[list[str], list[str]] | None:
    """The two sides of the open pairs among `domains` when no open pair lies within a side (a two-colouring),
    else None.

    This is the usual shape after a block round: the one failed union of two blocks leaves open only the pairs
    between them, since the other tests with either block passed."""
    members = set(domains)
    neighbours: defaultdict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        if a in members and b in members:
            neighbours[a].add(b)
            neighbours[b].add(a)
    colour: dict[str, int] = {}
    for start in domains:
        if start in colour or start not in neighbours:
            continue
        colour[start] = 0
        queue = [start]
        while queue:
            here = queue.pop()
            for there in sorted(neighbours[here]):
                if there not in colour:
                    colour[there] = 1 - colour[here]
                    queue.append(there)
                elif colour[there] == colour[here]:
                    return None
    sides = ([d for d in domains if colour.get(d) == 0], [d for d in domains if colour.get(d) == 1])
    return sides if sides[0] and sides[1] else None


def _bipartite_blocks(sides: tuple[list[str], list[str]], per_side: int) -> list[list[str]]:
    """Each side cut into `per_side` consecutive blocks. No open pair lies inside a block, so each lies in
    exactly one test (a block of each side): a faulty link fails one test and leaves open a 1/per_side^2 share,
    for per_side tests per domain; blocks mixing both sides would hold it inside a block, failing every test
    with that block."""
    blocks: list[list[str]] = []
    for side in sides:
        parts = min(per_side, len(side))
        blocks.extend(side[i * len(side) // parts : (i + 1) * len(side) // parts] for i in range(parts))
    return blocks


def _digit_blocks(domains: list[str], pairs: set[Pair], count: int, rotation: int) -> list[list[str]]:
    """Cut the domains into `count` blocks by one base-`count` digit of their index, the digit rotating with
    each block round among those that separate some open pair. Any two domains differ in some digit, so a faulty
    pair inside one block is split within a few rounds; a fixed layout would test it inside one block forever."""
    index = {d: i for i, d in enumerate(domains)}
    digits = 1
    while count**digits < len(domains):
        digits += 1

    def block(domain: str, digit: int) -> int:
        return (index[domain] // int(count**digit)) % count

    def layout(digit: int) -> list[list[str]]:
        blocks: list[list[str]] = [[] for _ in range(count)]
        for domain in domains:
            blocks[block(domain, digit)].append(domain)
        return [b for b in blocks if b]

    useful = [p for p in range(digits) if any(block(a, p) != block(b, p) for a, b in pairs) and len(layout(p)) >= 3]
    return layout(useful[rotation % len(useful)]) if useful else []


def _verdict(candidates: Sequence[Candidate], k: Knowledge, *, rounds: int, round_limit: bool) -> Verdict:
    faults = [
        InfrastructureFault(
            domain=f"{a}|{b}",
            group_a=tuple(n for n in nodes if k.domain_of[n] == a),
            group_b=tuple(n for n in nodes if k.domain_of[n] == b),
            stage="inter-screening",
        )
        for (a, b), nodes in sorted(k.faulty_links.items())
    ]
    for result in k.unexplained_repeatedly:
        nodes = result.group.nodes
        half = len(nodes) // 2
        faults.append(
            InfrastructureFault(
                domain="|".join(sorted({k.domain_of[n] for n in nodes})),
                group_a=nodes[:half],
                group_b=nodes[half:],
                stage="cross-boundary",
            )
        )
    reason = "round limit reached" if round_limit else "no cleared node of its domain left to pair with"
    untested = tuple(
        Untested(node=c.node, reason=reason)
        for c in sorted(candidates, key=lambda c: c.node)
        if c.node not in k.cleared and c.node not in k.faulty
    )
    return Verdict(
        rounds=rounds,
        faulty=tuple(sorted(k.faulty)),
        healthy=tuple(sorted(k.cleared)),
        infrastructure_faults=tuple(faults),
        untested=untested,
    )
