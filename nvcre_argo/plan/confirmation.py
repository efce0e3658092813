"""Confirmation of unattributed failures: which node of a failed group was really at fault.

A synchronous job that hangs, never starts, steps slowly or misses its bandwidth does so on every rank, so
its result blames every node of its group alike: in fixed pairs, a hung node takes its healthy partner down
with it. Such a group's nodes are *suspects*, not failures. Once a category's groups have run, each suspect is
tested again in a group of the same size whose other members are *cleared* (they passed a whole test in this
category): a pass clears the suspect, a failure convicts it, since every other member is known healthy. A
node blamed by evidence of its own (its rank crashed first, the health check fired on it) is never a suspect:
the result already names it.

Confirmation runs in rounds of node-disjoint groups, after the category's groups (`round` 1, 2, ... of the
plan, named `c<round>-g<i>`, stage `confirmation`). A suspect cleared in one round is a partner in the next.
A suspect that no round could confirm (no cleared node to pair it with, or the round limit) keeps the blame
its group gave it, as before confirmation existed.

Pure functions of (the plan's groups, what each job's result says), so the `plan-round` step, the `record`
step and the tests reach the same verdict from the same results; a suspect's confirmation job is recognised by
replaying the rounds in order, never by the order of its nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nvcre_argo.plan.model import NodeGroup

CONFIRMATION_STAGE = "confirmation"
MAX_CONFIRMATION_ROUNDS = 3
"""Each round confirms as many suspects as the cleared nodes can partner; three rounds cover every case where
the healthy nodes outnumber the suspects, and bound the category's extra time when they do not."""


def confirmable(groups: Sequence[NodeGroup]) -> bool:
    """Whether any group could ever need confirmation: a pinned group of two or more nodes (a one-node group's
    result always names its node). The `confirm` step is skipped for a plan without one."""
    return any(group.pinned and len(group.nodes) > 1 for group in _first_wave(groups))


def confirmation_group_name(number: int, index: int) -> str:
    return f"c{number}-g{index}"


@dataclass(frozen=True)
class Blame:
    """What one job's result says about its nodes: `passed` (every iteration passed), the nodes it `blamed`,
    and whether that blame is `unattributed` (every node of the group blamed alike, none by evidence of its
    own), so the result cannot tell which node failed."""

    passed: bool
    blamed: frozenset[str] = frozenset()
    unattributed: bool = False


@dataclass(frozen=True)
class Confirmation:
    """Where confirmation stands: the suspects, each with the first group that blamed it unattributed
    (`origin`), those `cleared` or `convicted` (by the name of the job that decided it), the suspects still
    `open`, the `healthy` nodes partners are taken from, and the nodes a confirmation job blamed by evidence
    of their own (a partner that crashed)."""

    origin: Mapping[str, str] = field(default_factory=dict)
    cleared_by: Mapping[str, str] = field(default_factory=dict)
    convicted_by: Mapping[str, str] = field(default_factory=dict)
    healthy: frozenset[str] = frozenset()
    attributed: frozenset[str] = frozenset()

    @property
    def suspects(self) -> frozenset[str]:
        return frozenset(self.origin)

    @property
    def open(self) -> tuple[str, ...]:
        """The suspects no job has decided yet, in name order."""
        return tuple(sorted(self.suspects - set(self.cleared_by) - set(self.convicted_by)))


def _first_wave(groups: Sequence[NodeGroup]) -> list[NodeGroup]:
    return [group for group in groups if group.round is None]


def confirmation_state(groups: Sequence[NodeGroup], blames: Mapping[str, Blame]) -> Confirmation:
    """Replay the category's groups, then every confirmation round in order (see the module docstring).

    Groups without a result are neither passes nor suspects: the record step blames their nodes for it."""
    first = _first_wave(groups)
    attributed = {
        node for group in first if (blame := blames.get(group.name)) and not blame.unattributed for node in blame.blamed
    }
    healthy = {node for group in first if (blame := blames.get(group.name)) and blame.passed for node in group.nodes}
    origin: dict[str, str] = {}
    for group in first:
        blame = blames.get(group.name)
        if group.pinned and len(group.nodes) > 1 and blame is not None and blame.unattributed:
            for node in group.nodes:
                if node not in attributed:
                    origin.setdefault(node, group.name)
    suspects = set(origin)
    # A suspect that passed another whole test (an overflow group shares nodes with its host) is cleared by it.
    cleared_by = {
        node: group.name
        for group in first
        if (blame := blames.get(group.name)) and blame.passed
        for node in group.nodes
        if node in suspects
    }
    convicted_by: dict[str, str] = {}
    healthy -= attributed
    last_round = max((group.round for group in groups if group.round is not None), default=0)
    for number in range(1, last_round + 1):
        open_before = suspects - set(cleared_by) - set(convicted_by)
        for job in (group for group in groups if group.round == number):
            blame = blames.get(job.name)
            tested = sorted(open_before.intersection(job.nodes))
            if blame is None:
                continue  # its run never finished: the suspect is tried again
            if blame.passed:
                healthy.update(job.nodes)
                cleared_by.update((node, job.name) for node in tested)
            elif blame.unattributed or blame.blamed.intersection(tested):
                convicted_by.update((node, job.name) for node in tested)
            if not blame.unattributed:
                attributed.update(blame.blamed - set(tested))
    healthy -= attributed | set(convicted_by)
    return Confirmation(
        origin=origin,
        cleared_by=cleared_by,
        convicted_by=convicted_by,
        healthy=frozenset(healthy),
        attributed=frozenset(attributed),
    )


def plan_confirmation_round(
    groups: Sequence[NodeGroup], blames: Mapping[str, Blame], number: int
) -> tuple[NodeGroup, ...]:
    """Round `number`'s confirmation groups (node-disjoint), or none when confirmation is over: no suspect is
    open, no cleared node is left to partner one, or the round limit is reached.

    Each open suspect, in name order, joins as many cleared nodes as its group had other members, taken from
    its own topology domain first (then in name order): a group inside one NVLink domain tested that domain's
    fabric, and partners across domains would test another (on a multi-node NVLink system, a slower one,
    whose bandwidth could convict a healthy suspect). Suspects that find too few partners wait for the next
    round, when the suspects cleared in this one partner them too."""
    if number > MAX_CONFIRMATION_ROUNDS:
        return ()
    state = confirmation_state(groups, blames)
    sizes = _suspect_group_sizes(groups, blames, state.suspects)
    domains = _known_domains(groups)
    partners = sorted(state.healthy)
    planned: list[NodeGroup] = []
    for suspect in state.open:
        wanted = sizes[suspect] - 1
        if len(partners) < wanted:
            continue
        home = domains.get(suspect)
        taken = sorted(partners, key=lambda node: home is not None and domains.get(node) != home)[:wanted]
        partners = [node for node in partners if node not in taken]
        domain = home if all(domains.get(node) == home for node in taken) else None
        name = confirmation_group_name(number, len(planned))
        planned.append(NodeGroup(name, (suspect, *taken), domain=domain, round=number, stage=CONFIRMATION_STAGE))
    return tuple(planned)


def _known_domains(groups: Sequence[NodeGroup]) -> dict[str, str]:
    """Each node's topology domain, as far as the category's groups tell it: the domain of a group whose
    nodes all share one (`NodeGroup.domain`)."""
    return {node: group.domain for group in _first_wave(groups) if group.domain is not None for node in group.nodes}


def _suspect_group_sizes(
    groups: Sequence[NodeGroup], blames: Mapping[str, Blame], suspects: frozenset[str]
) -> dict[str, int]:
    """The size of the largest unattributed group each suspect was in: its confirmation job has that size, so
    it tests what its group tested (two nodes for a pair)."""
    sizes: dict[str, int] = {}
    for group in _first_wave(groups):
        blame = blames.get(group.name)
        if blame is None or not blame.unattributed:
            continue
        for node in suspects.intersection(group.nodes):
            sizes[node] = max(sizes.get(node, 0), len(group.nodes))
    return sizes
