"""Link search: the tests of an isolation round that find faulty links between domains, run on cleared nodes
so that a failure can only be the link's.

Why this shape: while a failure may still be a node's, one re-screen of the involved domains with cleared
nodes settles every pair at the cost of one node per domain; once a group of cleared nodes failed, the domains
are cut into k blocks and every pair of blocks is tested at once (each domain lends k-1 cleared nodes), so the
open pairs shrink by about k^2 per round instead of halving, and the last few pairs are tested one by one.
When the open pairs lie between two sides (as after a block round: only the failed union of two blocks stays
open), each side is cut into blocks instead, so no open pair lies inside a block and a faulty link fails one
test rather than every test with its block. From `BATCH_DOMAINS` on, the link tests also wait while a domain
has no cleared node to lend yet and other tests run anyway, so the late domains join one batch instead of each
costing another screen of every domain.

Across many domains (`FOCUS_DOMAINS`) node-jobs are spent where the failures point. A failed re-screen there
meets a transient node about as often as a link fault, so the first block round has only three blocks (two
nodes per domain), which confirms the failure and narrows it down at once, and so do the later ones (node-jobs
count more than the round or two that more blocks would save there); from `LARGE_RESCREEN_DOMAINS` on,
where transients in a row are common, the re-screen is repeated instead until it failed three times. Every
later round searches only the open pairs most failures hold (`_focus`): after a failed block round those lie
inside one block or between two, and cutting every domain of an open pair apart again would cost k-1 nodes of
each. The other open pairs are tested by two large tests (`_sweep_tests`) beside the last pair tests, or by
one re-screen once the found link explains their failures.

Known faulty links are kept out of every test. A test of a single pair also runs a second time at once on
nodes left over, while the pair still needs both failures that make a link fault, so the round that reaches a
faulty link usually proves it too.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from nvcre_argo.plan.isolation.knowledge import LINK_ISOLATIONS, Knowledge, Pair, domain_pairs
from nvcre_argo.plan.isolation.link_blocks import cut_blocks, split_sides
from nvcre_argo.plan.isolation.model import Group, JobResult

MAX_LINK_BLOCKS = 6
"""Blocks per link-search round: k blocks cost k-1 nodes per domain and (k-1) x domains node-jobs."""
FEW_BLOCKS = 3
"""Blocks of a block round across many domains, short of `LARGE_RESCREEN_DOMAINS` (`_digit_blocks_cap`): 3 blocks
cost 2 nodes per domain, where 6 cost 5 for a search that ends only a round or two sooner."""
BATCH_DOMAINS = 16
"""From this many domains on, link tests wait for late domains (`_late_domains`) while other tests run anyway."""
FOCUS_DOMAINS = 32
"""From this many domains on, the search narrows down the likeliest pairs first (`_focus`); below, every open
pair is searched at once, which costs little and settles several faulty links together."""
BLOCK_ROUND_TESTS = 3
"""Inter-screening groups in one round that make it a block round (`BlockRounds`): three blocks tested
pair by pair are the fewest."""
LARGE_RESCREEN_DOMAINS = 128
"""From this many domains on, a re-screen is so large that two transients in a row are common: it is repeated
until `LARGE_RESCREEN_FAILURES` failures hold the likeliest pairs (a block round costs several re-screens)."""
LARGE_RESCREEN_FAILURES = 3


@dataclass(frozen=True)
class BlockRounds:
    """The link search's block rounds so far (rounds with at least `BLOCK_ROUND_TESTS` inter-screening groups).

    `count` rotates the block layout, independently of how many other rounds came in between. When the last
    ones failed in every group (`failed_everywhere` of them in a row), several faulty links defeat the
    blocks, and pairs are tested one by one (`_one_by_one`). A re-screen split around a known faulty link
    (two groups) is no block round: both fail when a second faulty link lies elsewhere, which says nothing
    about the blocks."""

    count: int = 0
    failed_everywhere: int = 0


def count_block_rounds(results: Sequence[JobResult]) -> BlockRounds:
    """The block rounds among `results` (`BlockRounds`)."""
    per_round: defaultdict[int, list[bool]] = defaultdict(list)
    for r in results:
        if r.group.stage == "inter-screening" and r.ran:
            per_round[r.round].append(r.failed)
    block_rounds = sorted(n for n, outcomes in per_round.items() if len(outcomes) >= BLOCK_ROUND_TESTS)
    streak = 0
    for n in reversed(block_rounds):
        if not all(per_round[n]):
            break
        streak += 1
    return BlockRounds(count=len(block_rounds), failed_everywhere=streak)


def _open_pairs(k: Knowledge) -> set[Pair]:
    """Domain pairs that no passed group has verified and no fault explains: those some failed group spans, and
    those no group has spanned yet (round 1 screened whole domains)."""
    return {p for p in domain_pairs(k.domain_of.values()) if p not in k.verified and p not in k.faulty_links}


def plan_link_groups(
    k: Knowledge, spare: dict[str, list[str]], used: set[str], block_rounds: BlockRounds, *, can_wait: bool
) -> list[Group]:
    """Tests of the open domain pairs with cleared nodes.

    While no failed group of cleared nodes holds an open pair (a failure may still be a node's), one
    re-screen of every domain involved settles all pairs at the cost of one node per domain. Once one does
    (a link fault is the only explanation left), the search narrows down the likeliest pairs (`_focus`):
    their domains are cut into blocks and every pair of blocks is tested in the same round, or each pair on
    its own once they are few, alongside two tests of every other open pair (`_sweep_tests`). Known faulty
    pairs are kept out of every test: they would fail it regardless. The tests wait while a domain is late
    (`_late_domains`) and other tests run this round anyway (`can_wait`).
    """
    pairs = _open_pairs(k)
    available = {d: [n for n in nodes if n not in used] for d, nodes in spare.items()}
    if can_wait and _late_domains(k, pairs):
        return []
    pairs = {p for p in pairs if available[p[0]] and available[p[1]]}
    if not pairs:
        return []
    domains = sorted({d for p in pairs for d in p})
    evidence = _link_evidence(k, pairs)
    if not evidence or _unconfirmed(evidence, domains):
        tests = _with_repeats([domains], _direct_failures(k))
    else:
        focus = _focus(evidence) if len(domains) >= FOCUS_DOMAINS else pairs
        digit_blocks = _digit_blocks_cap(domains, block_rounds)
        search = _search_tests(focus, available, block_rounds, digit_blocks, _failed_tests(k))
        tests = _with_repeats(search, _direct_failures(k))
        if pairs - focus and _few(focus):
            tests += _sweep_tests(domains, focus, set(k.faulty_links))
    lent: defaultdict[str, int] = defaultdict(int)
    groups: list[Group] = []
    for members in (t for test in tests for t in _avoid_faulty_links(test, set(k.faulty_links), pairs)):
        if any(lent[d] >= len(available[d]) for d in members):
            continue
        nodes = []
        for domain in members:
            nodes.append(available[domain][lent[domain]])
            lent[domain] += 1
        groups.append(Group(nodes=tuple(sorted(nodes)), mnnvl=True, stage="inter-screening"))
    return groups


def _link_evidence(k: Knowledge, pairs: set[Pair]) -> Counter[Pair]:
    """For each open pair, how many failed tests of cleared nodes hold it that no known faulty link explains.

    Under one faulty link, the likeliest culprit is the open pair held by the most such failures: every test
    holding the faulty link failed, while a transient fails one test only. A failure holding a known faulty
    link is explained by it and says nothing about the other pairs it spans."""
    counts: Counter[Pair] = Counter()
    for job in k.failed:
        if job.unknown or any(p in k.faulty_links for p in job.unverified):
            continue
        counts.update(p for p in job.unverified if p in pairs)
    return counts


def _focus(evidence: Counter[Pair]) -> set[Pair]:
    """The open pairs with the most evidence (`_link_evidence`): the block search narrows these down first.

    Searching all open pairs instead would cut every domain into blocks again after a failed block round,
    although the failed tests already point at one block or one pair of blocks. The other open pairs are
    tested once the focus is settled, by a re-screen that leaves the found faulty link out."""
    most = max(evidence.values())
    return {p for p, count in evidence.items() if count == most}


def _digit_blocks_cap(domains: list[str], block_rounds: BlockRounds) -> int:
    """How many blocks a block round may cut the focus into where no two sides stand out.

    Across many domains (from `FOCUS_DOMAINS` to `LARGE_RESCREEN_DOMAINS`) the first block round follows a
    single failed re-screen, which is as likely a transient's as a link's, and every later one searches only
    the focus: `FEW_BLOCKS` blocks, which confirm a failure for two nodes per domain while narrowing it down by
    a third, where a second re-screen would only confirm it and six blocks would cost five nodes per domain.
    After a block round that failed everywhere (several faulty links) more blocks keep some tests free of
    them. From `LARGE_RESCREEN_DOMAINS` on, rounds count more: a failure is confirmed by re-screens and each
    block round narrows by as much as `MAX_LINK_BLOCKS` allows."""
    few = FOCUS_DOMAINS <= len(domains) < LARGE_RESCREEN_DOMAINS and not block_rounds.failed_everywhere
    return FEW_BLOCKS if few else MAX_LINK_BLOCKS


def _search_tests(
    pairs: set[Pair],
    available: dict[str, list[str]],
    block_rounds: BlockRounds,
    digit_blocks: int,
    failed_tests: set[frozenset[str]],
) -> list[list[str]]:
    """Tests that narrow down the faulty link among `pairs`: blocks of domains (at most `digit_blocks` where
    no two sides stand out) tested pair by pair, or each pair on its own once the pairs are few or the last
    block round failed everywhere (several faulty links). `failed_tests` are the domain sets that failed with
    cleared nodes before (`_pair_tests` does not run them again)."""
    domains = sorted({d for p in pairs for d in p})
    wide = [d for d in domains if len(available[d]) >= 2]
    blocks_count = min(MAX_LINK_BLOCKS, 1 + min((len(available[d]) for d in wide), default=0), len(wide))
    if _one_by_one(pairs, block_rounds) or blocks_count < 3:
        return _pair_tests(pairs, available, failed_tests)
    wide_pairs = {(a, b) for a, b in pairs if a in wide and b in wide}
    blocks = cut_blocks(wide, wide_pairs, blocks_count, block_rounds.count, digit_blocks)
    if not blocks:
        return _pair_tests(pairs, available, failed_tests)
    return [
        sorted(blocks[i] + blocks[j])
        for i in range(len(blocks))
        for j in range(i + 1, len(blocks))
        if any(a in blocks[i] + blocks[j] and b in blocks[i] + blocks[j] for a, b in wide_pairs)
    ]


def _one_by_one(pairs: set[Pair], block_rounds: BlockRounds) -> bool:
    """Whether the pairs are tested one by one rather than by blocks: when they are few (`_few`), or after a
    block round that failed everywhere (several faulty links defeat the blocks). Across many domains
    (`FOCUS_DOMAINS`) the focus changes after such a round, so only a focus of at most two pairs per domain
    (two node-jobs each, about what a block round costs) goes pair by pair at once, and any focus after a
    second such round in a row, which keeps the search from cutting blocks that fail everywhere forever."""
    if _few(pairs):
        return True
    if block_rounds.failed_everywhere == 1:
        domains = {d for p in pairs for d in p}
        return len(domains) < FOCUS_DOMAINS or len(pairs) <= 2 * len(domains)
    return block_rounds.failed_everywhere > 1


def _few(pairs: set[Pair]) -> bool:
    """Whether the pairs are few enough to be tested one by one: no more pairs than domains they span."""
    return len(pairs) <= len({d for p in pairs for d in p})


def _sweep_tests(domains: list[str], focus: set[Pair], faulty: set[Pair]) -> list[list[str]]:
    """Two tests of every open pair outside the focus, when the focus is all pairs between two sides X and Y
    (one pair, a star, or what a block round leaves): every domain but Y, and every domain but X. No pair
    of the focus lies in either, so they pass unless another faulty link lies elsewhere, and the round that
    proves the focused link settles the rest too, instead of one more round of re-screening afterwards.
    Otherwise none: a focus inside one block would need a test per domain of the block. The caller runs them
    once the focus is tested pair by pair: run with every block round, they would be needed again after each,
    and these large tests fail on a transient more often than the small ones. Around known faulty links
    (`faulty`) each of the two is split (`_avoid_faulty_links`); when that costs more than leaving a vertex
    cover of the focus and the faulty links out at once, the latter is taken."""
    members = sorted({d for p in focus for d in p})
    sides = split_sides(members, focus)
    if sides is None or len(focus) != len(sides[0]) * len(sides[1]):
        return []
    halves = [t for side in reversed(sides) for t in _avoid_faulty_links([d for d in domains if d not in side], faulty)]
    covered = _avoid_faulty_links(domains, faulty | focus)
    return min((halves, covered), key=lambda tests: sum(len(t) for t in tests))


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


def _unconfirmed(evidence: Counter[Pair], domains: list[str]) -> bool:
    """Whether the open pairs are re-screened, whole, once more before the block search.

    From `LARGE_RESCREEN_DOMAINS` domains on, a re-screen meets a node's one transient failure so often that
    two in a row are common, and every block round costs several re-screens: the search waits for
    `LARGE_RESCREEN_FAILURES` failures of cleared nodes holding the likeliest pairs (`_link_evidence`). This
    also holds after a faulty link is found: the other open pairs then only have failures of single tests,
    transients, against them, and one re-screen settles them. Fewer domains go to a confirming block round
    (`_digit_blocks_cap`) at once.
    """
    return len(domains) >= LARGE_RESCREEN_DOMAINS and max(evidence.values()) < LARGE_RESCREEN_FAILURES


def _pair_tests(
    pairs: set[Pair], available: dict[str, list[str]], failed_tests: set[frozenset[str]]
) -> list[list[str]]:
    """Each open pair on its own, or, around a domain with more open pairs than cleared nodes to lend, its
    partners shared out over the nodes it has (one test per node): a star of open pairs must not take one
    round per pair. A share whose test already failed is halved (`_unfailed_shares`). Tests that do not fit
    the lenders this round wait for the next."""
    remaining = set(pairs)
    degree = Counter(d for p in pairs for d in p)
    tests: list[list[str]] = []
    for center in sorted(degree, key=lambda d: (-degree[d], d)):
        partners = sorted(b if a == center else a for a, b in remaining if center in (a, b))
        if not partners:
            continue
        slots = max(1, len(available[center]))
        chunks = [[p] for p in partners] if len(partners) <= slots else [partners[i::slots] for i in range(slots)]
        tests.extend(
            sorted([center, *share]) for chunk in chunks for share in _unfailed_shares(center, chunk, failed_tests)
        )
        remaining -= {(min(center, p), max(center, p)) for p in partners}
    return tests


def _unfailed_shares(center: str, partners: list[str], failed_tests: set[frozenset[str]]) -> list[list[str]]:
    """`partners` as one share of `center`'s tests, or, if that test already failed with cleared nodes, halved
    until no share repeats a failed test: the same test would only fail again and the search would never end
    (a domain with one node to lend and two open pairs, one of them faulty, retested both at once)."""
    if len(partners) == 1 or frozenset([center, *partners]) not in failed_tests:
        return [partners]
    half = len(partners) // 2
    return _unfailed_shares(center, partners[:half], failed_tests) + _unfailed_shares(
        center, partners[half:], failed_tests
    )


def _failed_tests(k: Knowledge) -> set[frozenset[str]]:
    """The domain sets of the failed tests whose nodes were all cleared: only a link (or a transient) fails them."""
    return {frozenset(k.domain_of[n] for n in job.result.group.nodes) for job in k.failed if not job.unknown}


def _avoid_faulty_links(members: list[str], faulty: set[Pair], wanted: set[Pair] | None = None) -> list[list[str]]:
    """Tests of the `wanted` pairs among `members` (every pair of them by default) that hold no known faulty pair:
    a vertex cover of the faulty pairs is left out of the main test, and each cover domain is tested with its
    wanted partners that are not its faulty ones (a test holding a faulty pair would fail whatever else it
    holds).

    Only the wanted pairs are tested, and a domain none of whose wanted pairs lies inside a test is left out of
    it: a re-screen of the pairs of one late domain, split around a found faulty link, otherwise screens every
    domain twice, where the late domain's pairs need one domain more than a single screen."""
    inside = {(a, b) for a, b in faulty if a in members and b in members}
    if wanted is None:
        wanted = set(domain_pairs(members))
    cover: list[str] = []
    left = set(inside)
    while left:
        degree: Counter[str] = Counter(d for p in left for d in p)
        pick = min(degree, key=lambda d: (-degree[d], d))
        cover.append(pick)
        left = {p for p in left if pick not in p}
    base = [d for d in members if d not in cover]
    testable = wanted - faulty

    def partners(domain: str) -> list[str]:
        return [d for d in members if d != domain and (min(d, domain), max(d, domain)) in testable]

    tests = [base] + [sorted([c, *(d for d in partners(c) if d in base)]) for c in cover]
    tests += [[a, b] for i, a in enumerate(cover) for b in cover[i + 1 :] if b in partners(a)]
    tests = [_wanted_only(t, wanted) for t in tests]
    tests = [t for t in tests if len(t) >= 2]
    return [t for t in tests if not any(set(t) < set(other) for other in tests)]


def _wanted_only(test: list[str], wanted: set[Pair]) -> list[str]:
    """The domains of `test` that hold a wanted pair inside it."""
    inside = set(test)
    return [d for d in test if any(p in wanted for p in ((min(d, o), max(d, o)) for o in inside if o != d))]
