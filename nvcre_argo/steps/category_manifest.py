"""Which category Workflow a category step starts, in either shape of the certification Workflow (pure).

A certification Workflow compiled the default way embeds each category's manifest in its step (Argo fills in
`{{workflow.name}}`). One compiled with `--template-ref` passes every category's manifest in one parameter of
the shared `nvcre-certification` template, and its fan-out hands each step its step name; Argo does not
substitute inside parameter values, so the step names the manifest after its Workflow itself, exactly as the
default shape is named (`<parent>-<index>`). That parameter is the submitter's text, so a manifest that is
not a category Workflow Argo's strict template referencing would accept is refused before anything is
created: the certification's service account may create Workflows, and must not create any other kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nvcre_argo import contract
from nvcre_argo.names import LABEL_CATEGORY_INDEX, LABEL_DOMAIN, LABEL_VARIANT
from nvcre_argo.render.certification_workflow import DESCRIPTION
from nvcre_argo.render.template_ref import disallowed_overrides
from nvcre_argo.yamlio import YamlSyntaxError, load_yaml_mapping


class CategoryManifestError(ValueError):
    """The category Workflow to start is missing or is not one this step may create."""


@dataclass(frozen=True)
class CategoryToStart:
    manifest: dict[str, Any]
    key: str  # `<domain>/<variant>`, as the step reports it


def select_category_workflow(workflows_yaml: str, step: str, *, parent_name: str) -> CategoryToStart:
    """The manifest for `step` out of the `categories` parameter (YAML: step name -> manifest), named after
    the certification Workflow."""
    try:
        workflows = load_yaml_mapping(workflows_yaml, contract.ENV_CATEGORY_WORKFLOWS)
    except (ValueError, YamlSyntaxError) as error:
        raise CategoryManifestError(f"{contract.ENV_CATEGORY_WORKFLOWS}: {error}") from None
    if not isinstance(workflows.get(step), dict):
        raise CategoryManifestError(f"{contract.ENV_CATEGORY_WORKFLOWS}: no category Workflow for step {step!r}")
    manifest: dict[str, Any] = workflows[step]
    _check(manifest, step)
    metadata = manifest["metadata"]
    labels = metadata["labels"]
    named = {
        **manifest,
        "metadata": {
            **metadata,
            "name": f"{parent_name}-{labels[LABEL_CATEGORY_INDEX]}",
            "annotations": {**(metadata.get("annotations") or {}), DESCRIPTION: parent_name},
        },
    }
    return CategoryToStart(named, f"{labels[LABEL_DOMAIN]}/{labels[LABEL_VARIANT]}")


def _check(manifest: Mapping[str, Any], step: str) -> None:
    where = f"{contract.ENV_CATEGORY_WORKFLOWS}[{step!r}]"
    if manifest.get("apiVersion") != "argoproj.io/v1alpha1" or manifest.get("kind") != "Workflow":
        raise CategoryManifestError(f"{where}: not an argoproj.io/v1alpha1 Workflow")
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        raise CategoryManifestError(f"{where}: no spec")
    refused = disallowed_overrides(spec)
    if refused:
        raise CategoryManifestError(
            f"{where}: sets {', '.join(refused)}; a category Workflow may set only the fields Argo lets a "
            "Workflow that references a WorkflowTemplate override"
        )
    reference = str((spec.get("workflowTemplateRef") or {}).get("name", ""))
    if not reference.startswith(f"{contract.TEMPLATE_PREFIX}-") or (spec.get("workflowTemplateRef") or {}).get(
        "clusterScope"
    ):
        raise CategoryManifestError(f"{where}: references {reference!r}, not a category WorkflowTemplate")
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    missing = [label for label in (LABEL_CATEGORY_INDEX, LABEL_DOMAIN, LABEL_VARIANT) if not labels.get(label)]
    if missing or not str(labels.get(LABEL_CATEGORY_INDEX, "")).isdigit():
        raise CategoryManifestError(f"{where}: labels {', '.join(missing) or LABEL_CATEGORY_INDEX} missing or bad")
