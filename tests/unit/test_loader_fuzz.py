"""Property tests: whatever the input, the loader answers with Certifications or an InvalidDocumentError.

Random YAML values dropped anywhere in a rich valid document, and random YAML-flavoured text, must never
escape as a raw exception (KeyError, pydantic's ValidationError, ...), and every error must point at a place
that exists in the document. Runs are derandomised so CI sees the same examples every time.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre_argo.api.crd import certification_schema
from nvcre_argo.errors import FieldError, InvalidDocumentError, format_path
from nvcre_argo.loading import load_certifications
from nvcre_argo.yamlio import YamlSyntaxError, dump_yaml, load_yaml_documents
from tests.unit.corpus import KINDS, VALID

TOP_LEVEL_FIELDS = {"apiVersion", "kind", "metadata", "spec", "status"}
SOURCE = "fuzz.yaml"

RICH_DOCUMENT: dict[str, Any] = {
    **next(case.document for case in VALID if case.id == "every-option-at-both-levels"),
    "status": {
        "observedGeneration": 1,
        "result": "RUNNING",
        "passed": "0/2",
        "failedNodes": 0,
        "conditions": [
            {
                "type": "InProgress",
                "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "WorkflowRunning",
            }
        ],
        "categoryStatuses": [
            {
                "domain": "communication",
                "variant": "nccl-all-reduce",
                "status": "InProgress",
                "workflowRef": {"name": "wf"},
                "failedNodesRef": {"kind": "ConfigMap", "name": "failed-nodes-0123abcd"},
            }
        ],
    },
}
RICH_DOCUMENT["spec"] = {
    **RICH_DOCUMENT["spec"],
    "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "q", "queueLabelKey": "kai.scheduler/queue"},
    "target": {
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}],
        "nodeNames": ["n1"],
        "taintSelectors": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
    },
}

Path = tuple[str | int, ...]


def _paths(node: Any, prefix: Path = ()) -> list[Path]:
    """Every place in a document below the root, parents before children."""
    found: list[Path] = []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


def _mapping_paths(node: Any) -> list[Path]:
    return [path for path in _paths(node) if isinstance(_lookup(node, path), dict)]


def _lookup(document: Any, path: Path) -> Any:
    node = document
    for element in path:
        node = node[element]
    return node


def _schema_field_names(schema: dict[str, Any]) -> set[str]:
    names = set(schema.get("properties", {}))
    for child in [*schema.get("properties", {}).values(), schema.get("items"), schema.get("additionalProperties")]:
        if isinstance(child, dict):
            names |= _schema_field_names(child)
    return names


FIELD_NAMES = sorted(_schema_field_names(certification_schema()))
PATHS = _paths(RICH_DOCUMENT)
MAPPING_PATHS = _mapping_paths(RICH_DOCUMENT)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=24)
    | st.sampled_from(["", "-1", "0", "1Gi", "10Ti", "1h", "rdma/ib", "nvcre.nvidia.com/x", "https://a.b/c"])
)
yaml_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(FIELD_NAMES) | st.text(min_size=1, max_size=16)

FUZZ_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _check_outcome(text: str, document: Any = None) -> None:
    """The properties every input must satisfy; `document` is what `text` says, when the caller built it."""
    error: InvalidDocumentError | None = None
    try:
        loaded = load_certifications(text, SOURCE)
    except InvalidDocumentError as raised:
        error = raised
    if error is None:
        assert loaded, "success means at least one Certification"
        return
    assert error.errors, "an InvalidDocumentError must carry at least one error"
    documents = [document] if document is not None else _parsed_documents(text)
    for problem in error.errors:
        _check_error(problem, documents)


def _parsed_documents(text: str) -> list[Any]:
    try:
        return [document for document in load_yaml_documents(text) if document is not None]
    except YamlSyntaxError:
        return []


def _check_error(problem: FieldError, documents: list[Any]) -> None:
    path = format_path(problem.path)
    # Below the root only known fields are walked into; an unknown top-level field is reported where it is.
    top_level_ok = not problem.path or problem.path[0] in TOP_LEVEL_FIELDS
    assert top_level_ok or (len(problem.path) == 1 and problem.kind == "unknown-field"), path
    assert problem.kind in KINDS, (path, problem.kind, problem.message)
    assert problem.message
    assert problem.source.startswith(SOURCE)
    assert problem.render().startswith(f"{problem.source}: {path}: ")
    if problem.path:
        # The error points into the document: everything above the last element exists in some document.
        assert any(_resolves(document, problem.path[:-1]) for document in documents), path


def _resolves(document: Any, path: Path) -> bool:
    node = document
    for element in path:
        in_mapping = isinstance(node, dict) and element in node
        in_list = isinstance(node, list) and isinstance(element, int) and 0 <= element < len(node)
        if not (in_mapping or in_list):
            return False
        node = node[element]
    return True


@FUZZ_SETTINGS
@given(path=st.sampled_from(PATHS), value=yaml_values)
def test_any_value_anywhere_in_a_valid_document_is_loaded_or_reported(path: Path, value: Any) -> None:
    document = copy.deepcopy(RICH_DOCUMENT)
    _lookup(document, path[:-1])[path[-1]] = value

    _check_outcome(dump_yaml(document), document)


@FUZZ_SETTINGS
@given(parent=st.sampled_from(MAPPING_PATHS), key=keys, value=yaml_values)
def test_any_field_added_to_any_mapping_is_loaded_or_reported(parent: Path, key: str, value: Any) -> None:
    document = copy.deepcopy(RICH_DOCUMENT)
    _lookup(document, parent)[key] = value

    _check_outcome(dump_yaml(document), document)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(path=st.sampled_from(PATHS))
def test_any_field_removed_from_a_valid_document_is_loaded_or_reported(path: Path) -> None:
    document = copy.deepcopy(RICH_DOCUMENT)
    del _lookup(document, path[:-1])[path[-1]]

    _check_outcome(dump_yaml(document), document)


HEADER = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Certification\n"
FRAGMENTS = [
    HEADER,
    "spec:\n",
    "  target: {}\n",
    "  categories:\n",
    "  - domain: a\n    variant: b\n",
    "    options: {nodesPerJob: 0}\n",
    "---\n",
    "...\n",
    ": ",
    "- ",
    "? ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "'",
    '"',
    "&a ",
    "*a",
    "!!binary ",
    "!!set ",
    "!!python/object:os.system ",
    "|\n",
    ">-\n",
    "# c\n",
    "\t",
    "  ",
    "\n",
    "%YAML 1.1\n",
    "1e3",
    "0x1F",
    "2001-12-14",
    "~",
    ".nan",
    "yes",
    "\ufeff",
    "\x00",
]
yaml_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=30).map("".join)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(text=yaml_text | st.text(max_size=200))
def test_any_text_is_loaded_or_reported(text: str) -> None:
    _check_outcome(text)


def test_a_deeply_nested_document_is_reported_not_raised() -> None:
    with pytest.raises(InvalidDocumentError) as caught:
        load_certifications("[" * 10_000 + "]" * 10_000, SOURCE)

    assert caught.value.kinds() == {("<document>", "syntax")}
