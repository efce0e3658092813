"""The verdict of an isolation run: faulty and cleared nodes, infrastructure faults and untested nodes.

Why one place: the planner stops when no test is left to learn from or the round limit is reached, and what
is known then is read off `knowledge` alone: each faulty link is an infrastructure fault between its two
domains, a group that failed repeatedly although smaller groups cleared all its members is a fault between
its halves (cross-boundary), and every node neither cleared nor faulty is untested, with the reason (a node
whose tests never started says so). A cleared node is certified only when every link of its domain to another
domain with cleared nodes was seen passing: when the round limit ends the search first, the cleared nodes of
the domains still holding an open pair are untested too, naming the link, so a link never tested cannot pass
the category in silence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from nvcre_argo.plan.isolation.knowledge import NOT_RUN_LIMIT, Knowledge, domain_pairs
from nvcre_argo.plan.isolation.model import Candidate, InfrastructureFault, Untested, Verdict

NEVER_RAN = f"its tests never started ({NOT_RUN_LIMIT} times the controllers created none of their pods in time)"


def build_verdict(candidates: Sequence[Candidate], k: Knowledge, *, rounds: int, round_limit: bool) -> Verdict:
    """What `k` proves after `rounds` rounds; `round_limit` when the round limit, not a lack of tests, ended the
    run (the untested nodes' reason)."""
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
    open_links = _open_links(k)
    why = "round limit reached" if round_limit else "no test of it was left to plan"
    untested = tuple(
        Untested(node=c.node, reason=NEVER_RAN if c.node in k.abandoned else reason)
        if c.node not in k.cleared
        else Untested(node=c.node, reason=_link_reason(open_links[k.domain_of[c.node]], why))
        for c in sorted(candidates, key=lambda c: c.node)
        if c.node not in k.faulty and (c.node not in k.cleared or k.domain_of[c.node] in open_links)
    )
    return Verdict(
        rounds=rounds,
        faulty=tuple(sorted(k.faulty)),
        healthy=tuple(sorted(n for n in k.cleared if k.domain_of[n] not in open_links)),
        infrastructure_faults=tuple(faults),
        untested=untested,
    )


def _open_links(k: Knowledge) -> dict[str, list[str]]:
    """For each domain, the other domains its link to was never seen passing nor found faulty, among the
    domains that have a cleared node (a domain without one has nothing left to certify)."""
    lending = {k.domain_of[n] for n in k.cleared}
    partners: defaultdict[str, list[str]] = defaultdict(list)
    for a, b in domain_pairs(lending):
        if (a, b) not in k.verified and (a, b) not in k.faulty_links:
            partners[a].append(b)
            partners[b].append(a)
    return dict(partners)


def _link_reason(partners: list[str], why: str) -> str:
    """`its domain's link to <domain> (and <n> more) was never tested (<why>)`."""
    more = f" and {len(partners) - 1} more" if len(partners) > 1 else ""
    return f"its domain's link to {partners[0]}{more} was never tested ({why})"
