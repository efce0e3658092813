"""`nvcre-argo install`: the CRD, namespaces, RBAC, watcher Deployments and WorkflowTemplates.

Namespaces are created when missing and otherwise left alone: a team's existing namespace keeps its own
labels and owners (server-side apply would take over the fields we set). Everything else is server-side
applied, so running `install` again converges.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from nvcre_argo import contract
from nvcre_argo.api.spec import TargetSpec
from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.cluster import kubeconfig_option, open_cluster
from nvcre_argo.cli.inputs import check_namespace, require_non_empty
from nvcre_argo.cli.watch import check_bind_address
from nvcre_argo.cli.workflow_options import installed_placement_options, step_placement
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import BY_KIND, Resource
from nvcre_argo.render.catalog_templates import build_catalog_templates
from nvcre_argo.render.install import InstallSettings, build_install_manifests
from nvcre_argo.render.install_objects import DEFAULT_BIND_ADDRESS
from nvcre_argo.render.step_placement import StepPlacement, placement_spec
from nvcre_argo.yamlio import dump_yaml_documents

FIELD_MANAGER = "nvcre-argo-install"
APPLY_PATCH = "application/apply-patch+yaml"
# Kinds only `install` writes, which the kube module's table (the product's run-time resources) leaves out.
INSTALL_ONLY = {"PodDisruptionBudget": Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")}
NO_WATCH_NAMESPACE = (
    "give at least one --watch-namespace NS (repeatable): each namespace Certifications run in gets its own "
    "service accounts, Roles and WorkflowTemplates; there is no cluster-wide mode"
)


def install_manifests(
    settings: InstallSettings, *, catalog_dirs: tuple[Path, ...], placement: StepPlacement | None = None
) -> list[dict[str, Any]]:
    """The install objects, then the catalog's WorkflowTemplates in every watched namespace.

    `placement` places the step pods of every template (a system pool's selector and tolerations, a priority
    class, pull secrets): what a certification compiled with `--template-ref` cannot carry itself. The
    templates know no target, so nothing keeps their step pods off the nodes under test but this placement."""
    manifests = build_install_manifests(settings)
    templates = build_catalog_templates(open_catalog(catalog_dirs), step_image=settings.image).values()
    installed = placement_spec(replace(placement, avoid_target=False), TargetSpec()) if placement else {}
    for namespace in settings.watch_namespaces:
        for template in templates:
            placed = copy.deepcopy(template)
            placed["metadata"]["namespace"] = namespace
            placed["spec"] |= copy.deepcopy(installed)
            manifests.append(placed)
    return manifests


def _check_namespaces(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        check_namespace(ctx, param, value)
    return values


def _apply(kube: KubeClient, manifest: dict[str, Any]) -> str:
    """Create a missing Namespace (never relabel an existing one) or server-side apply anything else."""
    if manifest["kind"] == "Namespace":
        return "created" if kube.create_if_absent(manifest) else "exists"
    if manifest["kind"] in BY_KIND:
        kube.apply(manifest, field_manager=FIELD_MANAGER)
        return "applied"
    metadata = manifest["metadata"]
    kube.request(
        "PATCH",
        INSTALL_ONLY[manifest["kind"]].path(metadata.get("namespace"), metadata["name"]),
        body=manifest,
        query={"fieldManager": FIELD_MANAGER, "force": "true"},
        content_type=APPLY_PATCH,
    )
    return "applied"


@click.command("install")
@click.option(
    "--namespace", default="nvcre-argo", show_default=True, callback=check_namespace, help="Namespace of the watcher."
)
@click.option(
    "--watch-namespace",
    "watch_namespaces",
    multiple=True,
    callback=_check_namespaces,
    help="A namespace Certifications run in (repeatable, at least one; created when missing).",
)
@click.option(
    "--image",
    default=contract.DEFAULT_STEP_IMAGE,
    show_default=True,
    callback=require_non_empty,
    help="Watcher and step image.",
)
@click.option("--no-submit", is_flag=True, help="Do not let the watcher create Workflows (GitOps/argo submit only).")
@click.option(
    "--template-ref",
    is_flag=True,
    help="For Argo's templateReferencing: Strict: the watcher submits Workflows that reference nvcre-certification.",
)
@click.option(
    "--shared-runner/--pod-per-group",
    default=True,
    show_default=True,
    help="The watcher submits Workflows whose categories run their groups in one pod, or a pod per group "
    "(as nvcre-compile does).",
)
@click.option("--pdb", is_flag=True, help="Two watcher replicas per namespace behind a PodDisruptionBudget.")
@click.option(
    "--watcher-bind-address",
    default=DEFAULT_BIND_ADDRESS,
    show_default=True,
    callback=check_bind_address,
    help="IP the watcher's metrics and health servers listen on (`::` on IPv6 clusters).",
)
@click.option("--print", "print_only", is_flag=True, help="Print the manifests instead of applying them.")
@installed_placement_options
@catalog_dir_option
@kubeconfig_option
def install_command(
    namespace: str,
    watch_namespaces: tuple[str, ...],
    image: str,
    no_submit: bool,
    template_ref: bool,
    shared_runner: bool,
    pdb: bool,
    watcher_bind_address: str,
    print_only: bool,
    catalog_dirs: tuple[Path, ...],
    kubeconfig: str | None,
    **placement: Any,
) -> None:
    """Install nvcre-argo into a cluster (server-side apply), or print what would be applied."""
    if not watch_namespaces:
        raise click.UsageError(NO_WATCH_NAMESPACE)
    settings = InstallSettings(
        namespace=namespace,
        image=image,
        watch_namespaces=watch_namespaces,
        submit=not no_submit,
        template_ref=template_ref,
        shared_runner=shared_runner,
        pdb=pdb,
        bind_address=watcher_bind_address,
    )
    manifests = install_manifests(settings, catalog_dirs=catalog_dirs, placement=step_placement(**placement))
    if print_only:
        click.echo(dump_yaml_documents(manifests), nl=False)
        return
    kube = open_cluster(kubeconfig)
    for manifest in manifests:
        metadata = manifest["metadata"]
        where = f" (namespace {metadata['namespace']})" if metadata.get("namespace") else ""
        what = f"{manifest['kind']}/{metadata['name']}{where}"
        try:
            outcome = _apply(kube, manifest)
        except ApiError as error:
            click.echo(f"error: applying {what}: {error}", err=True)
            raise SystemExit(1) from None
        click.echo(f"{outcome} {what}")
