"""The certification (parent) Workflow: one step per category, in spec order, one after another.

Each step creates the category's Workflow (a small manifest referencing the entry's WorkflowTemplate, with
the resolved category as its argument) and waits for its phase: Succeeded passes; Failed or Error fails the
step, which `continueOn` lets the next category survive. A last `verdict` step fails the certification
Workflow when any category failed, so the Argo UI shows the same verdict as the Certification's status.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hera.workflows import Container, Parameter, Resource, Steps, Workflow
from hera.workflows import models as m

from nvcre_argo import __version__, contract
from nvcre_argo.names import (
    LABEL_CATEGORY_INDEX,
    LABEL_CERTIFICATION,
    LABEL_DOMAIN,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    LABEL_VARIANT,
    MANAGED_BY,
    ROLE_CATEGORY,
    ROLE_PARENT,
    category_step_names,
    certification_workflow_prefix,
)
from nvcre_argo.render.category_template import LABEL_VERSION, STEP_RESOURCES, pod_security_context
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.yamlio import dump_yaml

TITLE = "workflows.argoproj.io/title"
DESCRIPTION = "workflows.argoproj.io/description"


@dataclass(frozen=True)
class WorkflowTarget:
    """Where and under which name the certification Workflow is created."""

    certification: str
    namespace: str | None
    name: str | None
    step_image: str
    owner_references: Sequence[dict[str, Any]] = ()


def category_arguments(category: ResolvedCategory) -> str:
    """The resolved category as the key-sorted JSON the steps read: deterministic bytes, one value per line
    so that a reviewer of committed output sees a readable diff when an option changes."""
    return json.dumps(category.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True, indent=1)


def _category_labels(certification: str, category: ResolvedCategory) -> dict[str, str]:
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_CERTIFICATION: certification,
        LABEL_ROLE: ROLE_CATEGORY,
        LABEL_CATEGORY_INDEX: str(category.index),
        LABEL_DOMAIN: category.domain,
        LABEL_VARIANT: category.variant,
        LABEL_VERSION: __version__,
    }


def category_workflow_manifest(
    certification: str, category: ResolvedCategory, *, arguments: str, step_image: str
) -> dict[str, Any]:
    """The category's Workflow, created by the certification Workflow's step (named after its parent).

    `podSpecPatch` sets the step image on every step container (Argo names it `main`), so `--step-image`
    reaches the steps too, whatever image the installed WorkflowTemplate was generated with."""
    spec: dict[str, Any] = {
        "workflowTemplateRef": {"name": contract.category_template_name(category.domain, category.variant)},
        "arguments": {
            "parameters": [
                {"name": contract.PARAM_CATEGORY, "value": arguments},
                {"name": contract.PARAM_CERTIFICATION, "value": certification},
            ]
        },
        "podSpecPatch": json.dumps({"containers": [{"name": "main", "image": step_image}]}, separators=(",", ":")),
    }
    if category.options.max_concurrent:
        spec["parallelism"] = category.options.max_concurrent
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": f"{{{{workflow.name}}}}-{category.index}",
            "labels": _category_labels(certification, category),
            "annotations": {
                TITLE: f"{certification}: {category.domain}/{category.variant}",
                DESCRIPTION: (
                    f"Category {category.index} of Certification {certification}: {category.entry.description}"
                ),
            },
        },
        "spec": spec,
    }


def build_certification_workflow(
    target: WorkflowTarget, categories: Sequence[ResolvedCategory], arguments: Sequence[str]
) -> dict[str, Any]:
    """The parent Workflow for a resolved Certification (categories in spec order); `arguments` are their
    `category_arguments`, computed once by the caller."""
    names = category_step_names([(category.domain, category.variant) for category in categories])
    keys = ", ".join(f"{category.domain}/{category.variant}" for category in categories)
    metadata: dict[str, Any] = {
        "labels": {
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_CERTIFICATION: target.certification,
            LABEL_ROLE: ROLE_PARENT,
            LABEL_VERSION: __version__,
        },
        "annotations": {
            TITLE: f"Certification {target.certification}",
            DESCRIPTION: f"{len(categories)} categories, one after another: {keys}",
        },
    }
    if target.name:
        metadata["name"] = target.name
    else:
        metadata["generate_name"] = certification_workflow_prefix(target.certification)
    if target.namespace:
        metadata["namespace"] = target.namespace
    if target.owner_references:
        metadata["owner_references"] = [m.OwnerReference(**reference) for reference in target.owner_references]
    with Workflow(
        entrypoint=contract.TEMPLATE_CERTIFICATION,
        service_account_name=contract.WORKFLOW_SERVICE_ACCOUNT,
        security_context=pod_security_context(),
        **metadata,
    ) as workflow:
        creators = [
            Resource(
                name=f"category-{category.index}",
                action="create",
                manifest=dump_yaml(
                    category_workflow_manifest(
                        target.certification, category, arguments=argument, step_image=target.step_image
                    )
                ),
                set_owner_reference=True,
                success_condition="status.phase == Succeeded",
                failure_condition="status.phase in (Failed, Error)",
            )
            for category, argument in zip(categories, arguments, strict=True)
        ]
        verdict = Container(
            name=contract.TEMPLATE_VERDICT,
            image=target.step_image,
            command=["nvcre-argo", "step"],
            args=["verdict"],
            # Argo resolves `steps.*` only in the calling step's own fields, so the phases arrive as an input.
            inputs=[Parameter(name="statuses")],
            env=[m.EnvVar(name=contract.ENV_STATUSES, value="{{inputs.parameters.statuses}}")],
            resources=STEP_RESOURCES,
            security_context=m.SecurityContext(
                allow_privilege_escalation=False,
                read_only_root_filesystem=True,
                run_as_non_root=True,
                capabilities=m.Capabilities(drop=["ALL"]),
            ),
        )
        with Steps(name=contract.TEMPLATE_CERTIFICATION):
            for name, creator in zip(names, creators, strict=True):
                creator(name=name, continue_on=m.ContinueOn(failed=True, error=True))
            statuses = ",".join(f"{name}={{{{steps.{name}.status}}}}" for name in names)
            verdict(name=contract.TEMPLATE_VERDICT, arguments=[Parameter(name="statuses", value=statuses)])
    result: dict[str, Any] = workflow.to_dict()
    return result
