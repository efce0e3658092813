"""The certification (parent) Workflow: one step per category, in spec order, one after another.

Each category step runs `nvcre-argo step category`: it creates the category's Workflow (a small manifest
referencing the entry's WorkflowTemplate, with the resolved category as its argument) under a deterministic
name unless it exists, follows it to its end and fails when the category failed, which `continueOn` lets the
next category survive. A retried step (`retryStrategy: OnError`, e.g. after an eviction) finds the Workflow
it started instead of starting another, and a step whose parent is stopped stops its category Workflow (see
`steps.children`); the exit handler `stop-categories` catches what a killed step could not (it runs unless
the Workflow succeeded, `category_template.exit_handler`). The step's outputs name the category Workflow,
its verdict and its failed-node count, so the Argo UI leads from a category step to its Workflow and its
failures. A last `verdict` step fails the certification Workflow when any category failed, so the Argo UI
shows the same verdict as the Certification's status.

The whole Workflow holds a mutex (`synchronization`), so two certifications sharing the lock (by default
every certification in a namespace) never run their gang jobs on the same nodes at once and time each other
out. Succeeded step pods are garbage-collected after a delay (`podGC: OnPodSuccess`); failed ones stay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hera.workflows import Container, Parameter, Steps, Workflow
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
from nvcre_argo.plan.grouping import is_diagnose
from nvcre_argo.render.category_template import (
    LABEL_VERSION,
    STEP_RESOURCES,
    container_security,
    exit_handler,
    pod_gc,
    pod_security_context,
    step_retry,
)
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.yamlio import dump_yaml, load_yaml_mapping

# What Argo's workflow list shows in its name column, on two lines cut at about 22 characters: a category
# Workflow reads `1/2 nccl-all-reduce` over the certification run it belongs to (`gpu-cluster-cert-x7k2q`).
TITLE = "workflows.argoproj.io/title"
DESCRIPTION = "workflows.argoproj.io/description"
# The mutex every certification Workflow holds unless compiled with another: certifications in one
# namespace run one at a time, so overlapping targets never block each other's gang jobs.
DEFAULT_LOCK = "nvcre-argo-gpu-nodes"
DEFAULT_TTL_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class WorkflowTarget:
    """Where and under which name the certification Workflow is created."""

    certification: str
    namespace: str | None
    name: str | None
    step_image: str
    owner_references: Sequence[dict[str, Any]] = ()
    lock: str | None = DEFAULT_LOCK
    # Workflow `spec` fields placing every step pod of both levels (see render.step_placement).
    placement: Mapping[str, Any] = field(default_factory=dict)
    # Finished certification Workflows (with their category Workflows) are deleted after this long; None keeps
    # them. Results outlive them (the result ConfigMaps are owned by the Certification or by nothing).
    ttl_seconds: int | None = DEFAULT_TTL_SECONDS
    # activeDeadlineSeconds of the certification Workflow, and of every category Workflow (None: the plan step
    # derives each category's from its plan, see steps.deadline).
    deadline_seconds: int | None = None
    category_deadline_seconds: int | None = None
    # The category Workflows start at the entrypoint whose groups one shared runner pod runs (`-shared`).
    shared_runner: bool = True


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
    target: WorkflowTarget, category: ResolvedCategory, *, arguments: str, of: int, template_ref: bool = False
) -> dict[str, Any]:
    """The category's Workflow, created by the certification Workflow's step (named after its parent).

    `podSpecPatch` sets the step image on every step container (Argo names it `main`), so `--step-image`
    reaches the steps too, whatever image the installed WorkflowTemplate was generated with; the step pods'
    placement is the certification Workflow's. `template_ref`: the shape Argo's `templateReferencing: Strict`
    accepts (see `render.template_ref`): no pod spec fields at all, so the image and placement are the installed
    templates'; and no `{{workflow.name}}`, since it travels in a parameter Argo does not substitute into, so
    the category step names it after its Workflow (`steps.category_manifest`)."""
    certification, step_image = target.certification, target.step_image
    spec: dict[str, Any] = {
        "workflowTemplateRef": {"name": contract.category_template_name(category.domain, category.variant)},
        "arguments": {
            "parameters": [
                {"name": contract.PARAM_CATEGORY, "value": arguments},
                {"name": contract.PARAM_CERTIFICATION, "value": certification},
            ]
        },
    }
    if not template_ref:
        spec["podSpecPatch"] = json.dumps(
            {"containers": [{"name": "main", "image": step_image}]}, separators=(",", ":")
        )
    entrypoint = contract.TEMPLATE_DIAGNOSE if is_diagnose(category) else contract.TEMPLATE_CATEGORY
    if target.shared_runner:
        entrypoint = contract.shared_runner_entrypoint(entrypoint)
    if entrypoint != contract.TEMPLATE_CATEGORY:
        spec["entrypoint"] = entrypoint
    if target.category_deadline_seconds:
        spec["activeDeadlineSeconds"] = target.category_deadline_seconds
    if not template_ref:
        spec |= target.placement
    title = f"{category.index + 1}/{of} {category.variant}"
    metadata: dict[str, Any] = (
        {"labels": _category_labels(certification, category), "annotations": {TITLE: title}}
        if template_ref
        else {
            "name": f"{{{{workflow.name}}}}-{category.index}",
            "labels": _category_labels(certification, category),
            "annotations": {TITLE: title, DESCRIPTION: "{{workflow.name}}"},
        }
    )
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": metadata, "spec": spec}


def _parent_env(target: WorkflowTarget) -> list[m.EnvVar]:
    """Who the certification Workflow is, for the steps that start, follow and stop its category Workflows."""
    return [
        m.EnvVar(name=contract.ENV_CERTIFICATION, value=target.certification),
        m.EnvVar(name=contract.ENV_WORKFLOW_NAME, value="{{workflow.name}}"),
        m.EnvVar(name=contract.ENV_WORKFLOW_UID, value="{{workflow.uid}}"),
        m.EnvVar(name=contract.ENV_NAMESPACE, value="{{workflow.namespace}}"),
    ]


def parent_step(name: str, target: WorkflowTarget, args: list[str], **kwargs: Any) -> Container:
    env = [*_parent_env(target), *kwargs.pop("env", [])]
    return Container(
        name=name,
        image=target.step_image,
        command=["nvcre-argo", "step"],
        args=args,
        env=env,
        resources=STEP_RESOURCES,
        security_context=container_security(),
        volume_mounts=[m.VolumeMount(name="scratch", mount_path=contract.OUTPUT_DIR)],
        **kwargs,
    )


def step_output(name: str, path: str, default: str) -> Parameter:
    # A default keeps Argo from turning a step that failed before writing its outputs into an Error.
    return Parameter(name=name, value_from=m.ValueFrom(path=path, default=default))


def _category_step(target: WorkflowTarget, category: ResolvedCategory, argument: str, of: int) -> Container:
    """The step that starts, follows (and if need be stops) one category's Workflow."""
    manifest = category_workflow_manifest(target, category, arguments=argument, of=of)
    return parent_step(
        contract.category_step_template(category.index),
        target,
        ["category"],
        env=[
            m.EnvVar(name=contract.ENV_CATEGORY_KEY, value=f"{category.domain}/{category.variant}"),
            # YAML, as a reviewer of committed output reads it (the category argument stays one value per line).
            m.EnvVar(name=contract.ENV_CATEGORY_WORKFLOW, value=dump_yaml(manifest)),
        ],
        retry_strategy=step_retry(3),
        metrics=_category_metrics(target.certification, category),
        outputs=[
            step_output(contract.OUTPUT_CATEGORY_WORKFLOW, contract.CATEGORY_WORKFLOW_FILE, ""),
            step_output(contract.OUTPUT_VERDICT, contract.VERDICT_FILE, "Unknown"),
            step_output(contract.OUTPUT_FAILED_NODE_COUNT, contract.FAILED_NODE_COUNT_FILE, ""),
        ],
    )


def _category_metrics(certification: str, category: ResolvedCategory) -> m.Metrics:
    """Prometheus gauges Argo's controller exports when a category step ends: how long the category took and
    how many nodes it failed, labelled so a dashboard can follow one category across runs.

    The failed-node count only when the step wrote one: an attempt whose pod was lost ends with the output's
    empty default, which is no number (Argo's controller logs "could not construct metric ... ParseFloat" for
    it) and, as zero, would read as a category that failed nobody."""
    failed_node_count = f"{{{{outputs.parameters.{contract.OUTPUT_FAILED_NODE_COUNT}}}}}"
    labels = [
        m.MetricLabel(key="certification", value=certification),
        m.MetricLabel(key="category", value=f"{category.domain}/{category.variant}"),
    ]
    return m.Metrics(
        prometheus=[
            m.Prometheus(
                name="nvcre_category_duration_seconds",
                help="Wall time of a certification category, from its step's start to its end.",
                labels=labels,
                gauge=m.Gauge(value="{{duration}}", realtime=False),
            ),
            m.Prometheus(
                name="nvcre_category_failed_nodes",
                help="Nodes a certification category recorded as failed.",
                labels=labels,
                gauge=m.Gauge(value=failed_node_count, realtime=False),
                when=f"'{failed_node_count}' != ''",
            ),
        ]
    )


def embedded_category_workflow(template: Mapping[str, Any]) -> dict[str, Any] | None:
    """The category Workflow manifest a compiled category step starts (`{{workflow.*}}` not yet filled in),
    or None for the certification Workflow's other templates; for tools and tests that read compiled output."""
    for env in (template.get("container") or {}).get("env") or []:
        if env.get("name") == contract.ENV_CATEGORY_WORKFLOW:
            return load_yaml_mapping(env["value"], contract.ENV_CATEGORY_WORKFLOW)
    return None


def build_certification_workflow(
    target: WorkflowTarget, categories: Sequence[ResolvedCategory], arguments: Sequence[str]
) -> dict[str, Any]:
    """The parent Workflow for a resolved Certification (categories in spec order); `arguments` are their
    `category_arguments`, computed once by the caller."""
    names = category_step_names([(category.domain, category.variant) for category in categories])
    synchronization = m.Synchronization(mutexes=[m.Mutex(name=target.lock)]) if target.lock else None
    with Workflow(
        entrypoint=contract.TEMPLATE_CERTIFICATION,
        on_exit=contract.TEMPLATE_ON_EXIT,
        service_account_name=contract.CERTIFICATION_SERVICE_ACCOUNT,
        security_context=pod_security_context(),
        pod_gc=pod_gc(),
        synchronization=synchronization,
        volumes=[m.Volume(name="scratch", empty_dir=m.EmptyDirVolumeSource())],
    ) as workflow:
        followers = [
            _category_step(target, category, argument, len(categories))
            for category, argument in zip(categories, arguments, strict=True)
        ]
        exit_handler(parent_step(contract.TEMPLATE_STOP_CATEGORIES, target, ["stop-categories"]))
        verdict = parent_step(
            contract.TEMPLATE_VERDICT,
            target,
            ["verdict"],
            # Argo resolves `steps.*` only in the calling step's own fields, so the phases arrive as an input.
            inputs=[Parameter(name="statuses")],
            env=[m.EnvVar(name=contract.ENV_STATUSES, value="{{inputs.parameters.statuses}}")],
        )
        with Steps(name=contract.TEMPLATE_CERTIFICATION):
            for name, follower in zip(names, followers, strict=True):
                follower(name=name, continue_on=m.ContinueOn(failed=True, error=True))
            statuses = ",".join(f"{name}={{{{steps.{name}.status}}}}" for name in names)
            verdict(name=contract.TEMPLATE_VERDICT, arguments=[Parameter(name="statuses", value=statuses)])
    result: dict[str, Any] = workflow.to_dict()
    result["metadata"] = certification_metadata(target, len(categories))
    result["spec"] |= lifetime_spec(target) | dict(target.placement)
    return result


def certification_metadata(target: WorkflowTarget, count: int) -> dict[str, Any]:
    """The certification Workflow's metadata (both shapes): the labels the watcher selects it by."""
    metadata: dict[str, Any] = {
        "labels": {
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_CERTIFICATION: target.certification,
            LABEL_ROLE: ROLE_PARENT,
            LABEL_VERSION: __version__,
        },
        # No title: Argo's list then shows the name, `<certification>-<run>`, with the category count below.
        "annotations": {DESCRIPTION: f"{count} categories"},
    }
    if target.name:
        metadata["name"] = target.name
    else:
        metadata["generateName"] = certification_workflow_prefix(target.certification)
    if target.namespace:
        metadata["namespace"] = target.namespace
    if target.owner_references:
        metadata["ownerReferences"] = [dict(sorted(reference.items())) for reference in target.owner_references]
    # In Hera's (alphabetical) order, so the committed output of either shape reads the same.
    return dict(sorted(metadata.items()))


def lifetime_spec(target: WorkflowTarget) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if target.deadline_seconds:
        spec["activeDeadlineSeconds"] = target.deadline_seconds
    if target.ttl_seconds is not None:
        spec["ttlStrategy"] = {"secondsAfterCompletion": target.ttl_seconds}
    return spec
