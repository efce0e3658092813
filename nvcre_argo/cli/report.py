"""`nvcre-argo report NAME`: what a Certification found, from its status and its result ConfigMaps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nvcre_argo.api.status import CertificationStatus, DiagnoseSummary
from nvcre_argo.cli.cluster import kubeconfig_option, open_cluster
from nvcre_argo.cli.inputs import check_namespace
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CERTIFICATIONS, CONFIGMAPS
from nvcre_argo.names import LABEL_RECORD, LABEL_WORKFLOW
from nvcre_argo.report.model import CategoryResults, build_report, exit_code
from nvcre_argo.report.render import render_json, render_junit, render_text
from nvcre_argo.results import (
    RECORD_GROUP_RESULT,
    PlatformRecord,
    RestartRecord,
    ResultsError,
    read_diagnose,
    read_failed_nodes,
    read_group_result,
    read_platform,
    read_succeeded_nodes,
)
from nvcre_argo.watch.diagnose import diagnose_summary

RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit}


def _configmap(kube: KubeClient, namespace: str, name: str, missing: list[str]) -> dict[str, Any] | None:
    """The ConfigMap; one that is gone is added to `missing` so the report can say so."""
    configmap = kube.get(CONFIGMAPS, name, namespace)
    if configmap is None:
        missing.append(name)
    return configmap


def _figures(kube: KubeClient, namespace: str, workflow: str) -> dict[str, float]:
    """The weakest group's figure for each measurement (a pool is as good as its worst group), and, when a
    checkpointing workload was restarted, the restarts and what they cost, summed over the groups."""
    selector = f"{LABEL_WORKFLOW}={workflow},{LABEL_RECORD}={RECORD_GROUP_RESULT}"
    configmaps, _ = kube.list(CONFIGMAPS, namespace, label_selector=selector)
    figures: dict[str, float] = {}
    for configmap in configmaps:
        try:
            iterations = read_group_result(configmap)["iterations"]
        except ResultsError as error:
            click.echo(f"warning: ConfigMap {namespace}/{configmap['metadata']['name']}: {error}", err=True)
            continue
        for iteration in iterations:
            for key, value in iteration["measurements"].items():
                worse = min if key != "avgStepTimeSec" else max
                figures[key] = worse(figures.get(key, value), value)
            for restart in iteration["restarts"]:
                for key, value in restart_figures(restart).items():
                    figures[key] = figures.get(key, 0.0) + value
    return figures


def restart_figures(restart: RestartRecord) -> dict[str, float]:
    """One checkpoint restart as report figures: it counts once, with its lost, reschedule and resume time."""
    return {
        "checkpointRestarts": 1.0,
        "restartLostWorkSec": restart["lost_work_seconds"],
        "restartRescheduleSec": restart["reschedule_seconds"] or 0.0,
        "restartResumeSec": restart["resume_seconds"] or 0.0,
    }


def _diagnose(configmap: dict[str, Any], index: int) -> DiagnoseSummary | None:
    """A diagnose category's whole isolation summary; a malformed one is a warning (the status's summary is
    shown) and never hides the failed nodes beside it."""
    try:
        record = read_diagnose(configmap)
        return diagnose_summary(record, capped=False) if record is not None else None
    except ResultsError as error:
        click.echo(f"warning: category {index}: {error}", err=True)
        return None


def collect_results(kube: KubeClient, namespace: str, status: CertificationStatus | None) -> dict[int, CategoryResults]:
    results: dict[int, CategoryResults] = {}
    for index, category in enumerate(status.category_statuses or [] if status else []):
        failed: list[dict[str, Any]] = []
        succeeded: list[str] = []
        missing: list[str] = []
        diagnose: DiagnoseSummary | None = None
        platform: PlatformRecord | None = None
        try:
            if category.failed_nodes_ref and (
                configmap := _configmap(kube, namespace, category.failed_nodes_ref.name, missing)
            ):
                diagnose = _diagnose(configmap, index)
                platform = read_platform(configmap)
                failed = [
                    {"name": node.name, "reason": node.reason, "message": node.message}
                    for node in read_failed_nodes(configmap)
                ]
            if category.succeeded_nodes_ref and (
                configmap := _configmap(kube, namespace, category.succeeded_nodes_ref.name, missing)
            ):
                succeeded = read_succeeded_nodes(configmap)
        except ResultsError as error:
            click.echo(f"warning: category {index}: {error}", err=True)
        figures = _figures(kube, namespace, category.workflow_ref.name) if category.workflow_ref else {}
        for name in missing:
            click.echo(f"warning: category {index}: result ConfigMap {namespace}/{name} no longer exists", err=True)
        results[index] = CategoryResults(
            failed_nodes=failed,
            succeeded_nodes=succeeded,
            figures=figures,
            missing=missing,
            diagnose=diagnose,
            platform=platform,
        )
    return results


@click.command("report")
@click.argument("name")
@click.option(
    "-n",
    "--namespace",
    default=None,
    callback=check_namespace,
    help="Namespace (default: the kubeconfig context's, as kubectl).",
)
@click.option("-o", "--output", type=click.Choice(sorted(RENDERERS)), default="text", show_default=True)
@click.option(
    "--results-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the report to this file.",
)
@kubeconfig_option
def report_command(
    name: str, namespace: str | None, output: str, results_file: Path | None, kubeconfig: str | None
) -> None:
    """Print a Certification's report; exit 0 only when it PASSED (1 otherwise, 2 on a usage error)."""
    kube = open_cluster(kubeconfig)
    namespace = namespace or kube.namespace
    try:
        certification = kube.get(CERTIFICATIONS, name, namespace)
    except ApiError as error:
        click.echo(f"error: cannot read Certification {namespace}/{name}: {error}", err=True)
        raise SystemExit(1) from None
    if certification is None:
        click.echo(f"error: Certification {namespace}/{name} not found", err=True)
        raise SystemExit(1)
    raw_status = certification.get("status")
    status = CertificationStatus.model_validate(raw_status, by_alias=True) if raw_status else None
    report = build_report(certification, status, collect_results(kube, namespace, status))
    text = RENDERERS[output](report)
    click.echo(text, nl=not text.endswith("\n"))
    if results_file is not None:
        results_file.write_text(text, encoding="utf-8")
    raise SystemExit(exit_code(report))
