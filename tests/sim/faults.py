"""The fault plan of the simulated GPU cluster: what a healthy node measures, and which node misbehaves how.

Why a plan document: an end-to-end test states its scenario once (`gpu-node-3 crashes with 137 after 1 s`), and
both the sim kubelet (what happens, through `tests/sim/workload.py`) and the test's assertions (what the
product must attribute) read the same plan. The loader is as strict as every input the project owns: unknown
keys, and fields that mean nothing for the node's fault kind, are errors; every error names its path in the
YAML spelling (`nodes["gpu-node-3"].exitCode`) and all of them are reported at once, in document order, as
one `FaultPlanError` (a `DocumentError`, so it renders like the product's own input errors).

    defaults:                  # every key optional
      durationSeconds: 3       # how long a healthy workload runs before it succeeds
      busBandwidthGBps: 380    # what an NCCL test measures on a healthy node
      tflopsPerGpu: 400        # what Megatron-LM reports per GPU on a healthy node
      stepTimeMs: 2000         # Megatron-LM's time per iteration on a healthy node
      logsReadable: true       # false: the kubelet refuses every workload log (nothing can be measured)
    nodes:
      <node>: {fault: <kind>, ...}   # unlisted nodes are healthy
    links:                     # broken network links between NVLink domains; optional
      - between: [<domainA>, <domainB>]   # two different `nvidia.com/gpu.clique` node label values
        afterSeconds: 1        # when the collective fails (default 1)
        exitCode: 1            # what the failing workload exits with (1..255, default 1)

Fault kinds and the fields each takes (anything else is rejected):
- `healthy`, `slow`: `busBandwidthGBps`, `tflopsPerGpu`, `stepTimeMs` override the defaults for this node
  (`slow` needs at least one);
- `crash`, `transient`: `exitCode` (1..255, default 1), `afterSeconds` (default 1), `reason` (the container's
  terminated reason, default `Error`); `transient` crashes on the node's first workload only (a training
  run's checkpoints saved before the crash let the retry resume: `tests/sim/workload.py` says how to place
  `afterSeconds` after the first checkpoint, or before any);
- `hang`: `afterSeconds` (optional): it blocks then, having printed every result/iteration due before it;
  unset, it blocks right after its first one;
- `stall`, `datacheck`, `nomeasurement`: nothing (`nomeasurement`: an nccl-tests run of the node's
  group succeeds but its result table never reaches the log, so there is nothing to measure);
- `health`: `afterSeconds`, and exactly one of `taint: {key, value, effect}`, `condition: {type, status,
  reason, message}` or `cordon: true` (what an external health system does; the run step's default health
  expression, `node.spec.unschedulable == true`, catches exactly this);
- `notready`: `afterSeconds`.

Link faults (`links`) break the network between two NVLink domains rather than a node: a multi-node
collective whose nodes include at least one node of each of the two domains fails, with no node to blame;
a group inside one domain, or spanning other domains only, is unaffected, and so is every single-node
workload. A node carries its domain as the `nvidia.com/gpu.clique` label (`DOMAIN_LABEL`); a node without it
is in no domain. `between` takes exactly two different domains, and a pair may be listed once (in either
order). `tests/sim/workload.py` says how a failing group ends.

Unset optional fields stay None in the model (so `to_yaml` writes back exactly what was given); the
`resolved_*` properties apply the defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from nvcre_argo.errors import DocumentError, FieldError, MapKey, Path, format_path
from nvcre_argo.yamlio import YamlSyntaxError, dump_yaml, load_yaml_documents

FaultKind = Literal[
    "healthy", "crash", "hang", "slow", "datacheck", "health", "notready", "stall", "transient", "nomeasurement"
]
FAULT_KINDS: Final[tuple[str, ...]] = get_args(FaultKind)

DEFAULT_EXIT_CODE: Final = 1
DEFAULT_AFTER_SECONDS: Final = 1.0
DEFAULT_EXIT_REASON: Final = "Error"
DOMAIN_LABEL: Final = "nvidia.com/gpu.clique"  # a node's NVLink domain, which `links` name
TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CONDITION_STATUSES: Final = ("True", "False", "Unknown")

_FIGURES: Final = frozenset({"busBandwidthGBps", "tflopsPerGpu", "stepTimeMs"})
_CRASH: Final = frozenset({"exitCode", "afterSeconds", "reason"})
# Which fields each fault kind takes, besides `fault` itself.
_FIELDS_BY_KIND: Final[Mapping[str, frozenset[str]]] = {
    "healthy": _FIGURES,
    "slow": _FIGURES,
    "crash": _CRASH,
    "transient": _CRASH,
    "hang": frozenset({"afterSeconds"}),
    "stall": frozenset(),
    "datacheck": frozenset(),
    "nomeasurement": frozenset(),
    "health": frozenset({"afterSeconds", "taint", "condition", "cordon"}),
    "notready": frozenset({"afterSeconds"}),
}
_NODE_FIELDS: Final = frozenset({"fault"}).union(*_FIELDS_BY_KIND.values())
_TOP_FIELDS: Final = ("defaults", "nodes", "links")
_LINK_FIELDS: Final = ("between", "afterSeconds", "exitCode")
_DEFAULT_FIELDS: Final = ("durationSeconds", "busBandwidthGBps", "tflopsPerGpu", "stepTimeMs", "logsReadable")
_TAINT_FIELDS: Final = ("key", "value", "effect")
_CONDITION_FIELDS: Final = ("type", "status", "reason", "message")


class FaultPlanError(DocumentError):
    """A fault plan that is not YAML or breaks the plan's rules; `errors` lists every problem found."""


@dataclass(frozen=True)
class Taint:
    """A taint the node gets (`spec.taints[]`), as a node-problem detector or GPU operator would add it."""

    key: str
    effect: str
    value: str | None = None

    def to_dict(self) -> dict[str, str]:
        """The Kubernetes spelling (also the plan's)."""
        found = {"key": self.key, "value": self.value, "effect": self.effect}
        return {name: value for name, value in found.items() if value is not None}


@dataclass(frozen=True)
class NodeCondition:
    """A condition the node gets (`status.conditions[]`), e.g. `GpuUnhealthy=True`."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, str]:
        """The Kubernetes spelling (also the plan's)."""
        found = {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}
        return {name: value for name, value in found.items() if value is not None}


@dataclass(frozen=True)
class Defaults:
    """The healthy behaviour of every node."""

    duration_seconds: float = 3.0
    bus_bandwidth_gbps: float = 380.0
    tflops_per_gpu: float = 400.0
    step_time_ms: float = 2000.0
    # False: the kubelet's log endpoint refuses every workload log (as a broken kubelet or a lost, rotated
    # log file would), so nothing can be measured; the workloads themselves still succeed.
    logs_readable: bool = True


@dataclass(frozen=True)
class NodeFault:
    """How one node misbehaves; built by `load_fault_plan`, which enforces which fields each kind takes."""

    kind: FaultKind = "healthy"
    exit_code: int | None = None
    reason: str | None = None
    after_seconds: float | None = None
    bus_bandwidth_gbps: float | None = None
    tflops_per_gpu: float | None = None
    step_time_ms: float | None = None
    taint: Taint | None = None
    condition: NodeCondition | None = None
    cordon: bool | None = None

    @property
    def resolved_exit_code(self) -> int:
        return DEFAULT_EXIT_CODE if self.exit_code is None else self.exit_code

    @property
    def resolved_after_seconds(self) -> float:
        return DEFAULT_AFTER_SECONDS if self.after_seconds is None else self.after_seconds

    @property
    def resolved_reason(self) -> str:
        return self.reason or DEFAULT_EXIT_REASON

    def node_change(self) -> dict[str, Any] | None:
        """What a `health`/`notready` fault does to the Node object, in the sim kubelet's `mark` shape:
        `{"taint": {...}}`, `{"condition": {...}}`, `{"cordon": True}` or `{"not_ready": True}`; None for
        other kinds."""
        if self.kind == "notready":
            return {"not_ready": True}
        if self.kind != "health":
            return None
        if self.taint is not None:
            return {"taint": self.taint.to_dict()}
        if self.condition is not None:
            return {"condition": self.condition.to_dict()}
        if self.cordon:
            return {"cordon": True}
        return None


HEALTHY: Final = NodeFault()


@dataclass(frozen=True)
class LinkFault:
    """A broken network link between two NVLink domains (values of the nodes' `DOMAIN_LABEL`), in the
    order the plan names them; built by `load_fault_plan`, which checks they are two different domains."""

    between: tuple[str, str]
    exit_code: int | None = None
    after_seconds: float | None = None

    @property
    def resolved_exit_code(self) -> int:
        return DEFAULT_EXIT_CODE if self.exit_code is None else self.exit_code

    @property
    def resolved_after_seconds(self) -> float:
        return DEFAULT_AFTER_SECONDS if self.after_seconds is None else self.after_seconds

    def is_spanned_by(self, domains: Collection[str]) -> bool:
        """True when a group whose nodes are in `domains` has a node on each side of the link."""
        return all(domain in domains for domain in self.between)

    def to_dict(self) -> dict[str, Any]:
        """The plan's spelling."""
        found = {"between": list(self.between), "afterSeconds": self.after_seconds, "exitCode": self.exit_code}
        return {name: value for name, value in found.items() if value is not None}


@dataclass(frozen=True)
class FaultPlan:
    """The whole plan; `nodes` is read-only and kept in sorted node order (so `to_yaml` is byte-stable);
    `links` keep the plan's order."""

    defaults: Defaults = field(default_factory=Defaults)
    nodes: Mapping[str, NodeFault] = field(default_factory=dict)
    links: tuple[LinkFault, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", MappingProxyType(dict(sorted(self.nodes.items()))))
        object.__setattr__(self, "links", tuple(self.links))

    def fault_for(self, node: str) -> NodeFault:
        """The node's fault, or a healthy one when the plan does not list it."""
        return self.nodes.get(node, HEALTHY)

    def broken_link(self, domains: Collection[str]) -> LinkFault | None:
        """The broken link a group whose nodes are in `domains` spans; when it spans several, the one that
        fails first (the first listed on a tie), since that failure is what ends the group's run."""
        spanned = [link for link in self.links if link.is_spanned_by(domains)]
        return min(spanned, key=lambda link: link.resolved_after_seconds, default=None)

    def bus_bandwidth_gbps(self, node: str) -> float:
        """What an NCCL test measures over this node's links."""
        return _first(self.fault_for(node).bus_bandwidth_gbps, self.defaults.bus_bandwidth_gbps)

    def tflops_per_gpu(self, node: str) -> float:
        return _first(self.fault_for(node).tflops_per_gpu, self.defaults.tflops_per_gpu)

    def step_time_ms(self, node: str) -> float:
        return _first(self.fault_for(node).step_time_ms, self.defaults.step_time_ms)

    def to_yaml(self) -> str:
        """The plan as a document `load_fault_plan` reads back to an equal plan."""
        defaults = {
            "durationSeconds": self.defaults.duration_seconds,
            "busBandwidthGBps": self.defaults.bus_bandwidth_gbps,
            "tflopsPerGpu": self.defaults.tflops_per_gpu,
            "stepTimeMs": self.defaults.step_time_ms,
            "logsReadable": self.defaults.logs_readable,
        }
        nodes = {name: _node_document(fault) for name, fault in self.nodes.items()}
        document: dict[str, Any] = {"defaults": defaults, "nodes": nodes}
        if self.links:  # only when there are some, so plans without links read as before
            document["links"] = [link.to_dict() for link in self.links]
        return dump_yaml(document)


def _first(value: float | None, default: float) -> float:
    return default if value is None else value


def _node_document(fault: NodeFault) -> dict[str, Any]:
    document: dict[str, Any] = {"fault": fault.kind}
    spelled: Mapping[str, Any] = {
        "exitCode": fault.exit_code,
        "reason": fault.reason,
        "afterSeconds": fault.after_seconds,
        "busBandwidthGBps": fault.bus_bandwidth_gbps,
        "tflopsPerGpu": fault.tflops_per_gpu,
        "stepTimeMs": fault.step_time_ms,
        "taint": fault.taint.to_dict() if fault.taint else None,
        "condition": fault.condition.to_dict() if fault.condition else None,
        "cordon": fault.cordon,
    }
    document.update((key, value) for key, value in spelled.items() if value is not None)
    return document


def load_fault_plan(text: str, *, source: str = "") -> FaultPlan:
    """Parse and validate one plan document; an empty document is the all-healthy plan.

    Raises FaultPlanError listing every problem, each as `[source: ]path: problem`.
    """
    try:
        documents = list(load_yaml_documents(text))
    except YamlSyntaxError as error:
        raise FaultPlanError([FieldError((), "syntax", f"not YAML: {error}", source)]) from None
    if len(documents) > 1:
        raise FaultPlanError([FieldError((), "documents", f"must be one YAML document, got {len(documents)}", source)])
    reader = _Reader()
    plan = reader.plan(documents[0] if documents else None)
    if reader.errors or plan is None:
        raise FaultPlanError(error.at(source) if source else error for error in reader.errors)
    return plan


class _Reader:
    """Walks the document once, collecting every FieldError in document order."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: Path, kind: str, message: str) -> None:
        self.errors.append(FieldError(path, kind, message))

    def plan(self, document: Any) -> FaultPlan | None:
        if document is None:
            return FaultPlan()
        top = self.mapping(document, (), _TOP_FIELDS)
        if top is None:
            return None
        defaults: Defaults | None = Defaults()
        nodes: dict[str, NodeFault] | None = {}
        links: tuple[LinkFault, ...] | None = ()
        for key, value in top.items():  # in document order, so errors are too
            if key == "defaults":
                defaults = self.defaults(value, ("defaults",))
            elif key == "nodes":
                nodes = self.nodes(value, ("nodes",))
            else:
                links = self.links(value, ("links",))
        if defaults is None or nodes is None or links is None:
            return None
        return FaultPlan(defaults=defaults, nodes=nodes, links=links)

    def mapping(self, value: Any, path: Path, allowed: Iterable[str] | None) -> dict[str, Any] | None:
        """A mapping with string keys; with `allowed`, unknown keys are reported (and dropped)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, "type", f"must be a mapping, got {_describe(value)}")
            return None
        known = None if allowed is None else set(allowed)
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if known is not None and key not in known:
                expected = ", ".join(sorted(known))
                self.fail((*path, str(key)), "unknown-field", f"unknown field; expected one of: {expected}")
                continue
            kept[key] = item
        return kept

    def boolean(self, value: Any, path: Path) -> bool | None:
        if not isinstance(value, bool):
            self.fail(path, "type", f"must be true or false, got {value!r}")
            return None
        return value

    def defaults(self, value: Any, path: Path) -> Defaults | None:
        found = self.mapping(value, path, _DEFAULT_FIELDS)
        if found is None:
            return None
        before = len(self.errors)
        base = Defaults()
        checks: dict[str, tuple[str, Callable[[Any, Path], float | bool | None]]] = {
            "durationSeconds": ("duration_seconds", self.seconds),
            "busBandwidthGBps": ("bus_bandwidth_gbps", self.positive),
            "tflopsPerGpu": ("tflops_per_gpu", self.positive),
            "stepTimeMs": ("step_time_ms", self.positive),
            "logsReadable": ("logs_readable", self.boolean),
        }
        values = {attribute.name: getattr(base, attribute.name) for attribute in fields(Defaults)}
        for key, item in found.items():
            attribute, check = checks[key]
            values[attribute] = check(item, (*path, key))
        return Defaults(**values) if len(self.errors) == before else None

    def nodes(self, value: Any, path: Path) -> dict[str, NodeFault] | None:
        found = self.mapping(value, path, None)
        if found is None:
            return None
        before = len(self.errors)
        faults: dict[str, NodeFault] = {}
        for name, item in found.items():
            if not isinstance(name, str) or not name:
                self.fail((*path, MapKey(str(name))), "node-name", "must be a node name (a non-empty string)")
                continue
            fault = self.node(item, (*path, MapKey(name)))
            if fault is not None:
                faults[name] = fault
        return faults if len(self.errors) == before else None

    def node(self, value: Any, path: Path) -> NodeFault | None:
        found = self.mapping(value, path, _NODE_FIELDS)
        if found is None:
            return None
        before = len(self.errors)
        kind = found.get("fault")
        if kind not in FAULT_KINDS:
            if "fault" not in found:
                self.fail(path, "required", f"needs `fault`, one of: {', '.join(FAULT_KINDS)}")
            else:
                self.fail((*path, "fault"), "enum", f"must be one of: {', '.join(FAULT_KINDS)}; got {kind!r}")
            return None
        allowed = _FIELDS_BY_KIND[kind]
        self.require(found, path, kind)
        values: dict[str, Any] = {}
        for key, item in found.items():
            where = (*path, key)
            if key == "fault":
                continue
            if key not in allowed:
                takes = ", ".join(sorted(allowed)) or "no other field"
                self.fail(where, "not-allowed", f"not used by fault {kind!r}, which takes: {takes}")
            elif key == "exitCode":
                values["exit_code"] = self.integer(item, where, 1, 255)
            elif key == "reason":
                values["reason"] = self.text(item, where)
            elif key == "afterSeconds":
                values["after_seconds"] = self.seconds(item, where)
            elif key == "busBandwidthGBps":
                values["bus_bandwidth_gbps"] = self.positive(item, where)
            elif key == "tflopsPerGpu":
                values["tflops_per_gpu"] = self.positive(item, where)
            elif key == "stepTimeMs":
                values["step_time_ms"] = self.positive(item, where)
            elif key == "taint":
                values["taint"] = self.taint(item, where)
            elif key == "condition":
                values["condition"] = self.condition(item, where)
            elif key == "cordon":
                if item is not True:
                    self.fail(where, "type", f"must be true, got {item!r}")
                values["cordon"] = True
        return NodeFault(kind=kind, **values) if len(self.errors) == before else None

    def require(self, found: Mapping[str, Any], path: Path, kind: str) -> None:
        """The kind's cross-field rules: a `slow` node says what is slow, a `health` fault says what it sets."""
        if kind == "slow" and not _FIGURES & found.keys():
            self.fail(path, "required", f"a slow node needs at least one of: {', '.join(sorted(_FIGURES))}")
        signals = [key for key in ("taint", "condition", "cordon") if key in found]
        if kind == "health" and len(signals) != 1:
            problem = f"sets {', '.join(signals)}" if signals else "sets none"
            self.fail(
                path, "one-of", f"a health fault needs exactly one of taint, condition, cordon; this one {problem}"
            )

    def links(self, value: Any, path: Path) -> tuple[LinkFault, ...] | None:
        """The list of link faults; a pair of domains listed twice (in either order) is an error, since the
        second entry could only contradict the first."""
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(path, "type", f"must be a list, got {_describe(value)}")
            return None
        before = len(self.errors)
        found: list[LinkFault] = []
        listed_at: dict[frozenset[str], int] = {}
        for index, item in enumerate(value):
            link = self.link(item, (*path, index))
            if link is None:
                continue
            pair = frozenset(link.between)
            if pair in listed_at:
                first = format_path((*path, listed_at[pair]))
                self.fail((*path, index, "between"), "duplicate", f"the same link is already listed at {first}")
                continue
            listed_at[pair] = index
            found.append(link)
        return tuple(found) if len(self.errors) == before else None

    def link(self, value: Any, path: Path) -> LinkFault | None:
        found = self.mapping(value, path, _LINK_FIELDS)
        if found is None:
            return None
        before = len(self.errors)
        between = self.between(found.get("between"), (*path, "between"))
        exit_code = self.integer(found["exitCode"], (*path, "exitCode"), 1, 255) if "exitCode" in found else None
        after = self.seconds(found["afterSeconds"], (*path, "afterSeconds")) if "afterSeconds" in found else None
        if len(self.errors) != before or between is None:
            return None
        return LinkFault(between=between, exit_code=exit_code, after_seconds=after)

    def between(self, value: Any, path: Path) -> tuple[str, str] | None:
        """Exactly two different domains: a link joins two domains, and one within a domain is no link."""
        if value is None:
            self.fail(path, "required", f"is required: the two NVLink domains ({DOMAIN_LABEL} values) it joins")
            return None
        if not isinstance(value, list):
            self.fail(path, "type", f"must be a list of two NVLink domains, got {_describe(value)}")
            return None
        if len(value) != 2:
            self.fail(path, "type", f"must name exactly two NVLink domains, got {len(value)}")
            return None
        bad = [item for item in value if not isinstance(item, str) or not item]
        if bad:
            self.fail(path, "type", f"must name NVLink domains as non-empty strings, got {_describe(bad[0])}")
            return None
        if value[0] == value[1]:
            self.fail(path, "same-domain", f"must name two different NVLink domains, got {value[0]!r} twice")
            return None
        return (value[0], value[1])

    def taint(self, value: Any, path: Path) -> Taint | None:
        found = self.mapping(value, path, _TAINT_FIELDS)
        if found is None:
            return None
        before = len(self.errors)
        key = self.text(found.get("key"), (*path, "key"))
        effect = self.choice(found.get("effect"), (*path, "effect"), TAINT_EFFECTS)
        taint_value = self.text(found["value"], (*path, "value"), empty=True) if "value" in found else None
        if len(self.errors) != before or key is None or effect is None:
            return None
        return Taint(key=key, effect=effect, value=taint_value)

    def condition(self, value: Any, path: Path) -> NodeCondition | None:
        found = self.mapping(value, path, _CONDITION_FIELDS)
        if found is None:
            return None
        before = len(self.errors)
        condition_type = self.text(found.get("type"), (*path, "type"))
        status = self.choice(found.get("status"), (*path, "status"), CONDITION_STATUSES)
        reason = self.text(found["reason"], (*path, "reason")) if "reason" in found else None
        message = self.text(found["message"], (*path, "message"), empty=True) if "message" in found else None
        if len(self.errors) != before or condition_type is None or status is None:
            return None
        return NodeCondition(type=condition_type, status=status, reason=reason, message=message)

    # Scalars: each reports its own problem and returns None when the value is unusable.

    def integer(self, value: Any, path: Path, low: int, high: int) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(path, "range", f"must be an integer {low}..{high}, got {_describe(value)}")
            return None
        return value

    def seconds(self, value: Any, path: Path) -> float | None:
        if not _is_number(value) or value < 0:
            self.fail(path, "range", f"must be a number of seconds >= 0, got {_describe(value)}")
            return None
        return float(value) if isinstance(value, float) else int(value)

    def positive(self, value: Any, path: Path) -> float | None:
        if not _is_number(value) or value <= 0:
            self.fail(path, "range", f"must be a number > 0, got {_describe(value)}")
            return None
        return float(value) if isinstance(value, float) else int(value)

    def text(self, value: Any, path: Path, *, empty: bool = False) -> str | None:
        if value is None:
            self.fail(path, "required", "is required")
            return None
        if not isinstance(value, str) or (not value and not empty):
            self.fail(path, "type", f"must be a {'' if empty else 'non-empty '}string, got {_describe(value)}")
            return None
        return value

    def choice(self, value: Any, path: Path, choices: tuple[str, ...]) -> str | None:
        if value is None:
            self.fail(path, "required", f"is required, one of: {', '.join(choices)}")
            return None
        if value not in choices or not isinstance(value, str):
            hint = "; quote it" if isinstance(value, bool) else ""
            self.fail(path, "enum", f"must be one of: {', '.join(choices)}; got {_describe(value)}{hint}")
            return None
        return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _describe(value: Any) -> str:
    """A value as the user wrote it, for messages (`true`, not Python's `True`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return "a mapping" if isinstance(value, dict) else "a list"
    return repr(value) if isinstance(value, str) else str(value)
