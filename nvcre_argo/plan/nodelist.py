"""Read a saved node list (what `kubectl get nodes -o yaml` prints) so a plan can be previewed offline.

Accepted: a `kind: List` or `kind: NodeList` document (`items`, where an item may omit `kind`, as the API's own
list responses do), one or more `kind: Node` documents in a YAML stream, or both mixed. Each Node is cut down to
what planning reads (`slim_node`), exactly as the plan step cuts the Nodes it lists, so the same node list
gives the same plan either way.

Only what would make a plan silently wrong is checked, each problem at its path and all of them at once: an
object that is not a Node, a missing or repeated name, and a label value that is not a string (an unquoted
`true` in a hand-written file would never match `nodeSelector: {nvidia.com/gpu.present: "true"}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvcre_argo.errors import FieldError, InvalidDocumentError, MapKey, Path, format_path
from nvcre_argo.messages import describe_value
from nvcre_argo.plan.nodes import slim_node
from nvcre_argo.yamlio import YamlSyntaxError, load_yaml_documents

LIST_KINDS = ("List", "NodeList")


def parse_node_list(text: str, source: str) -> list[dict[str, Any]]:
    """The Nodes a saved list holds, slimmed for planning; InvalidDocumentError listing every problem."""
    try:
        documents = [document for document in load_yaml_documents(text) if document is not None]
    except YamlSyntaxError as error:
        raise InvalidDocumentError([FieldError((), "syntax", f"invalid YAML: {error}", source)]) from None
    seen: dict[str, str] = {}  # node name -> where it was first listed
    nodes: list[dict[str, Any]] = []
    problems: list[FieldError] = []
    for number, document in enumerate(documents, start=1):
        where = source if len(documents) == 1 else f"{source} (document {number})"
        entries, found = _entries(document)
        for path, item in entries:
            item_problems = _node_problems(item, path, inside_list=bool(path))
            if not item_problems:
                name = item["metadata"]["name"]
                if name in seen:
                    message = f"node {name!r} is listed twice (first at {seen[name]})"
                    item_problems.append(FieldError((*path, "metadata", "name"), "duplicate", message))
                else:
                    seen[name] = f"{where}: {format_path(path)}" if path else where
                    nodes.append(slim_node(item))
            found += item_problems
        problems += [problem.at(where) for problem in found]
    if problems:
        raise InvalidDocumentError(problems)
    return nodes


def _entries(document: Any) -> tuple[list[tuple[Path, Any]], list[FieldError]]:
    """A document's would-be Nodes with their paths: the `items[i]` of a List, else the document itself."""
    if not (isinstance(document, Mapping) and document.get("kind") in LIST_KINDS):
        return [((), document)], []
    items = document.get("items")
    if items is None:
        return [], []
    if not isinstance(items, list):
        return [], [FieldError(("items",), "type", f"must be a list, got {describe_value(items)}")]
    return [(("items", index), item) for index, item in enumerate(items)], []


def _node_problems(item: Any, path: Path, *, inside_list: bool) -> list[FieldError]:
    if not isinstance(item, Mapping):
        return [FieldError(path, "type", f"must be a Node (a mapping), got {describe_value(item)}")]
    kind = item.get("kind")
    if kind != "Node" and not (inside_list and kind is None):
        expected = "a Node or a List of Nodes" if not inside_list else "a Node"
        return [FieldError((*path, "kind"), "kind", f"must be {expected}, got {describe_value(kind)}")]
    metadata = item.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        return [FieldError((*path, "metadata", "name"), "required", "a Node needs a name")]
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [FieldError((*path, "metadata", "labels"), "type", f"must be a mapping, got {describe_value(labels)}")]
    return [
        FieldError(
            (*path, "metadata", "labels", MapKey(str(key))),
            "type",
            f"label values are strings, got {describe_value(value)}; quote it",
        )
        for key, value in labels.items()
        if not isinstance(value, str)
    ]
