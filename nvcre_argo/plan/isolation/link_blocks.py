"""The blocks a link-search round cuts domains into (`links`): blocks tested pair by pair, so that each
test holds the open domain pairs between its two blocks and inside them.

Why a module of its own: how the blocks are shaped (each side of two-sided open pairs cut apart, the rest by
a rotating digit of their index, separate groups of open pairs kept apart) is pure combinatorics over domain
names and open pairs, independent of what the results prove and of which nodes lend themselves to a test.
"""

from __future__ import annotations

from collections import defaultdict

from nvcre_argo.plan.isolation.knowledge import Pair

BIPARTITE_BLOCKS = 3
"""Blocks per side when the open pairs lie between two sides: 3 x 3 tests leave a ninth of them open for three
nodes per domain."""


def cut_blocks(domains: list[str], pairs: set[Pair], count: int, rotation: int, digit_blocks: int) -> list[list[str]]:
    """The blocks of a link-search round, per connected group of open pairs: each side cut apart where the open
    pairs lie between two sides (`_bipartite_blocks`), the rest together by a rotating digit (`_digit_blocks`,
    at most `digit_blocks` blocks).
    Tests pair blocks with an open pair between them, so blocks of different groups are never tested together."""
    blocks: list[list[str]] = []
    rest: list[str] = []
    for component in components(domains, pairs):
        sides = split_sides(component, pairs)
        if sides is None:
            rest.extend(component)
        else:
            blocks.extend(_bipartite_blocks(sides, min(BIPARTITE_BLOCKS, count - 1)))
    if rest:
        rest_pairs = {p for p in pairs if p[0] in rest}
        blocks.extend(_digit_blocks(sorted(rest), rest_pairs, min(count, digit_blocks), rotation))
    return blocks


def components(domains: list[str], pairs: set[Pair]) -> list[list[str]]:
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


def split_sides(domains: list[str], pairs: set[Pair]) -> tuple[list[str], list[str]] | None:
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
