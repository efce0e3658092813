"""Saved node lists (`nvcre-argo plan --nodes`): what `kubectl get nodes -o yaml` prints, and what it never
should, each problem at its path."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre_argo.errors import InvalidDocumentError
from nvcre_argo.plan.nodelist import parse_node_list
from nvcre_argo.plan.nodes import slim_node
from nvcre_argo.yamlio import dump_yaml, dump_yaml_documents


def node(name: str, *, kind: str | None = "Node", **labels: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", **labels}, "uid": "u-" + name},
        "spec": {"podCIDR": "127.1.0.0/24"},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}, "images": [{"names": ["x"]}]},
    }
    if kind is not None:
        document["kind"] = kind
    return document


def problems(text: str) -> set[tuple[str, str]]:
    with pytest.raises(InvalidDocumentError) as raised:
        parse_node_list(text, "nodes.yaml")
    return raised.value.kinds()


def test_a_kubectl_list_is_read_and_each_node_slimmed_as_the_plan_step_slims_it() -> None:
    listed = [node("a"), node("b")]
    text = dump_yaml({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": listed})

    assert parse_node_list(text, "nodes.yaml") == [slim_node(item) for item in listed]


def test_a_node_list_from_the_api_may_omit_each_items_kind() -> None:
    text = dump_yaml({"kind": "NodeList", "apiVersion": "v1", "items": [node("a", kind=None)]})

    assert [item["metadata"]["name"] for item in parse_node_list(text, "nodes.yaml")] == ["a"]


def test_single_nodes_and_lists_mix_in_one_stream() -> None:
    text = dump_yaml_documents([node("a"), {"kind": "List", "items": [node("b")]}, None, node("c")])

    assert [item["metadata"]["name"] for item in parse_node_list(text, "nodes.yaml")] == ["a", "b", "c"]


def test_an_empty_list_is_no_nodes() -> None:
    assert parse_node_list("apiVersion: v1\nkind: List\nitems: []\n", "nodes.yaml") == []


@pytest.mark.parametrize(
    ("documents", "expected"),
    [
        pytest.param(
            [{"kind": "List", "items": [node("a"), node("p", kind="Pod")]}], {("items[1].kind", "kind")}, id="pod"
        ),
        pytest.param([{"kind": "Certification"}], {("kind", "kind")}, id="not-a-node"),
        pytest.param([node("a", kind=None)], {("kind", "kind")}, id="bare-node-without-kind"),
        pytest.param([{"kind": "List", "items": ["a"]}], {("items[0]", "type")}, id="item-not-a-mapping"),
        pytest.param([{"kind": "List", "items": {"a": 1}}], {("items", "type")}, id="items-not-a-list"),
        pytest.param([{"kind": "List", "items": [node("")]}], {("items[0].metadata.name", "required")}, id="no-name"),
        pytest.param(
            [{"kind": "List", "items": [node("a"), node("a")]}], {("items[1].metadata.name", "duplicate")}, id="twice"
        ),
        pytest.param(
            [node("a", **{"nvidia.com/gpu.count": 8})],
            {('metadata.labels["nvidia.com/gpu.count"]', "type")},
            id="unquoted-label-value",
        ),
    ],
)
def test_what_is_not_a_node_list_is_refused_at_its_path(
    documents: list[dict[str, Any]], expected: set[tuple[str, str]]
) -> None:
    assert problems(dump_yaml_documents(documents)) == expected


def test_every_problem_is_reported_with_its_document() -> None:
    text = dump_yaml_documents([node("a", kind="Pod"), node("b"), {"kind": "List", "items": [node("b")]}])

    with pytest.raises(InvalidDocumentError) as raised:
        parse_node_list(text, "nodes.yaml")

    assert [error.render() for error in raised.value.errors] == [
        'nodes.yaml (document 1): kind: must be a Node or a List of Nodes, got string "Pod"',
        "nodes.yaml (document 3): items[0].metadata.name: node 'b' is listed twice (first at nodes.yaml (document 2))",
    ]


def test_bad_yaml_names_the_line() -> None:
    with pytest.raises(InvalidDocumentError) as raised:
        parse_node_list("items: [\n", "nodes.yaml")

    (error,) = raised.value.errors
    assert error.render().startswith("nodes.yaml: <document>: invalid YAML: line 2, column 1: ")
