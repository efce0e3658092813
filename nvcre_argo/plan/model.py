"""What a plan is: the nodes that take part, the nodes left out (with a reason a person can act on), and the
node groups, one TrainJob each.

A plan crosses process boundaries (the plan step writes it, the run and record steps and the watcher read
it), so it has one JSON form: `to_json` is deterministic (sorted keys, fixed separators) and `from_json`
reads exactly that back. Argo only ever sees `withparam_items()`, the group names (the run step reads its
nodes from the plan's ConfigMap), so the Workflow stays the same size however many nodes a group has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from nvcre_argo.errors import NvcreError

ExclusionReason = Literal["Cordoned", "MinorityGPUArchitecture", "InsufficientGPUs"]
EXCLUSION_REASONS: tuple[str, ...] = get_args(ExclusionReason)


class PlanError(NvcreError):
    """The nodes cannot be planned as asked (nothing matches, too few GPUs, ...); the message says why."""


@dataclass(frozen=True)
class Exclusion:
    """A node that matched the target but will not run, and why (reported, never attributed a failure)."""

    node: str
    reason: ExclusionReason
    message: str


@dataclass(frozen=True)
class NodeGroup:
    """One TrainJob's nodes.

    `overflow` groups borrow nodes that also belong to one earlier group, their host (so every node is tested
    with a full group size), and run in the host's step, after it (`Plan.hosted_by`). `domain` is the group's
    topology domain (`nvidia.com/gpu.clique`) when all its nodes share one, else None. `pinned` is False only for
    `placement: Unpinned`, where `nodes` sizes the job but the scheduler picks the real nodes. Under
    `testScale: diagnose` groups, and the confirmation groups that follow any other category's groups
    (`plan.confirmation`), are planned round by round: `round` (1-based) and `stage` (the stage that asked for
    the group) are set, and None for every other group.
    """

    name: str
    nodes: tuple[str, ...]
    overflow: bool = False
    domain: str | None = None
    pinned: bool = True
    round: int | None = None
    stage: str | None = None


@dataclass(frozen=True)
class Isolation:
    """What `testScale: diagnose` plans its rounds from: every eligible node's topology domain (its NVLink
    clique, or a ceil(sqrt(N)) chunk without one) and where splitting stops (`minGroupSize`)."""

    domains: tuple[tuple[str, str], ...]
    min_group_size: int


@dataclass(frozen=True)
class PlatformChoice:
    """The platform the plan step found (`source: detected`) or was given (`pinned`, by `nvcre-compile
    --platform`), the nodes' common instance type, the arms applied to the TrainingRuntime in order, and the
    NIC resource found on the nodes (on-prem auto-detection), for the plan preview and the step's log."""

    name: str
    source: Literal["detected", "pinned"]
    instance_type: str | None = None
    arms: tuple[str, ...] = ()
    nic_resource: str | None = None


@dataclass(frozen=True)
class Plan:
    """One category's plan. `candidates` are the nodes that matched the target (sorted by name); the nodes
    in `groups` are those candidates minus `excluded`."""

    architecture: str | None
    candidates: tuple[str, ...]
    excluded: tuple[Exclusion, ...]
    groups: tuple[NodeGroup, ...]
    isolation: Isolation | None = None
    platform: PlatformChoice | None = None

    @property
    def eligible(self) -> tuple[str, ...]:
        """Candidates that were not excluded, in name order."""
        left_out = {exclusion.node for exclusion in self.excluded}
        return tuple(node for node in self.candidates if node not in left_out)

    def withparam_items(self) -> list[str]:
        """Argo `withParam` items: the names of the groups that have a step of their own, `["g0", "g1", ...]`,
        never their nodes (Argo copies each item into node names, annotations and the step's environment).
        Overflow groups have none: their host's step runs them (`hosted_by`)."""
        return [group.name for group in self.groups if not group.overflow]

    def hosted_by(self, name: str) -> tuple[NodeGroup, ...]:
        """The overflow groups the step of group `name` runs after its own job (see `host_of`)."""
        return tuple(group for group in self.groups if group.overflow and self.host_of(group) == name)

    def host_of(self, overflow: NodeGroup) -> str | None:
        """The group whose step runs `overflow`: the one it borrows nodes from. A group borrows from one host
        only (`plan.grouping`); should a plan ever share an overflow group's nodes with several groups, the
        last of them hosts it, so exactly one step runs it. None for a regular group."""
        if not overflow.overflow:
            return None
        shared = set(overflow.nodes)
        lenders = [
            group.name
            for group in self.groups
            if not group.overflow and group.round is None and shared & set(group.nodes)
        ]
        return lenders[-1] if lenders else None

    def round_groups(self, number: int) -> tuple[NodeGroup, ...]:
        """The groups of round `number`, isolation or confirmation (none before that round was planned)."""
        return tuple(group for group in self.groups if group.round == number)

    def group(self, name: str) -> NodeGroup:
        """The group of that name; PlanError when the plan has none (a run step of another plan)."""
        for group in self.groups:
            if group.name == name:
                return group
        names = ", ".join(group.name for group in self.groups) or "none"
        raise PlanError(f"the plan has no group {name!r}; its groups: {names}")

    def to_json(self) -> str:
        document: dict[str, Any] = {
            "architecture": self.architecture,
            "candidates": list(self.candidates),
            "excluded": [{"node": item.node, "reason": item.reason, "message": item.message} for item in self.excluded],
            "groups": [_group_document(group) for group in self.groups],
        }
        if self.platform is not None:
            document["platform"] = {
                "name": self.platform.name,
                "source": self.platform.source,
                "instanceType": self.platform.instance_type,
                "arms": list(self.platform.arms),
                "nicResource": self.platform.nic_resource,
            }
        if self.isolation is not None:
            document["isolation"] = {
                "domains": dict(self.isolation.domains),
                "minGroupSize": self.isolation.min_group_size,
            }
        return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """The inverse of `to_json`; a document of any other shape is a PlanError naming what is wrong."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise PlanError(f"plan is not valid JSON: {error}") from None
        reader = _Reader(document, "plan")
        return cls(
            architecture=reader.optional_str("architecture"),
            candidates=tuple(reader.str_list("candidates")),
            excluded=tuple(_read_exclusion(item) for item in reader.object_list("excluded")),
            groups=tuple(_read_group(item) for item in reader.object_list("groups")),
            isolation=_read_isolation(reader.optional_object("isolation")),
            platform=_read_platform(reader.optional_object("platform")),
        )


def _group_document(group: NodeGroup) -> dict[str, Any]:
    """A group's JSON; the isolation fields only where set, so other plans keep their exact bytes."""
    document: dict[str, Any] = {
        "name": group.name,
        "nodes": list(group.nodes),
        "overflow": group.overflow,
        "domain": group.domain,
        "pinned": group.pinned,
    }
    if group.round is not None:
        document["round"] = group.round
        document["stage"] = group.stage
    return document


def _read_platform(reader: _Reader | None) -> PlatformChoice | None:
    if reader is None:
        return None
    source = reader.string("source")
    if source not in ("detected", "pinned"):
        raise PlanError(f"{reader.where}.source: expected detected or pinned, got {source!r}")
    return PlatformChoice(
        name=reader.string("name"),
        source=cast(Literal["detected", "pinned"], source),
        instance_type=reader.optional_str("instanceType"),
        arms=tuple(reader.str_list("arms")),
        nic_resource=reader.optional_str("nicResource"),
    )


def _read_isolation(reader: _Reader | None) -> Isolation | None:
    if reader is None:
        return None
    domains = reader.str_map("domains")
    return Isolation(domains=tuple(sorted(domains.items())), min_group_size=reader.integer("minGroupSize"))


def _read_exclusion(reader: _Reader) -> Exclusion:
    reason = reader.string("reason")
    if reason not in EXCLUSION_REASONS:
        raise PlanError(f"{reader.where}.reason: unknown exclusion reason {reason!r}")
    return Exclusion(node=reader.string("node"), reason=cast(ExclusionReason, reason), message=reader.string("message"))


def _read_group(reader: _Reader) -> NodeGroup:
    return NodeGroup(
        name=reader.string("name"),
        nodes=tuple(reader.str_list("nodes")),
        overflow=reader.boolean("overflow"),
        domain=reader.optional_str("domain"),
        pinned=reader.boolean("pinned"),
        round=reader.integer("round") if reader.has("round") else None,
        stage=reader.optional_str("stage") if reader.has("round") else None,
    )


class _Reader:
    """Typed access to one JSON object, with the path of the offending field in every error."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise PlanError(f"{where}: expected an object, got {type(value).__name__}")
        self.value: dict[str, Any] = value
        self.where = where

    def _get(self, key: str, kind: type | tuple[type, ...], label: str) -> Any:
        if key not in self.value:
            raise PlanError(f"{self.where}.{key}: missing")
        item = self.value[key]
        if not isinstance(item, kind):
            raise PlanError(f"{self.where}.{key}: expected {label}, got {type(item).__name__}")
        return item

    def string(self, key: str) -> str:
        return str(self._get(key, str, "a string"))

    def optional_str(self, key: str) -> str | None:
        item = self._get(key, (str, type(None)), "a string or null")
        return None if item is None else str(item)

    def boolean(self, key: str) -> bool:
        return bool(self._get(key, bool, "a boolean"))

    def has(self, key: str) -> bool:
        return key in self.value

    def integer(self, key: str) -> int:
        item = self._get(key, int, "an integer")
        if isinstance(item, bool):
            raise PlanError(f"{self.where}.{key}: expected an integer, got bool")
        return int(item)

    def optional_object(self, key: str) -> _Reader | None:
        """The object at `key`, or None when the key is absent (plans that do not need it leave it out)."""
        return _Reader(self.value[key], f"{self.where}.{key}") if key in self.value else None

    def str_map(self, key: str) -> dict[str, str]:
        items = self._get(key, dict, "an object")
        for name, item in items.items():
            if not isinstance(item, str):
                raise PlanError(f"{self.where}.{key}[{name!r}]: expected a string, got {type(item).__name__}")
        return dict(items)

    def str_list(self, key: str) -> list[str]:
        items = self._get(key, list, "a list")
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise PlanError(f"{self.where}.{key}[{index}]: expected a string, got {type(item).__name__}")
        return list(items)

    def object_list(self, key: str) -> list[_Reader]:
        items = self._get(key, list, "a list")
        return [_Reader(item, f"{self.where}.{key}[{index}]") for index, item in enumerate(items)]
