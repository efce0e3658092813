"""Where the orchestration pods run: the step pods of both Workflow levels, never the nodes under test.

A step pod on a node under test takes that node's CPU and memory from the workload it certifies, and it dies
with the node when the node is what fails (NotReady, a health taint with NoExecute), taking the group's result
with it. So every step pod gets a required node affinity that excludes the certification's target: the
negation of "matches every filter of the target" is "fails at least one", which is one node-selector term per
filter (terms are ORed). A node lacking a selected label matches `NotIn`, as it should: it is not a target.
Taint-selected targets need nothing here, since step pods do not tolerate the selected taints.

What a cluster needs for its orchestration pods (a system node pool's selector and tolerations, a priority
class so steps are not preempted by the workloads they watch, pull secrets for a private step image) is set
at compile time, the same for every step of both levels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo.api.spec import NodeSelectorRequirement, TargetSpec

# The label operator that selects exactly the nodes a requirement leaves out.
_NEGATED = {"In": "NotIn", "NotIn": "In", "Exists": "DoesNotExist", "DoesNotExist": "Exists"}


@dataclass(frozen=True)
class Toleration:
    """One toleration for the step pods: `KEY[=VALUE][:EFFECT]`, as `kubectl taint` writes a taint."""

    key: str
    value: str | None = None
    effect: str | None = None

    def manifest(self) -> dict[str, str]:
        toleration = {"key": self.key, "operator": "Equal" if self.value else "Exists"}
        if self.value:
            toleration["value"] = self.value
        if self.effect:
            toleration["effect"] = self.effect
        return toleration


@dataclass(frozen=True)
class StepPlacement:
    """Compile-time placement of every step pod; `avoid_target=False` allows steps onto the target (a cluster
    whose only nodes are under test, such as a single-node lab)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Toleration] = ()
    priority_class: str | None = None
    image_pull_secrets: Sequence[str] = ()
    avoid_target: bool = True


def _negated_terms(requirement: NodeSelectorRequirement) -> list[dict[str, Any]]:
    expression: dict[str, Any] = {"key": requirement.key, "operator": _NEGATED[requirement.operator]}
    if requirement.operator in ("In", "NotIn"):
        expression["values"] = sorted(requirement.values or [])
    return [{"matchExpressions": [expression]}]


def avoid_target_affinity(target: TargetSpec) -> dict[str, Any] | None:
    """A node affinity that no target node satisfies, or None when the target filters by no label or name
    (it is every node, or only taint-selected nodes, which step pods do not tolerate anyway)."""
    terms: list[dict[str, Any]] = [
        {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]}
        for key, value in sorted((target.node_selector or {}).items())
    ]
    for requirement in target.match_expressions or []:
        terms += _negated_terms(requirement)
    if target.node_names:
        # The API server allows one value per `metadata.name` field requirement, so "none of these names" is one
        # requirement per name, ANDed in one term.
        fields = [{"key": "metadata.name", "operator": "NotIn", "values": [name]} for name in sorted(target.node_names)]
        terms.append({"matchFields": fields})
    if not terms:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def placement_spec(placement: StepPlacement, target: TargetSpec) -> dict[str, Any]:
    """The Workflow `spec` fields (Argo applies them to every step pod of the Workflow) for `placement`."""
    spec: dict[str, Any] = {}
    affinity = avoid_target_affinity(target) if placement.avoid_target else None
    if affinity:
        spec["affinity"] = affinity
    if placement.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in placement.image_pull_secrets]
    if placement.node_selector:
        spec["nodeSelector"] = dict(sorted(placement.node_selector.items()))
    if placement.priority_class:
        spec["podPriorityClassName"] = placement.priority_class
    if placement.tolerations:
        spec["tolerations"] = [toleration.manifest() for toleration in placement.tolerations]
    return spec
