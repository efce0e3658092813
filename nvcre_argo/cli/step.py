"""`nvcre-argo step ...`: the entrypoints the compiled Workflows run in the package's own image.

This module is the only place the steps' environment is read (names in `contract`); the step functions get
everything as arguments. Exit codes carry the verdict to Argo: 0 passed, 1 failed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import click

from nvcre_argo import contract
from nvcre_argo.kube.change import wait_for_change
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.connect import connect
from nvcre_argo.plan.model import PlanError
from nvcre_argo.steps.category_manifest import CategoryManifestError, select_category_workflow
from nvcre_argo.steps.category_mirror import open_category_mirror
from nvcre_argo.steps.children import Parent, follow_child, stop_children, stop_if_parent_stopping
from nvcre_argo.steps.cleanup import cleanup_step
from nvcre_argo.steps.concurrency import publish_concurrency
from nvcre_argo.steps.confirming import may_need_confirmation
from nvcre_argo.steps.context import StepContext, parse_category
from nvcre_argo.steps.deadline import set_category_deadline
from nvcre_argo.steps.diagnosing import plan_round_step
from nvcre_argo.steps.following import RunSettings
from nvcre_argo.steps.group_step import GroupStepOutcome, fan_out_nodes, run_group_step
from nvcre_argo.steps.health import health_expression
from nvcre_argo.steps.measurements import measure_log
from nvcre_argo.steps.planning import load_plan, plan_step
from nvcre_argo.steps.recording import read_group_results, record_step
from nvcre_argo.steps.shared_runner import run_shared
from nvcre_argo.steps.verdict import parse_statuses, verdict_from_outputs
from nvcre_argo.yamlio import load_yaml_mapping

# Each running group's thread holds a connection while it follows its TrainJob, and another for its health
# watch: enough for the largest fan-out to keep them open instead of reconnecting on every request.
SHARED_RUNNER_CONNECTIONS = 256


def _require(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise click.UsageError(f"environment variable {name} is not set (this command runs inside a Workflow)")
    return value


def _context() -> StepContext:
    return StepContext(
        category=parse_category(_require(contract.ENV_CATEGORY)),
        certification=_require(contract.ENV_CERTIFICATION),
        workflow_name=_require(contract.ENV_WORKFLOW_NAME),
        workflow_uid=_require(contract.ENV_WORKFLOW_UID),
        namespace=_require(contract.ENV_NAMESPACE),
    )


def _write_output(path: str, text: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")


def _fail_with(summary: str) -> NoReturn:
    """Exit 1, leaving ``summary`` as the container's termination message: Argo shows it as the step's
    message ("main: Error (exit code 1): <summary>") in the UI and in ``argo get``, so why a step failed is
    readable without its log. Only where the kubelet provided the file: outside a pod nothing is created."""
    termination_log = Path(contract.TERMINATION_LOG)
    if termination_log.is_file():
        with contextlib.suppress(OSError):
            termination_log.write_text(summary[: contract.TERMINATION_MESSAGE_LIMIT], encoding="utf-8")
    raise SystemExit(1)


@click.group("step")
@click.option("--kubeconfig", envvar="KUBECONFIG", default=None, help="Outside a cluster: the kubeconfig to use.")
@click.pass_context
def step_group(ctx: click.Context, kubeconfig: str | None) -> None:
    """Steps run inside Argo Workflows (not meant to be run by hand)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _exit_terminated)
    ctx.obj = kubeconfig


def _exit_terminated(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (the pod is evicted or deleted): end at once with exit code 143, as the signal would, but said.

    Ended by the signal itself, the step would reach Argo as exit code 137 (its executor reports a child killed
    by a signal so), which is also an OOM kill's: 143 tells a stopped step from one that ran out of memory.
    Nothing is cleaned up on the way out, as with the signal: what a step started (TrainJobs, ConfigMaps) is
    what its retry (`render.category_template.step_retry`) resumes from. The category step handles SIGTERM
    itself (`category_command`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(contract.EXIT_TERMINATED)


def _kube(ctx: click.Context) -> KubeClient:
    return connect(ctx.obj)


@step_group.command("plan")
@click.pass_context
def plan_command(ctx: click.Context) -> None:
    """Plan node groups for the category and create its TrainingRuntime."""
    context = _context()
    try:
        kube = _kube(ctx)
        plan = plan_step(kube, context, report=click.echo)
    except PlanError as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from None
    limit = publish_concurrency(kube, context, plan)
    if context.category.options.max_concurrent:
        click.echo(f"at most {limit} group(s) at once (maxConcurrent)")
    set_category_deadline(kube, context, plan, report=click.echo)
    _write_output(contract.GROUPS_FILE, json.dumps(plan.withparam_items()))
    _write_output(contract.CONFIRMABLE_FILE, "true" if may_need_confirmation(plan) else "false")


@step_group.command("plan-round")
@click.pass_context
def plan_round_command(ctx: click.Context) -> None:
    """Plan the next round of a diagnose category, or of confirmation for any other (or find that none is left)."""
    context = _context()
    kube = _kube(ctx)
    number_text = _require(contract.ENV_ROUND)
    if not number_text.isdigit() or int(number_text) < 1:
        _fail_with(f"{contract.ENV_ROUND} must be a round number (1, 2, ...), got {number_text!r}")
    try:
        decision = plan_round_step(
            kube, context, int(number_text), read_group_results(kube, context), report=click.echo
        )
    except (LookupError, PlanError) as error:
        click.echo(f"error: {error}", err=True)
        _fail_with(str(error))
    _write_output(contract.GROUPS_FILE, json.dumps(list(decision.groups)))
    _write_output(contract.DONE_FILE, "true" if decision.done else "false")
    _write_output(contract.NEXT_ROUND_FILE, str(decision.number + 1))
    _write_output(contract.PROGRESS_FILE, decision.progress)


@step_group.command("run")
@click.pass_context
def run_command(ctx: click.Context) -> None:
    """Run one node group's TrainJob(s) to the end and record the result, then those of the overflow group it
    hosts, if any (it borrows this group's nodes, so it runs after it, in this step).

    Argo passes only the group's name; its nodes come from the plan the plan step published."""
    context = _context()
    kube = _kube(ctx)
    try:
        plan = load_plan(kube, context)
        item = plan.group(_require(contract.ENV_GROUP)).name
    except (LookupError, PlanError) as error:
        click.echo(f"error: {error}", err=True)
        _fail_with(str(error))
    outcome = run_group_step(
        kube, context, plan, item, settings=_run_settings(context), measure=measure_log, report=click.echo
    )
    _write_output(contract.MEASUREMENTS_FILE, outcome.measurements)
    _write_output(contract.FAILED_NODE_COUNT_FILE, outcome.failed_node_count)
    if not outcome.passed:
        _fail_with(outcome.summary)


@step_group.command("run-groups")
@click.pass_context
def run_groups_command(ctx: click.Context) -> None:
    """Run every group of a fan-out in this one step, each shown by its own `group` node (see
    `steps.shared_runner`); exit 1 when any of them failed."""
    context = _context()
    kube = connect(ctx.obj, connections=SHARED_RUNNER_CONNECTIONS)
    try:
        plan = load_plan(kube, context)
        items = [plan.group(item).name for item in _group_items(_require(contract.ENV_GROUPS))]
    except (LookupError, PlanError, ValueError) as error:
        click.echo(f"error: {error}", err=True)
        _fail_with(str(error))
    limit = context.category.options.max_concurrent
    at_once = f"at most {limit} at once (maxConcurrent)" if limit else "all at once"
    click.echo(f"running {len(items)} group(s), {at_once}, each once Argo has run its node")
    with open_category_mirror(kube, context, fan_out_nodes(plan, items)) as mirror:
        settings = replace(_run_settings(context), mirror=mirror, until_changed=mirror.until_changed)

        def run_item(item: str, report: Callable[[str], None]) -> GroupStepOutcome:
            return run_group_step(kube, context, plan, item, settings=settings, measure=measure_log, report=report)

        shared = run_shared(kube, context, items, run_item, limit=limit, report=click.echo)
    click.echo(shared.summary())
    if shared.failed:
        _fail_with(shared.summary())


def _group_items(text: str) -> list[str]:
    """The fan-out's items (the JSON list the plan or plan-round step published)."""
    items = json.loads(text)
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(f"{contract.ENV_GROUPS} must be a JSON list of group names, got {text[:200]!r}")
    return items


def _run_settings(context: StepContext) -> RunSettings:
    return RunSettings(health_expression=health_expression(context.category.entry), until_changed=wait_for_change)


@step_group.command("record")
@click.pass_context
def record_command(ctx: click.Context) -> None:
    """Write the failed/succeeded-node ConfigMaps and publish their names."""
    outcome = record_step(_kube(ctx), _context(), report=click.echo)
    _write_output(contract.FAILED_NODES_REF_FILE, outcome.failed_nodes_ref)
    _write_output(contract.SUCCEEDED_NODES_REF_FILE, outcome.succeeded_nodes_ref)
    if not outcome.passed:
        _fail_with(outcome.summary())


@step_group.command("cleanup")
@click.pass_context
def cleanup_command(ctx: click.Context) -> None:
    """Delete this Workflow's unfinished TrainJobs (onExit)."""
    cleanup_step(_kube(ctx), _context(), report=click.echo)


def _parent() -> Parent:
    return Parent(
        name=_require(contract.ENV_WORKFLOW_NAME),
        uid=_require(contract.ENV_WORKFLOW_UID),
        namespace=_require(contract.ENV_NAMESPACE),
    )


class _TerminatedError(Exception):
    """SIGTERM reached the step: Argo is stopping it, or its pod is being evicted."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # Once: Argo's executor repeats the signal, and the first one already decides what happens next.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _TerminatedError


def _category_to_start(parent: Parent) -> tuple[dict[str, Any], str]:
    """The compiled manifest this step embeds, or (certification WorkflowTemplate) its step's share of the
    `categories` parameter; the step name is written at once, for the template's verdict."""
    if contract.ENV_CATEGORY_WORKFLOW in os.environ:
        key = _require(contract.ENV_CATEGORY_KEY)
        return load_yaml_mapping(_require(contract.ENV_CATEGORY_WORKFLOW), contract.ENV_CATEGORY_WORKFLOW), key
    step = _require(contract.ENV_CATEGORY_STEP)
    _write_output(contract.CATEGORY_STEP_FILE, step)
    try:
        chosen = select_category_workflow(_require(contract.ENV_CATEGORY_WORKFLOWS), step, parent_name=parent.name)
    except CategoryManifestError as error:
        _fail_with(str(error))
    return chosen.manifest, chosen.key


@step_group.command("category")
@click.pass_context
def category_command(ctx: click.Context) -> None:
    """Start one category's Workflow (once), follow it to its end, and stop it when this Workflow stops."""
    parent = _parent()
    manifest, key = _category_to_start(parent)
    kube = _kube(ctx)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        outcome = follow_child(kube, manifest, parent, key=key, report=click.echo)
    except _TerminatedError:
        reason = stop_if_parent_stopping(kube, parent, manifest["metadata"]["name"])
        if reason:
            click.echo(f"stopped category Workflow {manifest['metadata']['name']}: {reason}")
        else:
            click.echo("terminated while the certification runs on: a retried step follows the same Workflow")
        raise SystemExit(contract.EXIT_TERMINATED) from None
    _write_output(contract.CATEGORY_WORKFLOW_FILE, outcome.workflow)
    _write_output(contract.VERDICT_FILE, outcome.verdict)
    _write_output(contract.FAILED_NODE_COUNT_FILE, str(len(outcome.failed_nodes)))
    click.echo(outcome.summary())
    if not outcome.passed:
        _fail_with(outcome.summary())


@step_group.command("stop-categories")
@click.pass_context
def stop_categories_command(ctx: click.Context) -> None:
    """Stop every unfinished category Workflow of this certification Workflow (its exit handler)."""
    stop_children(_kube(ctx), _parent(), _require(contract.ENV_CERTIFICATION), report=click.echo)


@step_group.command("verdict")
def verdict_command() -> None:
    """Exit 1 when any category step of the certification Workflow did not succeed."""
    if contract.ENV_CATEGORY_STEPS in os.environ:
        verdict = verdict_from_outputs(
            os.environ[contract.ENV_CATEGORY_STEPS], os.environ.get(contract.ENV_CATEGORY_OUTPUTS, "")
        )
    else:
        verdict = parse_statuses(os.environ.get(contract.ENV_STATUSES, ""))
    click.echo(verdict.summary())
    if not verdict.passed:
        _fail_with(verdict.summary().splitlines()[-1])
