"""The Certification CRD on a real kube-apiserver: CEL rules, immutability, status, printer columns, and
agreement with the offline loader on every document of the corpus.

The API server is the judge of what a cluster accepts; `nvcre-argo validate` must agree with it, document by
document, or one of them has a bug.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from nvcre_argo.errors import InvalidDocumentError
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CERTIFICATIONS
from nvcre_argo.loading import parse_certification
from tests.harness.controlplane import Cluster
from tests.unit.corpus import BASE, INVALID, VALID, Case


def _in_namespace(document: dict[str, Any], namespace: str, name: str | None = None) -> dict[str, Any]:
    """The document in the test namespace; the corpus's own metadata (even a wrong one) is kept otherwise."""
    placed = copy.deepcopy(document)
    metadata = placed.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata["namespace"] = namespace
        if name is not None:
            metadata["name"] = name
    return placed


def _server_accepts(kube: KubeClient, document: dict[str, Any], namespace: str) -> tuple[bool, str]:
    try:
        kube.request(
            "POST",
            CERTIFICATIONS.path(namespace),
            body=document,
            query={"dryRun": "All", "fieldValidation": "Strict"},
        )
    except ApiError as error:
        return False, str(error)
    return True, ""


def _loader_accepts(document: dict[str, Any]) -> tuple[bool, str]:
    try:
        parse_certification(document, "corpus")
    except InvalidDocumentError as error:
        return False, error.render()
    return True, ""


@pytest.fixture(scope="module")
def corpus_namespace(control_plane: Cluster, kube: KubeClient) -> str:
    name = "admission-corpus"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.mark.parametrize("case", VALID + INVALID, ids=lambda case: case.id)
def test_the_api_server_and_the_loader_agree_on_acceptance(kube: KubeClient, corpus_namespace: str, case: Case) -> None:
    document = _in_namespace(case.document, corpus_namespace)
    server, server_says = _server_accepts(kube, document, corpus_namespace)
    loader, loader_says = _loader_accepts(document)

    assert (server, loader) == (not case.expected, not case.expected), (
        f"API server: {'accepted' if server else server_says}\nloader: {'accepted' if loader else loader_says}"
    )


@pytest.mark.parametrize("name", ["cpu", "memory"])
def test_a_negative_quantity_pair_gets_the_same_two_causes_from_the_api_server_and_the_loader(
    kube: KubeClient, corpus_namespace: str, name: str
) -> None:
    # Issue 12 item 4(a): cpu and memory share their CEL text; the loader once reported both messages at each path.
    document = copy.deepcopy(BASE)
    document["spec"]["resources"] = {"limits": {name: "-1"}, "requests": {name: "-2"}}
    document = _in_namespace(document, corpus_namespace, f"negative-{name}")

    server, server_says = _server_accepts(kube, document, corpus_namespace)
    loader, loader_says = _loader_accepts(document)

    assert (server, loader) == (False, False)
    causes = [f"spec.resources.{side}.{name}" for side in ("limits", "requests")]
    assert loader_says.splitlines() == [f"corpus: {path}: {name} must be a non-negative quantity" for path in causes]
    # The server prints each cause as `<path>: Invalid value: "string": <message>`, and only those two.
    assert server_says.count("must be a non-negative quantity") == 2, server_says
    assert all(f"{path}: Invalid value" in server_says for path in causes), server_says
    assert f"{'memory' if name == 'cpu' else 'cpu'} must be" not in server_says


def _create(kube: KubeClient, namespace: str, name: str, document: dict[str, Any] | None = None) -> dict[str, Any]:
    return kube.create(_in_namespace(document or BASE, namespace, name))


def test_the_whole_spec_is_immutable_after_creation(kube: KubeClient, namespace: str) -> None:
    created = _create(kube, namespace, "immutable")
    changed = copy.deepcopy(created)
    changed["spec"]["categories"][0]["options"] = {"nodesPerJob": 2}

    with pytest.raises(ApiError) as caught:
        kube.replace(changed)

    assert caught.value.status == 422
    assert "spec is immutable after creation" in caught.value.message


def test_metadata_stays_editable_after_creation(kube: KubeClient, namespace: str) -> None:
    created = _create(kube, namespace, "labels")
    patched = kube.merge_patch(CERTIFICATIONS, "labels", {"metadata": {"labels": {"team": "infra"}}}, namespace)

    assert patched["metadata"]["labels"] == {"team": "infra"}
    assert patched["spec"] == created["spec"]


def test_status_is_written_through_the_subresource_only(kube: KubeClient, namespace: str) -> None:
    _create(kube, namespace, "status")
    status = {"result": "RUNNING", "passed": "0/2", "failedNodes": 0, "observedGeneration": 1}

    written = kube.merge_patch(CERTIFICATIONS, "status", {"status": status}, namespace, subresource="status")
    ignored = kube.merge_patch(CERTIFICATIONS, "status", {"status": {"result": "PASSED"}}, namespace)

    assert written["status"] == status
    assert ignored["status"]["result"] == "RUNNING"  # the main resource ignores status writes


def test_status_values_are_validated_by_the_schema(kube: KubeClient, namespace: str) -> None:
    _create(kube, namespace, "bad-status")

    with pytest.raises(ApiError) as caught:
        kube.merge_patch(CERTIFICATIONS, "bad-status", {"status": {"result": "MAYBE"}}, namespace, subresource="status")

    assert caught.value.status == 422
    assert "status.result" in caught.value.message


def test_kubectl_get_shows_result_passed_and_failed_nodes(kube: KubeClient, namespace: str) -> None:
    _create(kube, namespace, "columns")
    kube.merge_patch(
        CERTIFICATIONS,
        "columns",
        {"status": {"result": "FAILED", "passed": "1/2", "failedNodes": 3, "excludedNodes": 1}},
        namespace,
        subresource="status",
    )
    table = _table(kube, namespace)

    columns = [column["name"] for column in table["columnDefinitions"]]
    row = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert columns[:4] == ["Name", "Result", "Passed", "Failed Nodes"]
    assert (row["Name"], row["Result"], row["Passed"], row["Failed Nodes"]) == ("columns", "FAILED", "1/2", 3)
    assert "Age" in columns


def _table(kube: KubeClient, namespace: str) -> dict[str, Any]:
    api = kube._api
    serialized = api.param_serialize(
        method="GET",
        resource_path=CERTIFICATIONS.path(namespace),
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*serialized)
    table: dict[str, Any] = json.loads(response.read())
    return table


def test_the_short_name_and_category_are_served(kube: KubeClient) -> None:
    resources = kube.request("GET", "/apis/nvcre.nvidia.com/v1alpha1")["resources"]
    certification = next(item for item in resources if item["name"] == "certifications")

    assert certification["shortNames"] == ["nvcert"]
    assert certification["categories"] == ["nvcre"]
