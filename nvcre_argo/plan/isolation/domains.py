"""Candidates with their topology domain (reference §7.6 step 1).

Nodes are screened per NVLink domain because a domain's nodes share the NVSwitch fabric. Without any topology
label there is nothing to share, so nodes are cut into ceil(sqrt(N)) chunks of consecutive names (the
reference: N=64 -> 8, 232 -> 16): about sqrt(N) groups of sqrt(N) nodes balance screening against splitting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from nvcre_argo.plan.isolation.model import Candidate


def assign_domains(domain_by_node: Mapping[str, str | None]) -> tuple[Candidate, ...]:
    """Candidates sorted by node; when no node has a domain, ceil(sqrt(N))-node chunks named `chunk-<i>`.

    A node without a label among labelled ones gets a domain of its own: nothing says which rack it shares.
    """
    nodes = sorted(domain_by_node)
    if not nodes:
        return ()
    if all(domain_by_node[n] is None for n in nodes):
        size = math.ceil(math.sqrt(len(nodes)))
        return tuple(Candidate(node=n, domain=f"chunk-{i // size}") for i, n in enumerate(nodes))
    return tuple(Candidate(node=n, domain=domain_by_node[n] or f"node-{n}") for n in nodes)
