"""Certifications for an Argo controller that runs only WorkflowTemplates (`templateReferencing: Strict`).

A hardened Argo (`workflowRestrictions: {templateReferencing: Strict}` or `Secure` in its controller's
ConfigMap) refuses a Workflow that does not reference a WorkflowTemplate, and refuses one that sets any spec
field outside a short allow-list (Argo's `allowedUserOverrideFields`, `workflow/util/merge.go`): what runs
in which pod is the installed templates' business, never the submitter's. `nvcre-compile --template-ref`
compiles for it:

- the certification Workflow references the installed `nvcre-certification` WorkflowTemplate, built here, and
  passes only arguments: the certification's name, its category Workflows (step name -> manifest) and the step
  names in spec order. The template fans a category step out over those names with `parallelism: 1`, so the
  categories still run one after another, in spec order, each surviving the failure of the one before;
- each category Workflow carries only arguments, an entrypoint and a deadline, so the step image and the step
  pods' placement are those the templates were installed with (`nvcre-argo install --image ...`), and group
  concurrency (`maxConcurrent`) is held by the shared runner or, with a pod per group, by a semaphore the plan
  step sizes (`steps.concurrency`).

The category step refuses a manifest with a field outside the allow-list before creating anything, so the
certification's service account never creates a Workflow Argo would refuse to run, whoever wrote the
arguments. The allow-list is encoded once, here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hera.workflows import Parameter, Steps, WorkflowTemplate
from hera.workflows import models as m

from nvcre_argo import __version__, contract
from nvcre_argo.names import LABEL_MANAGED_BY, MANAGED_BY, category_step_names
from nvcre_argo.render.category_template import LABEL_VERSION, exit_handler, pod_gc, pod_security_context, step_retry
from nvcre_argo.render.certification_workflow import (
    DEFAULT_LOCK,
    DESCRIPTION,
    TITLE,
    WorkflowTarget,
    category_workflow_manifest,
    certification_metadata,
    lifetime_spec,
    parent_step,
    step_output,
)
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.yamlio import dump_yaml

# Argo's allowedUserOverrideFields (v3.7.18 and v4), in the YAML spelling: the only spec fields a Workflow that
# references a WorkflowTemplate may set under `templateReferencing: Strict` or `Secure`.
ALLOWED_OVERRIDES = frozenset(
    {
        "activeDeadlineSeconds",
        "archiveLogs",
        "arguments",
        "artifactGC",
        "entrypoint",
        "metrics",
        "podGC",
        "priority",
        "shutdown",
        "suspend",
        "ttlStrategy",
        "volumeClaimGC",
        "workflowMetadata",
        "workflowTemplateRef",
    }
)


def disallowed_overrides(spec: Mapping[str, Any]) -> list[str]:
    """The spec fields of a Workflow that Argo's strict template referencing would refuse (sorted); a
    Workflow without `workflowTemplateRef` is refused whatever it sets."""
    refused = sorted(key for key in spec if key not in ALLOWED_OVERRIDES)
    if not spec.get("workflowTemplateRef"):
        refused.insert(0, "(no workflowTemplateRef)")
    return refused


def build_template_ref_workflow(
    target: WorkflowTarget, categories: Sequence[ResolvedCategory], arguments: Sequence[str]
) -> dict[str, Any]:
    """The certification Workflow that references `nvcre-certification`: metadata and arguments only."""
    names = category_step_names([(category.domain, category.variant) for category in categories])
    manifests = {
        name: category_workflow_manifest(target, category, arguments=argument, of=len(categories), template_ref=True)
        for name, category, argument in zip(names, categories, arguments, strict=True)
    }
    spec: dict[str, Any] = {
        "workflowTemplateRef": {"name": contract.CERTIFICATION_TEMPLATE},
        "arguments": {
            "parameters": [
                {"name": contract.PARAM_CERTIFICATION, "value": target.certification},
                # YAML, as the default shape embeds each manifest: a committed Workflow's diff stays readable.
                {"name": contract.PARAM_CATEGORY_WORKFLOWS, "value": dump_yaml(manifests)},
                {"name": contract.PARAM_CATEGORY_STEPS, "value": json.dumps(names)},
            ]
        },
    }
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": certification_metadata(target, len(categories)),
        "spec": spec | lifetime_spec(target),
    }


def build_certification_template(*, step_image: str) -> dict[str, Any]:
    """The `nvcre-certification` WorkflowTemplate: every certification's steps, for any list of categories."""
    target = WorkflowTarget(
        certification=f"{{{{workflow.parameters.{contract.PARAM_CERTIFICATION}}}}}", namespace=None, name=None,
        step_image=step_image,
    )  # fmt: skip
    with WorkflowTemplate(
        name=contract.CERTIFICATION_TEMPLATE,
        labels={LABEL_MANAGED_BY: MANAGED_BY, LABEL_VERSION: __version__},
        annotations={
            TITLE: "certification",
            DESCRIPTION: "Runs a Certification compiled with nvcre-compile --template-ref: its categories in order.",
        },
        entrypoint=contract.TEMPLATE_CERTIFICATION,
        on_exit=contract.TEMPLATE_ON_EXIT,
        service_account_name=contract.CERTIFICATION_SERVICE_ACCOUNT,
        security_context=pod_security_context(),
        pod_gc=pod_gc(),
        synchronization=m.Synchronization(mutexes=[m.Mutex(name=DEFAULT_LOCK)]),
        volumes=[m.Volume(name="scratch", empty_dir=m.EmptyDirVolumeSource())],
        arguments=[
            Parameter(name=contract.PARAM_CERTIFICATION, description="The Certification's name."),
            Parameter(
                name=contract.PARAM_CATEGORY_WORKFLOWS,
                description="Step name -> category Workflow (YAML), as nvcre-compile --template-ref writes it.",
            ),
            Parameter(name=contract.PARAM_CATEGORY_STEPS, description="The category steps in spec order (JSON)."),
        ],
    ) as template:
        follower = parent_step(
            "category",
            target,
            ["category"],
            inputs=[Parameter(name=contract.PARAM_STEP)],
            env=[
                m.EnvVar(
                    name=contract.ENV_CATEGORY_WORKFLOWS,
                    value=f"{{{{workflow.parameters.{contract.PARAM_CATEGORY_WORKFLOWS}}}}}",
                ),
                m.EnvVar(name=contract.ENV_CATEGORY_STEP, value=f"{{{{inputs.parameters.{contract.PARAM_STEP}}}}}"),
            ],
            retry_strategy=step_retry(3),
            outputs=[
                step_output(contract.OUTPUT_CATEGORY_STEP, contract.CATEGORY_STEP_FILE, ""),
                step_output(contract.OUTPUT_CATEGORY_WORKFLOW, contract.CATEGORY_WORKFLOW_FILE, ""),
                step_output(contract.OUTPUT_VERDICT, contract.VERDICT_FILE, "Unknown"),
                step_output(contract.OUTPUT_FAILED_NODE_COUNT, contract.FAILED_NODE_COUNT_FILE, ""),
            ],
        )
        exit_handler(parent_step(contract.TEMPLATE_STOP_CATEGORIES, target, ["stop-categories"]))
        verdict = parent_step(
            contract.TEMPLATE_VERDICT,
            target,
            ["verdict"],
            inputs=[Parameter(name="outputs")],
            env=[
                m.EnvVar(
                    name=contract.ENV_CATEGORY_STEPS,
                    value=f"{{{{workflow.parameters.{contract.PARAM_CATEGORY_STEPS}}}}}",
                ),
                m.EnvVar(name=contract.ENV_CATEGORY_OUTPUTS, value="{{inputs.parameters.outputs}}"),
            ],
        )
        # parallelism 1: Argo starts a fan-out's items in order, one after the other, as spec order requires.
        with Steps(name=contract.TEMPLATE_CERTIFICATION, parallelism=1):
            follower(
                name="category",
                with_param=f"{{{{workflow.parameters.{contract.PARAM_CATEGORY_STEPS}}}}}",
                arguments=[Parameter(name=contract.PARAM_STEP, value="{{item}}")],
                continue_on=m.ContinueOn(failed=True, error=True),
            )
            # Argo aggregates the outputs of the fan-out's succeeded items only; the verdict step counts the rest.
            verdict(
                name=contract.TEMPLATE_VERDICT,
                arguments=[Parameter(name="outputs", value="{{steps.category.outputs.parameters}}")],
            )
    result: dict[str, Any] = template.to_dict()
    return result
