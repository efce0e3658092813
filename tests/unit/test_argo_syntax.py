"""`{{` in a Certification is refused at compile time, at the field that holds it.

Why: a category's resolved options travel to its steps as an Argo parameter, and Argo resolves `{{...}}` in
it with no way to escape it, so a value such as `registry/{{x}}` would fail (or, worse, be substituted) only
once the Workflow runs. Every value and every key of a user map is checked; a single brace is harmless.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.compiler import CompileOptions, check_certifications, compile_certifications
from nvcre_argo.errors import CompileError, format_path
from nvcre_argo.loading import load_certifications
from nvcre_argo.yamlio import dump_yaml

CATEGORY = {"domain": "communication", "variant": "nccl-all-reduce"}
BASE: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "cert", "namespace": "nvcre"},
    "spec": {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "categories": [CATEGORY]},
}


def with_spec(**spec: Any) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    document["spec"].update(spec)
    return document


def problems(document: dict[str, Any]) -> set[tuple[str, str]]:
    loaded = load_certifications(dump_yaml(document), "cert.yaml")
    errors = check_certifications(loaded, catalog=load_catalog(()), options=CompileOptions())
    return {(format_path(error.path), error.kind) for error in errors}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(
            with_spec(categories=[{**CATEGORY, "options": {"image": "registry/{{x}}"}}]),
            {("spec.categories[0].options.image", "argo-syntax")},
            id="a-category-option",
        ),
        pytest.param(with_spec(image="{{workflow.name}}"), {("spec.image", "argo-syntax")}, id="a-global-option"),
        pytest.param(
            with_spec(target={"taintSelectors": [{"key": "dedicated", "value": "a{{b}}"}]}),
            {("spec.target.taintSelectors[0].value", "argo-syntax")},
            id="a-list-item-field",
        ),
    ],
)
def test_a_value_holding_double_braces_is_refused_at_its_own_path(
    document: dict[str, Any], expected: set[tuple[str, str]]
) -> None:
    assert expected <= problems(document)


def test_compile_refuses_it_with_the_message_and_builds_nothing() -> None:
    loaded = load_certifications(
        dump_yaml(with_spec(categories=[{**CATEGORY, "options": {"image": "registry/{{x}}"}}])), "cert.yaml"
    )
    with pytest.raises(CompileError) as raised:
        compile_certifications(loaded, catalog=load_catalog(()), options=CompileOptions())
    assert raised.value.render() == (
        "cert.yaml: spec.categories[0].options.image: must not contain '{{' "
        "(Argo would treat it as a template expression)"
    )


@pytest.mark.parametrize("value", ["registry/{x}", "a}}b", "{ {"], ids=["single-brace", "closing-only", "spaced"])
def test_braces_that_are_not_an_argo_expression_are_accepted(value: str) -> None:
    assert problems(with_spec(categories=[{**CATEGORY, "options": {"image": value}}])) == set()
