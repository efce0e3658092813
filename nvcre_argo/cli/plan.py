"""`nvcre-argo plan CERT.yaml (--kubeconfig K | --nodes NODES.yaml)`: see what a certification would run, on
which nodes, at what GPU cost, before running it.

The nodes come from a cluster (listed as the plan step lists them: the target's label selector, page by page)
or from a saved node list, so the plan can be reviewed offline, in a change request or without access to the
cluster. Either way the categories are resolved as `nvcre-compile` resolves them and planned by the plan step's
own planner (see `plan.preview`). The source of the nodes is never guessed: a preview of the wrong cluster is
worse than none, so one of the two options is required ($KUBECONFIG counts as `--kubeconfig`).

Exit codes: 0 every category can be planned, 1 an invalid input or unreachable cluster, or a category the
nodes cannot run (it is still shown, with the plan step's reason), 2 a usage error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.catalog.loader import Catalog
from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.cluster import kubeconfig_option, open_cluster
from nvcre_argo.cli.inputs import describe, load_all, read_source, report_invalid, report_warnings
from nvcre_argo.cli.resolve import gpu_arch_option, open_arms
from nvcre_argo.compiler import CompileOptions, certification_warnings, resolve_for_run
from nvcre_argo.errors import CompileError, InvalidDocumentError
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.loading import LoadedCertification
from nvcre_argo.plan.nodelist import parse_node_list
from nvcre_argo.plan.preview import preview_certification, preview_document
from nvcre_argo.plan.preview_text import render_preview_text
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.steps.planning import list_nodes_for_target


@click.command("plan")
@click.argument("file")
@click.option(
    "--nodes",
    "nodes_file",
    default=None,
    metavar="NODES.yaml",
    help="Plan on a saved node list (`kubectl get nodes -o yaml`; `-` for stdin) instead of a cluster.",
)
@kubeconfig_option
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@gpu_arch_option
@catalog_dir_option
@click.pass_context
def plan_command(
    ctx: click.Context,
    file: str,
    nodes_file: str | None,
    kubeconfig: str | None,
    output: str,
    gpu_arch: str | None,
    catalog_dirs: tuple[Path, ...],
) -> None:
    """Preview each category's plan: nodes selected and excluded (with reasons), groups, TrainJobs, GPU-hours.

    Exit 0 when every category can be planned, 1 when one cannot (it is shown with the reason the run would
    fail it) or an input is invalid, 2 on a usage error.
    """
    _check_node_source(ctx, nodes_file, kubeconfig, file)
    loaded = _load_one(file)
    catalog = open_catalog(catalog_dirs)
    categories = _resolve(
        loaded, catalog, CompileOptions(gpu_architecture=gpu_arch, platform_arms=open_arms(catalog_dirs))
    )
    # Every category shares the Certification's target: the cluster is listed once.
    nodes = _read_nodes(nodes_file) if nodes_file is not None else _list_nodes(kubeconfig, categories[0].target)
    preview = preview_certification(describe(loaded), categories, nodes)
    if output == "json":
        click.echo(json.dumps(preview_document(preview), indent=2, ensure_ascii=False))
    else:
        click.echo(render_preview_text(preview), nl=False)
    if preview.failed:
        count = len(preview.failed)
        click.echo(f"error: {count} of {len(preview.categories)} categories cannot be planned on these nodes", err=True)
        raise SystemExit(1)


def _check_node_source(ctx: click.Context, nodes_file: str | None, kubeconfig: str | None, file: str) -> None:
    """Exactly one source of nodes; an explicit --kubeconfig with --nodes is a contradiction, $KUBECONFIG is not."""
    explicit = ctx.get_parameter_source("kubeconfig") == ParameterSource.COMMANDLINE
    if nodes_file is not None and explicit:
        raise click.UsageError("give --kubeconfig or --nodes, not both")
    if nodes_file is None and not kubeconfig:
        raise click.UsageError(
            "say where the nodes are: --kubeconfig K (or $KUBECONFIG) plans on a cluster, "
            "--nodes NODES.yaml on a saved node list"
        )
    if nodes_file == "-" and file == "-":
        raise click.UsageError("only one of FILE and --nodes can be standard input")


def _load_one(file: str) -> LoadedCertification:
    try:
        loaded = load_all((file,))
    except InvalidDocumentError as error:
        report_invalid(error)
        raise SystemExit(1) from None
    if len(loaded) != 1:
        click.echo(f"{loaded[0].source}: holds {len(loaded)} Certifications; plan previews one at a time", err=True)
        raise SystemExit(1)
    return loaded[0]


def _resolve(loaded: LoadedCertification, catalog: Catalog, options: CompileOptions) -> list[ResolvedCategory]:
    """The categories as compiled (a document compile refuses is refused here, with the same messages)."""
    try:
        categories = resolve_for_run(loaded, catalog=catalog, options=options)
    except CompileError as error:
        report_invalid(error)
        raise SystemExit(1) from None
    report_warnings(certification_warnings([loaded], catalog=catalog))
    return categories


def _read_nodes(name: str) -> list[dict[str, Any]]:
    source = "<stdin>" if name == "-" else name
    try:
        return parse_node_list(read_source(name), source)
    except InvalidDocumentError as error:
        report_invalid(error)
        raise SystemExit(1) from None


def _list_nodes(kubeconfig: str | None, target: TargetSpec) -> list[dict[str, Any]]:
    kube = open_cluster(kubeconfig)
    try:
        return list(list_nodes_for_target(kube, target))
    except ApiError as error:
        click.echo(f"error: cannot list Nodes on {kube.server}: {error}", err=True)
        raise SystemExit(1) from None
