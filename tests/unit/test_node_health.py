"""The run step's health check, without a cluster: the compiled check gives the same verdict as evaluating the
whole Node, reads only the fields its expression selects, and the group's verdicts are recomputed only when a
node changed, with nodes the watch lost read as strays.

Expressions are the reference's examples (`nvcre-contract.md` §7.7) and the catalog default.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nvcre_argo.cel import CelError, compile_expression, evaluate
from nvcre_argo.steps.health import DEFAULT_HEALTH_EXPRESSION, compile_health_check, project_node, unhealthy_nodes
from nvcre_argo.steps.node_watch import GroupHealth

REFERENCE_EXPRESSIONS = [
    DEFAULT_HEALTH_EXPRESSION,
    "node.spec.taints.exists(t, t.key == 'nvidia.com/gpu-unhealthy')",
    "'gpud.nvidia.com/unhealthy' in node.metadata.labels",
    "node.status.conditions.exists(c, c.type == 'GPUHealthy' && c.status == 'False')",
    "has(node.spec.unschedulable) && node.spec.unschedulable",
    "size(node.spec) > 3",
    "node.metadata.annotations['gpu.health/state'] == 'bad'",
    "node['spec']['unschedulable'] == true",
]


def a_node(name: str = "n0", **spec: Any) -> dict[str, Any]:
    """A Node as the API serves it, with the bulk (images, many labels) a health check must not pay for."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {f"feature.node.kubernetes.io/flag-{index}": "true" for index in range(80)},
            "annotations": {"gpu.health/state": "ok"},
        },
        "spec": {"podCIDR": "127.1.0.0/24", **spec},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "images": [{"names": [f"registry.example/image-{index}:1"], "sizeBytes": index} for index in range(50)],
        },
    }


SICK_VARIANTS = [
    pytest.param({"spec": {"unschedulable": True}}, id="cordoned"),
    pytest.param({"spec": {"taints": [{"key": "nvidia.com/gpu-unhealthy", "effect": "NoSchedule"}]}}, id="tainted"),
    pytest.param({"metadata": {"labels": {"gpud.nvidia.com/unhealthy": ""}}}, id="labelled"),
    pytest.param({"status": {"conditions": [{"type": "GPUHealthy", "status": "False"}]}}, id="condition"),
    pytest.param({"metadata": {"annotations": {"gpu.health/state": "bad"}}}, id="annotated"),
    pytest.param({}, id="healthy"),
    pytest.param({"spec": None}, id="no-spec"),
    pytest.param({"metadata": {"annotations": None}}, id="no-annotations"),
]


def _merged(node: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(node)
    for section, fields in change.items():
        if fields is None:
            merged.pop(section, None)
            continue
        for key, value in fields.items():
            if value is None:
                merged[section].pop(key, None)
            elif isinstance(value, dict) and isinstance(merged[section].get(key), dict):
                merged[section][key] = {**merged[section][key], **value}
            else:
                merged[section][key] = value
    return merged


@pytest.mark.parametrize("expression", REFERENCE_EXPRESSIONS)
@pytest.mark.parametrize("change", SICK_VARIANTS)
def test_the_compiled_check_on_the_slim_node_agrees_with_evaluating_the_whole_node(
    expression: str, change: dict[str, Any]
) -> None:
    node = _merged(a_node(), change)
    try:
        expected = evaluate(expression, {"node": node}) is True
    except CelError:
        expected = False  # an expression that cannot be evaluated does not fire
    assert compile_health_check(expression).fires(node) is expected


@pytest.mark.parametrize(
    ("expression", "paths"),
    [
        pytest.param(DEFAULT_HEALTH_EXPRESSION, {("spec", "unschedulable")}, id="default"),
        pytest.param(
            "node.status.conditions.exists(c, c.type == 'GPUHealthy') || 'x' in node.metadata.labels",
            {("status", "conditions"), ("metadata", "labels")},
            id="two-fields",
        ),
        pytest.param("has(node.spec.taints)", {("spec", "taints")}, id="has-macro"),
        pytest.param("size(node.spec) > 0", {("spec",)}, id="a-whole-section"),
        pytest.param("node.status.nodeInfo.kernelVersion == '5'", {("status", "nodeInfo")}, id="deeper-is-cut-at-two"),
        pytest.param("node['spec'].unschedulable", None, id="indexing-needs-the-whole-node"),
        pytest.param("[1].exists(node, node > 0)", None, id="a-variable-named-node-is-not-guessed-at"),
    ],
)
def test_the_fields_a_check_reads_come_from_its_expression(expression: str, paths: set[tuple[str, ...]] | None) -> None:
    assert compile_expression(expression).selected_paths("node") == (None if paths is None else frozenset(paths))


def test_the_default_check_converts_only_spec_unschedulable_not_the_images_and_labels() -> None:
    check = compile_health_check()
    node = a_node(unschedulable=True)
    assert project_node(node, check.paths) == {"spec": {"unschedulable": True}}
    assert project_node(a_node(), check.paths) == {"spec": {}}, "absent stays absent: the check cannot fire"


def test_unhealthy_nodes_names_the_nodes_the_check_fires_on_sorted() -> None:
    nodes = [a_node("n2", unschedulable=True), a_node("n1"), a_node("n0", unschedulable=True)]
    assert unhealthy_nodes(nodes, compile_health_check()) == ["n0", "n2"]


def test_a_check_that_does_not_parse_is_refused_when_compiled() -> None:
    with pytest.raises(CelError, match="syntax error"):
        compile_health_check("node.spec.unschedulable ==")


def _version(node: dict[str, Any], version: str) -> dict[str, Any]:
    node["metadata"]["resourceVersion"] = version
    return node


def test_a_nodes_verdict_is_recomputed_only_when_the_node_changed() -> None:
    health = GroupHealth(["n0", "n1"], compile_health_check())
    health.replace([a_node("n0"), a_node("n1"), a_node("other")])
    assert (health.sick(), health.strays(), health.evaluations) == ([], [], 2), "a node outside the group is ignored"

    health.observe(a_node("n0"))  # the same resourceVersion again (a relist, a repeated event)
    assert health.evaluations == 2
    health.observe(_version(a_node("n0", unschedulable=True), "2"))
    assert (health.sick(), health.evaluations) == (["n0"], 3)
    health.observe(_version(a_node("n0"), "3"))
    assert health.sick() == []


def test_a_node_the_watch_lost_is_a_stray_without_a_verdict_until_read_again() -> None:
    health = GroupHealth(["n0", "n1"], compile_health_check())
    health.replace([a_node("n0"), _version(a_node("n1", unschedulable=True), "5")])
    assert health.sick() == ["n1"]

    health.lose("n1")  # DELETED: it left the selector, or the Node was deleted
    assert (health.sick(), health.strays()) == ([], ["n1"])
    health.observe(_version(a_node("n1", unschedulable=True), "6"), stray=True)  # its GET: still there, cordoned
    assert (health.sick(), health.strays()) == (["n1"], ["n1"]), "a stray is checked, and stays a stray"
    health.forget("n1")  # its GET found nothing: deleted
    assert health.sick() == []

    health.observe(_version(a_node("n1"), "7"))  # the watch covers it again
    assert health.strays() == []
    health.observe(_version(a_node("n1", unschedulable=True), "8"), stray=True)  # a late GET of a stray
    assert health.sick() == [], "a stray's GET does not override what the watch saw since"


def test_group_nodes_a_list_did_not_return_are_strays() -> None:
    health = GroupHealth(["n0", "n1", "n2"], compile_health_check())
    assert health.strays() == ["n0", "n1", "n2"], "before any list every node is read on its own"
    health.replace([a_node("n1")])
    assert health.strays() == ["n0", "n2"]
