"""The verdict of an isolation run: faulty and cleared nodes, infrastructure faults and untested nodes.

Why one place: the planner stops when no test is left to learn from or the round limit is reached, and what
is known then is read off `knowledge` alone: each faulty link is an infrastructure fault between its two
domains, a group that failed repeatedly although smaller groups cleared all its members is a fault between
its halves (cross-boundary), and every node neither cleared nor faulty is untested, with the reason (a node
whose tests never started says so).
"""

from __future__ import annotations

from collections.abc import Sequence

from nvcre_argo.plan.isolation.knowledge import NOT_RUN_LIMIT, Knowledge
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
    untested = tuple(
        Untested(node=c.node, reason=NEVER_RAN if c.node in k.abandoned else reason)
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
