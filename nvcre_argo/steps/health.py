"""Node health during a run: a CEL expression over each Node object, as the reference's monitor does.

The default, `node.spec.unschedulable == true`, fires when someone else's health system cordons a node
mid-run; a catalog entry can give its own (`healthExpression`), e.g. one that also catches the taint or
condition a cluster's GPU health agent sets. An expression that cannot be evaluated on a node (a field it
reads is absent) does not fire: absence of evidence is not a hardware failure. Taint-selecting
`node.kubernetes.io/unschedulable` opts cordoned nodes into the run and therefore turns the monitor off, as in
the reference.

Pure: the run step feeds Node objects in (from a watch or from GETs) and reads verdicts out. Why a compiled
`HealthCheck` and not one `evaluate` call per node: compiling the expression took about 1.2 ms and converting
a whole Node (50 images, ~80 labels) to CEL values about 2 ms, per node and per poll, i.e. tens of seconds of
CPU per poll for a 4,096-node group. The check compiles once, and converts only the fields the expression
selects (`Program.selected_paths`): the result cannot depend on anything else, so it is the same verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.catalog.model import CatalogEntry
from nvcre_argo.cel import CelError, Program, compile_expression

DEFAULT_HEALTH_EXPRESSION = "node.spec.unschedulable == true"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NODE_VARIABLE = "node"


def health_expression(entry: CatalogEntry) -> str:
    """The expression the run step checks: the catalog entry's own, else the reference's default."""
    return entry.health_expression or DEFAULT_HEALTH_EXPRESSION


def monitor_enabled(target: TargetSpec) -> bool:
    return not any(selector.key == UNSCHEDULABLE_TAINT for selector in target.taint_selectors or [])


@dataclass(frozen=True)
class HealthCheck:
    """One health expression, compiled, with the Node fields it can read (None: the whole Node)."""

    expression: str
    program: Program = field(repr=False)
    paths: frozenset[tuple[str, ...]] | None

    def fires(self, node: Mapping[str, Any]) -> bool:
        """True only when the expression evaluates to true on this Node (an error is not a firing)."""
        try:
            return self.program.evaluate({NODE_VARIABLE: project_node(node, self.paths)}) is True
        except CelError:
            return False


def compile_health_check(expression: str = DEFAULT_HEALTH_EXPRESSION) -> HealthCheck:
    """The check for `expression` (CelError when it does not parse: the compiler has already refused such
    an expression, so this only happens with a hand-made setting)."""
    program = compile_expression(expression)
    return HealthCheck(expression, program, program.selected_paths(NODE_VARIABLE))


def project_node(node: Mapping[str, Any], paths: frozenset[tuple[str, ...]] | None) -> Mapping[str, Any]:
    """The Node with only the fields at `paths` (one or two names deep), the rest dropped; the Node itself
    when `paths` is None. A field absent from the Node stays absent, so `has()` and a missing-field error
    behave exactly as on the whole object."""
    if paths is None:
        return node
    whole = {path[0] for path in paths if len(path) == 1}
    slim: dict[str, Any] = {}
    for path in sorted(paths):
        top = path[0]
        if top not in node:
            continue
        value = node[top]
        if top in whole or not isinstance(value, Mapping):
            slim[top] = value
            continue
        part = slim.setdefault(top, {})
        if len(path) > 1 and path[1] in value:
            part[path[1]] = value[path[1]]
    return slim


def node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def unhealthy_nodes(nodes: Iterable[Mapping[str, Any]], check: HealthCheck) -> list[str]:
    """Names of the nodes for which the check fires, sorted."""
    return sorted(node_name(node) for node in nodes if check.fires(node))
