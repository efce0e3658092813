"""`nvcre-argo install`: the CRD, namespace, RBAC, watcher Deployment and WorkflowTemplates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nvcre_argo import contract
from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.cluster import kubeconfig_option, open_cluster
from nvcre_argo.cli.inputs import check_namespace, require_non_empty
from nvcre_argo.kube.client import ApiError
from nvcre_argo.render.catalog_templates import build_catalog_templates
from nvcre_argo.render.install import build_install_manifests
from nvcre_argo.yamlio import dump_yaml_documents

FIELD_MANAGER = "nvcre-argo-install"


def install_manifests(
    namespace: str, image: str, watch_namespace: str | None, *, submit: bool, catalog_dirs: tuple[Path, ...]
) -> list[dict[str, Any]]:
    manifests = build_install_manifests(namespace, image, watch_namespace, submit=submit)
    run_namespace = watch_namespace or namespace
    for template in build_catalog_templates(open_catalog(catalog_dirs), step_image=image).values():
        template["metadata"]["namespace"] = run_namespace
        manifests.append(template)
    return manifests


@click.command("install")
@click.option(
    "--namespace", default="nvcre-argo", show_default=True, callback=check_namespace, help="Namespace of the watcher."
)
@click.option(
    "--watch-namespace",
    default=None,
    callback=check_namespace,
    help="The one namespace to watch and run in (default: all).",
)
@click.option(
    "--image",
    default=contract.DEFAULT_STEP_IMAGE,
    show_default=True,
    callback=require_non_empty,
    help="Watcher and step image.",
)
@click.option("--no-submit", is_flag=True, help="Do not let the watcher create Workflows (GitOps/argo submit only).")
@click.option("--print", "print_only", is_flag=True, help="Print the manifests instead of applying them.")
@catalog_dir_option
@kubeconfig_option
def install_command(
    namespace: str,
    watch_namespace: str | None,
    image: str,
    no_submit: bool,
    print_only: bool,
    catalog_dirs: tuple[Path, ...],
    kubeconfig: str | None,
) -> None:
    """Install nvcre-argo into a cluster (server-side apply), or print what would be applied."""
    manifests = install_manifests(namespace, image, watch_namespace, submit=not no_submit, catalog_dirs=catalog_dirs)
    if print_only:
        click.echo(dump_yaml_documents(manifests), nl=False)
        return
    kube = open_cluster(kubeconfig)
    for manifest in manifests:
        what = f"{manifest['kind']}/{manifest['metadata']['name']}"
        try:
            kube.apply(manifest, field_manager=FIELD_MANAGER)
        except ApiError as error:
            click.echo(f"error: applying {what}: {error}", err=True)
            raise SystemExit(1) from None
        click.echo(f"applied {what}")
