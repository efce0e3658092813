"""`workflow_templates/`: one runnable WorkflowTemplate per catalog entry.

Each is the entry's category WorkflowTemplate. The entry is resolved for a default Certification (every
node labelled `nvidia.com/gpu.present=true`, no gang scheduler) only to check it compiles: the `category`
argument, which holds the target, has no default, so a template submitted alone from the Argo UI or with
`argo submit --from workflowtemplate/<name>` runs only on the nodes its submitter named. Certification
Workflows reference the same templates. `nvcre-certification` (see `render.template_ref`) is installed
beside them, for certifications compiled with `--template-ref`.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo.api.certification import Certification
from nvcre_argo.catalog.loader import Catalog
from nvcre_argo.catalog.model import CatalogEntry
from nvcre_argo.contract import CERTIFICATION_TEMPLATE, category_template_name
from nvcre_argo.errors import CompileError
from nvcre_argo.render.category_template import build_category_template
from nvcre_argo.render.template_ref import build_certification_template
from nvcre_argo.resolve.category import resolve_certification, supports_diagnose

DEFAULT_TARGET = {"nodeSelector": {"nvidia.com/gpu.present": "true"}}


def default_certification(entry: CatalogEntry) -> Certification:
    return Certification.model_validate(
        {
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Certification",
            "metadata": {"name": category_template_name(entry.domain, entry.variant)},
            "spec": {"target": DEFAULT_TARGET, "categories": [{"domain": entry.domain, "variant": entry.variant}]},
        },
        by_alias=True,
    )


def build_catalog_templates(catalog: Catalog, *, step_image: str) -> dict[str, dict[str, Any]]:
    """File name (`<template name>.yaml`) → WorkflowTemplate, for every entry in the catalog, and the
    certification WorkflowTemplate."""
    templates: dict[str, dict[str, Any]] = {}
    for entry in catalog.entries.values():
        _, errors = resolve_certification(default_certification(entry).spec, catalog)
        if errors:
            raise CompileError(error.at(catalog.sources[entry.key]) for error in errors)
        name = category_template_name(entry.domain, entry.variant)
        templates[f"{name}.yaml"] = build_category_template(
            domain=entry.domain,
            variant=entry.variant,
            description=entry.description,
            step_image=step_image,
            diagnose=supports_diagnose(entry),
        )
    templates[f"{CERTIFICATION_TEMPLATE}.yaml"] = build_certification_template(step_image=step_image)
    return templates
