"""Node health during a run: a CEL expression over each Node object, as the reference's monitor does.

The default, `node.spec.unschedulable == true`, fires when someone else's health system cordons a node
mid-run. An expression that cannot be evaluated on a node (a field it reads is absent) does not fire: absence
of evidence is not a hardware failure. Taint-selecting `node.kubernetes.io/unschedulable` opts cordoned nodes
into the run and therefore turns the monitor off, as in the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.cel import CelError, evaluate

DEFAULT_HEALTH_EXPRESSION = "node.spec.unschedulable == true"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def monitor_enabled(target: TargetSpec) -> bool:
    return not any(selector.key == UNSCHEDULABLE_TAINT for selector in target.taint_selectors or [])


def unhealthy_nodes(nodes: Sequence[dict[str, Any]], expression: str = DEFAULT_HEALTH_EXPRESSION) -> list[str]:
    """Names of the nodes for which the expression is true, sorted."""
    fired = []
    for node in nodes:
        try:
            result = evaluate(expression, {"node": node})
        except CelError:
            continue
        if result is True:
            fired.append(str(node.get("metadata", {}).get("name", "")))
    return sorted(fired)
