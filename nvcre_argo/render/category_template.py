"""The category WorkflowTemplate: how one catalog entry runs inside Argo (built with Hera).

    plan ──▶ run-group x N (withParam: the group names) ──▶ record
    onExit: cleanup, unless the Workflow succeeded

Communication entries also have a `diagnose` entrypoint (`testScale: diagnose`, adaptive fault isolation):

    plan ──▶ rounds(1) ──▶ record,   rounds(n) = plan-round ──▶ run-group x N ──▶ rounds(n+1) until done

Each has a twin with one shared runner (`category-shared`, `diagnose-shared`; `nvcre-compile --shared-runner`),
whose orchestration footprint does not grow with the number of groups:

    plan ──▶ [ run-groups  +  group x N (suspend nodes, no pod) ] ──▶ record

where the one `run-groups` pod runs each group once Argo has run its `group` node, at most `maxConcurrent` at
once, and completes that node with the group's outcome (`steps.shared_runner`).

Every step is `nvcre-argo step <name>` in the package's own image, as a non-root user, reading the resolved
category from the `category` parameter (JSON) through its environment, never through shell text. Group
concurrency (`maxConcurrent`) is a semaphore on the run-group template whose limit the plan step writes into a
ConfigMap named after the Workflow (see `steps.concurrency`): Argo's template-level parallelism is a fixed
integer and this template is shared, and a Workflow's `spec.parallelism` is a field Argo's `templateReferencing:
Strict` does not let a submitter set. (A shared runner holds the limit itself, see `steps.shared_runner` for
why.) `repeatCount` runs inside the run step, group by group. Why a
WorkflowTemplate rather than a Workflow embedded in the certification Workflow: Argo resolves `{{...}}` in an
embedded manifest and offers no escape (argo-workflows #12634), so the certification Workflow creates small
Workflows that reference these templates instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hera.workflows import Container, Parallel, Parameter, Step, Steps, Suspend, WorkflowTemplate
from hera.workflows import models as m

from nvcre_argo import __version__, contract
from nvcre_argo.names import (
    LABEL_DOMAIN,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    LABEL_VARIANT,
    MANAGED_BY,
    ROLE_CATEGORY,
    concurrency_configmap,
)

LABEL_VERSION = "nvcre.nvidia.com/version"
STEP_RESOURCES = m.ResourceRequirements(
    requests={"cpu": "100m", "memory": "128Mi"}, limits={"cpu": "1", "memory": "512Mi"}
)

# The shared runner follows up to every group of a category at once, each in a thread with its health watch.
SHARED_RUNNER_RESOURCES = m.ResourceRequirements(
    requests={"cpu": "500m", "memory": "512Mi"}, limits={"cpu": "2", "memory": "2Gi"}
)


CATEGORY_PARAMETER_HELP = (
    "Required, no default: the resolved category (JSON), its target included, so that nothing runs on nodes "
    "nobody chose. A category Workflow of a certification compiled with nvcre-compile holds one to copy."
)


def _step_env(*extra: m.EnvVar) -> list[m.EnvVar]:
    """What every step reads: the resolved category and where it runs (Argo fills the `{{...}}`)."""
    return [
        m.EnvVar(name=contract.ENV_CATEGORY, value=f"{{{{workflow.parameters.{contract.PARAM_CATEGORY}}}}}"),
        m.EnvVar(name=contract.ENV_CERTIFICATION, value=f"{{{{workflow.parameters.{contract.PARAM_CERTIFICATION}}}}}"),
        m.EnvVar(name=contract.ENV_WORKFLOW_NAME, value="{{workflow.name}}"),
        m.EnvVar(name=contract.ENV_WORKFLOW_UID, value="{{workflow.uid}}"),
        m.EnvVar(name=contract.ENV_NAMESPACE, value="{{workflow.namespace}}"),
        *extra,
    ]


def container_security() -> m.SecurityContext:
    return m.SecurityContext(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        capabilities=m.Capabilities(drop=["ALL"]),
    )


def _step(
    name: str, image: str, args: list[str], resources_override: m.ResourceRequirements | None = None, **kwargs: Any
) -> Container:
    return Container(
        name=name,
        image=image,
        command=["nvcre-argo", "step"],
        args=args,
        resources=resources_override or STEP_RESOURCES,
        security_context=container_security(),
        volume_mounts=[m.VolumeMount(name="scratch", mount_path=contract.OUTPUT_DIR)],
        **kwargs,
    )


def pod_gc() -> m.PodGC:
    """Succeeded step pods are deleted after ten minutes (long enough to read a step that just ended in the
    Argo UI); failed ones stay for their logs. At 1,024 groups, kept pods would otherwise pile up by the
    thousand per run."""
    return m.PodGC(strategy="OnPodSuccess", delete_delay_duration="10m")


def step_retry(limit: int) -> m.RetryStrategy:
    """Retry a step whose pod was lost (`Error`: evicted or deleted before Argo read its end), never one that
    failed: every step is safe to run again (it resumes from what it recorded), but a failed one would only
    fail again.

    A pod the kubelet stopped with SIGTERM and whose last status Argo read before the pod was gone reaches
    Argo as `Failed` (exit code 143) and is not retried: on 4,096 simulated nodes one of the shared runner's
    three evictions went so. Retrying it too takes `retryPolicy: Always` with an expression, and Argo then
    replaces the message of every step the expression declines, a failed category's included, with
    "retryStrategy.expression evaluated to false": the message an operator reads in the Argo UI to learn
    which category failed and which nodes. Argo has no retry strategy that retries exit code 143 and keeps a
    failed step's message, and the message is what this product exists to show."""
    return m.RetryStrategy(limit=str(limit), retry_policy="OnError")


def exit_handler(step: Container) -> None:
    """The exit handler (`onExit: on-exit`) that runs `step` unless the Workflow succeeded.

    The exit steps (cleanup's deletion of unfinished TrainJobs, stop-categories' stop of running category
    Workflows) are for a Workflow that was stopped, hit its deadline or failed: a Workflow that succeeded ran
    every group, or every category, to its end, so there is nothing left for them. Skipping them there saves
    a pod (its scheduling, start-up and Argo's wait for it) at the end of every category and certification;
    the Argo UI shows the step Skipped."""
    with Steps(name=contract.TEMPLATE_ON_EXIT):
        step(name=step.name, when=contract.UNLESS_SUCCEEDED)


def pod_security_context() -> m.PodSecurityContext:
    return m.PodSecurityContext(
        run_as_non_root=True,
        run_as_user=contract.STEP_USER_ID,
        run_as_group=contract.STEP_USER_ID,
        fs_group=contract.STEP_USER_ID,
        seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
    )


def group_semaphore() -> m.Synchronization:
    """At most `maxConcurrent` groups of one category Workflow run at once (Argo substitutes the name)."""
    configmap = concurrency_configmap("{{workflow.name}}")
    reference = m.ConfigMapKeySelector(name=configmap, key=contract.CONCURRENCY_KEY)
    return m.Synchronization(semaphores=[m.SemaphoreRef(config_map_key_ref=reference)])


@dataclass(frozen=True)
class GroupTemplates:
    """The templates a fan-out of groups calls: `run_group`, a step pod per group; or, with one shared runner
    (`steps.shared_runner`), `run_groups`, one pod for them all, beside a `group` suspend node per group."""

    run_group: Container
    run_groups: Container
    group: Suspend


def _fan_out(templates: GroupTemplates, items: str, *, shared: bool, when: str | None = None) -> None:
    """The groups of `items` (a `withParam` expression), inside the current Steps: each is a node named
    `group(<i>:<name>)`. A failed group never stops the steps after it (the record step blames its nodes, a
    diagnose round learns from it), so every call continues on failure and error."""
    keep_going = m.ContinueOn(failed=True, error=True)
    group = [Parameter(name=contract.PARAM_GROUP, value="{{item}}")]
    if not shared:
        templates.run_group(name="group", with_param=items, arguments=group, when=when, continue_on=keep_going)
        return
    with Parallel():
        templates.run_groups(
            name=contract.TEMPLATE_RUN_GROUPS,
            arguments=[Parameter(name=contract.PARAM_GROUPS, value=items)],
            when=when,
            continue_on=keep_going,
        )
        templates.group(name="group", with_param=items, arguments=group, when=when, continue_on=keep_going)


def _plan_round(step_image: str, retry_when_lost: m.RetryStrategy) -> Container:
    """The step that plans the next isolation round, or finds that none is left (`done`)."""
    round_input = f"{{{{inputs.parameters.{contract.PARAM_ROUND}}}}}"
    return _step(
        contract.TEMPLATE_PLAN_ROUND,
        step_image,
        ["plan-round"],
        retry_strategy=retry_when_lost,
        inputs=[Parameter(name=contract.PARAM_ROUND)],
        env=_step_env(m.EnvVar(name=contract.ENV_ROUND, value=round_input)),
        outputs=[
            Parameter(name=contract.OUTPUT_GROUPS, value_from=m.ValueFrom(path=contract.GROUPS_FILE)),
            Parameter(name=contract.OUTPUT_DONE, value_from=m.ValueFrom(path=contract.DONE_FILE)),
            Parameter(name=contract.OUTPUT_NEXT_ROUND, value_from=m.ValueFrom(path=contract.NEXT_ROUND_FILE)),
            Parameter(name=contract.OUTPUT_PROGRESS, value_from=m.ValueFrom(path=contract.PROGRESS_FILE, default="")),
        ],
    )


def _rounds(templates: GroupTemplates, *, shared: bool) -> str:
    """The isolation round loop: `plan-round` -> its groups -> `rounds` again, until plan-round says done.

    Argo recursion, so every round is a nested node in the UI (the groups are named `r<round>-g<i>`); the
    depth is bounded by the planner's round limit, after which plan-round always says done. `shared`: the
    loop of the shared-runner entrypoint (`rounds-shared`, recursing into itself). Returns its name."""
    round_input = f"{{{{inputs.parameters.{contract.PARAM_ROUND}}}}}"
    rounds = _entrypoint(contract.TEMPLATE_ROUNDS, shared=shared)
    decided = f"steps.{contract.TEMPLATE_PLAN_ROUND}.outputs.parameters"
    go_on = f"{{{{{decided}.{contract.OUTPUT_DONE}}}}} == false"
    with Steps(name=rounds, inputs=[Parameter(name=contract.PARAM_ROUND)]):
        Step(
            name=contract.TEMPLATE_PLAN_ROUND,
            template=contract.TEMPLATE_PLAN_ROUND,
            arguments=[Parameter(name=contract.PARAM_ROUND, value=round_input)],
        )
        _fan_out(templates, f"{{{{{decided}.{contract.OUTPUT_GROUPS}}}}}", shared=shared, when=go_on)
        Step(
            name="next-round",
            template=rounds,
            arguments=[Parameter(name=contract.PARAM_ROUND, value=f"{{{{{decided}.{contract.OUTPUT_NEXT_ROUND}}}}}")],
            when=go_on,
        )
    return rounds


def _confirm(rounds: str, *, shared: bool) -> None:
    """The confirmation rounds after a category's groups (`steps.confirming`): the round loop, whose first
    `plan-round` says done when no failure needs confirming. Skipped (no pod) when the plan has no group of two
    or more nodes, and, with the shared runner, which fails when any of its groups failed, when every group
    passed; with a step pod per group Argo has no such summary of the fan-out, and the first `plan-round` of a
    plan with such groups always runs."""
    planned = f"steps.{contract.TEMPLATE_PLAN}.outputs.parameters.{contract.OUTPUT_CONFIRMABLE}"
    when = f"{{{{{planned}}}}} == true"
    if shared:
        when += f" && {{{{steps.{contract.TEMPLATE_RUN_GROUPS}.status}}}} != Succeeded"
    Step(
        name=contract.TEMPLATE_CONFIRM,
        template=rounds,
        arguments=[Parameter(name=contract.PARAM_ROUND, value="1")],
        when=when,
        continue_on=m.ContinueOn(failed=True, error=True),
    )


def _entrypoint(name: str, *, shared: bool) -> str:
    return contract.shared_runner_entrypoint(name) if shared else name


def _group_outputs(value_from: dict[str, m.ValueFrom]) -> list[Parameter]:
    """What each group shows in its side panel of the Argo UI: what it measured, how many nodes it failed."""
    return [Parameter(name=name, value_from=source) for name, source in value_from.items()]


def _run_groups(step_image: str, retry_when_lost: m.RetryStrategy) -> Container:
    """The shared runner (`steps.shared_runner`): one pod for every group of a fan-out, however many, at
    most `maxConcurrent` at once. It is retried like a group's own step: it follows the TrainJobs its runs
    created. It requests more than a step, as it runs each group in a thread."""
    return _step(
        contract.TEMPLATE_RUN_GROUPS,
        step_image,
        ["run-groups"],
        retry_strategy=retry_when_lost,
        inputs=[Parameter(name=contract.PARAM_GROUPS)],
        env=_step_env(m.EnvVar(name=contract.ENV_GROUPS, value=f"{{{{inputs.parameters.{contract.PARAM_GROUPS}}}}}")),
        resources_override=SHARED_RUNNER_RESOURCES,
    )


def _group_node() -> Suspend:
    """One group of a shared runner: a suspend node (no pod). The runner runs the group when a slot is free
    (`maxConcurrent`, which it holds: no semaphore here) and completes the node with its phase, message and
    outputs."""
    supplied = m.ValueFrom(supplied=m.SuppliedValueFrom())
    return Suspend(
        name=contract.TEMPLATE_GROUP,
        inputs=[Parameter(name=contract.PARAM_GROUP)],
        outputs=_group_outputs({contract.OUTPUT_MEASUREMENTS: supplied, contract.OUTPUT_FAILED_NODE_COUNT: supplied}),
    )


def build_category_template(
    *, domain: str, variant: str, description: str, step_image: str, diagnose: bool = False
) -> dict[str, Any]:
    """The WorkflowTemplate for one catalog entry. `diagnose`: the entry supports `testScale: diagnose`, so
    the template also has the round loop (a category Workflow compiled with it starts at the `diagnose`
    entrypoint).

    The `category` parameter has no default: it holds the target, and a template submitted alone from the
    UI with a default would certify every GPU node of the cluster, in the middle of whatever runs there.
    Without a value Argo refuses the submission (`spec.arguments.category.value is required`) and its UI
    form asks for one."""
    name = contract.category_template_name(domain, variant)
    retry_when_lost = step_retry(2)
    with WorkflowTemplate(
        name=name,
        labels={
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_DOMAIN: domain,
            LABEL_VARIANT: variant,
            LABEL_VERSION: __version__,
        },
        annotations={
            "workflows.argoproj.io/title": f"{domain}/{variant}",
            "workflows.argoproj.io/description": description,
        },
        entrypoint=contract.TEMPLATE_CATEGORY,
        on_exit=contract.TEMPLATE_ON_EXIT,
        service_account_name=contract.WORKFLOW_SERVICE_ACCOUNT,
        security_context=pod_security_context(),
        workflow_metadata=m.WorkflowMetadata(
            labels={LABEL_ROLE: ROLE_CATEGORY, LABEL_DOMAIN: domain, LABEL_VARIANT: variant}
        ),
        volumes=[m.Volume(name="scratch", empty_dir=m.EmptyDirVolumeSource())],
        pod_gc=pod_gc(),
        arguments=[
            Parameter(
                name=contract.PARAM_CATEGORY,
                description=CATEGORY_PARAMETER_HELP,
            ),
            Parameter(
                name=contract.PARAM_CERTIFICATION,
                value=name,
                description="Certification name recorded on TrainJobs and ConfigMaps.",
            ),
        ],
    ) as template:
        plan = _step(
            contract.TEMPLATE_PLAN,
            step_image,
            ["plan"],
            env=_step_env(),
            retry_strategy=retry_when_lost,
            outputs=[
                Parameter(name=contract.OUTPUT_GROUPS, value_from=m.ValueFrom(path=contract.GROUPS_FILE)),
                Parameter(name=contract.OUTPUT_CONFIRMABLE, value_from=m.ValueFrom(path=contract.CONFIRMABLE_FILE)),
            ],
        )
        # The run step is idempotent (its TrainJob's name is deterministic), so an evicted or crashed step pod
        # is retried and follows the TrainJob it created; only a group that failed its test is final.
        run_group = _step(
            contract.TEMPLATE_RUN_GROUP,
            step_image,
            ["run"],
            retry_strategy=retry_when_lost,
            synchronization=group_semaphore(),
            inputs=[Parameter(name="group")],
            env=_step_env(m.EnvVar(name=contract.ENV_GROUP, value="{{inputs.parameters.group}}")),
            # Shown per group in the Argo UI. Defaults: a step that failed before writing them is not an Error.
            outputs=_group_outputs(
                {
                    contract.OUTPUT_MEASUREMENTS: m.ValueFrom(path=contract.MEASUREMENTS_FILE, default=""),
                    contract.OUTPUT_FAILED_NODE_COUNT: m.ValueFrom(path=contract.FAILED_NODE_COUNT_FILE, default=""),
                }
            ),
        )
        record = _step(
            contract.TEMPLATE_RECORD,
            step_image,
            ["record"],
            env=_step_env(),
            retry_strategy=retry_when_lost,
            outputs=[
                Parameter(
                    name=contract.OUTPUT_FAILED_NODES_REF, value_from=m.ValueFrom(path=contract.FAILED_NODES_REF_FILE)
                ),
                Parameter(
                    name=contract.OUTPUT_SUCCEEDED_NODES_REF,
                    value_from=m.ValueFrom(path=contract.SUCCEEDED_NODES_REF_FILE),
                ),
            ],
        )
        exit_handler(
            _step(contract.TEMPLATE_CLEANUP, step_image, ["cleanup"], env=_step_env(), retry_strategy=retry_when_lost)
        )
        templates = GroupTemplates(
            run_group=run_group, run_groups=_run_groups(step_image, retry_when_lost), group=_group_node()
        )
        _plan_round(step_image, retry_when_lost)
        plan_groups = f"{{{{steps.{contract.TEMPLATE_PLAN}.outputs.parameters.{contract.OUTPUT_GROUPS}}}}}"
        for shared in (False, True):
            rounds = _rounds(templates, shared=shared)
            # The items are group names only (Argo shows `group(0:g0)`); the run step reads the group's nodes
            # from the plan ConfigMap, so the Workflow's size does not grow with a group's nodes. An overflow
            # group has no item: it borrows one group's nodes and runs in that group's step, after it. An
            # errored group (its pod lost for good) must not skip `record`: record blames its nodes.
            with Steps(name=_entrypoint(contract.TEMPLATE_CATEGORY, shared=shared)):
                plan(name=contract.TEMPLATE_PLAN)
                _fan_out(templates, plan_groups, shared=shared)
                _confirm(rounds, shared=shared)
                record(name=contract.TEMPLATE_RECORD)
            if diagnose:
                with Steps(name=_entrypoint(contract.TEMPLATE_DIAGNOSE, shared=shared)):
                    plan(name=contract.TEMPLATE_PLAN)
                    Step(name="round", template=rounds, arguments=[Parameter(name=contract.PARAM_ROUND, value="1")])
                    record(name=contract.TEMPLATE_RECORD)
    result: dict[str, Any] = template.to_dict()
    return result
