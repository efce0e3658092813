"""Everything the compiler and the renderer emit, submitted to a real kube-apiserver with `dryRun=All` and
`fieldValidation=Strict`.

The offline strict schema checks (tests/unit/test_compiler.py, test_render.py) rewrite the CRD schemas; the API
server applies them as they are, with its own ObjectMeta validation (names, labels), defaulting and CEL rules, and
rejects any unknown field instead of pruning it. The matrix is the unit tests' (seed example, each catalog entry
alone, gang scheduler KAI / Run:ai / none, workload labels at both levels, maxConcurrent, 64 categories); every
object is placed in the test's namespace. Argo's own validation (template references, variable scopes) is not an
admission webhook, so it is checked offline by tests/support/argo_semantics.py instead.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvcre_argo.compiler import CompileOptions
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.loading import parse_certification
from nvcre_argo.names import runtime_name, trainjob_name
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.category import resolve_certification
from nvcre_argo.resolve.values import gpu_values
from tests.unit.test_compiler import (
    ALL_CASES,
    ENTRY_KEYS,
    KAI,
    RUNAI,
    TEMPLATE_FILES,
    builtin_catalog,
    category_manifests,
    certification_document,
    compile_case,
)

GANGS: dict[str, dict[str, str] | None] = {"no-gang": None, "kai": KAI, "runai": RUNAI}
ARCHITECTURE = "h100"


def in_namespace(manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    placed = copy.deepcopy(manifest)
    placed["metadata"]["namespace"] = namespace
    return placed


def rejections(kube: KubeClient, manifests: list[dict[str, Any]]) -> list[str]:
    """What the API server says about each manifest it would not create (empty when it takes them all)."""
    problems = []
    for manifest in manifests:
        metadata = manifest["metadata"]
        try:
            created = kube.create(manifest, dry_run=True, strict=True)
        except ApiError as error:
            problems.append(f"{manifest['kind']} {metadata.get('name') or metadata.get('generateName')}: {error}")
            continue
        assert created["metadata"]["namespace"] == metadata["namespace"]
    return problems


@pytest.mark.parametrize("case", ALL_CASES)
def test_the_api_server_accepts_the_parent_and_every_category_workflow(
    kube: KubeClient, namespace: str, case: str
) -> None:
    workflow = compile_case(case, CompileOptions(namespace=namespace))
    parent_name = workflow["metadata"]["generateName"] + "abcde"
    manifests = [workflow] + [
        in_namespace(manifest, namespace) for manifest in category_manifests(workflow, parent_name)
    ]

    assert rejections(kube, manifests) == []


def test_the_api_server_accepts_a_parent_with_a_pinned_name(kube: KubeClient, namespace: str) -> None:
    workflow = compile_case("seed-example", CompileOptions(namespace=namespace, name="gpu-cert-2026-01"))

    assert rejections(kube, [workflow]) == []


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda path: path.stem)
def test_the_api_server_accepts_every_committed_workflow_template(kube: KubeClient, namespace: str, path: Path) -> None:
    template = yaml.safe_load(path.read_text(encoding="utf-8"))

    assert rejections(kube, [in_namespace(template, namespace)]) == []


@pytest.mark.parametrize("gang", GANGS)
@pytest.mark.parametrize("key", ENTRY_KEYS)
def test_the_api_server_accepts_the_rendered_runtime_and_trainjob_of_every_entry(
    kube: KubeClient, namespace: str, key: str, gang: str
) -> None:
    domain, variant = key.split("/")
    spec: dict[str, Any] = {} if GANGS[gang] is None else {"gangScheduler": GANGS[gang]}
    document = certification_document("dry-run", [{"domain": domain, "variant": variant}], **spec)
    resolved, errors = resolve_certification(parse_certification(document, "dry-run.yaml").spec, builtin_catalog())
    assert errors == []
    (category,) = resolved
    gpu = gpu_values(category, ARCHITECTURE)
    nodes = ("gpu-node-1",) if category.entry.grouping == "per-node" else ("gpu-node-1", "gpu-node-2")
    workflow_name = "dry-run-abcde-0"
    runtime = render_runtime(category, gpu, name=runtime_name(workflow_name), namespace=namespace, num_nodes=len(nodes))
    trainjob = render_trainjob(
        category,
        gpu,
        name=trainjob_name(workflow_name, "g0"),
        namespace=namespace,
        certification="dry-run",
        runtime_name=runtime_name(workflow_name),
        group="g0",
        nodes=nodes,
    )

    assert rejections(kube, [runtime, trainjob]) == []


# Controls: the same calls must be able to fail, or the tests above prove nothing.


def test_strict_field_validation_rejects_a_misspelled_field(kube: KubeClient, namespace: str) -> None:
    workflow = compile_case("seed-example", CompileOptions(namespace=namespace))
    retry = workflow["spec"]["templates"][0]["retryStrategy"]
    retry["retryPolcy"] = retry.pop("retryPolicy")

    (problem,) = rejections(kube, [workflow])

    assert 'unknown field "spec.templates[0].retryStrategy.retryPolcy"' in problem


def test_the_api_server_rejects_a_pinned_name_that_is_not_a_dns_name(kube: KubeClient, namespace: str) -> None:
    """What `nvcre-compile --name Bad_Name` produces today (see the xfail in test_compiler.py)."""
    workflow = compile_case("seed-example", CompileOptions(namespace=namespace, name="Bad_Name"))

    (problem,) = rejections(kube, [workflow])

    assert "metadata.name" in problem
