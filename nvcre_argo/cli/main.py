"""`nvcre-argo`: the one command for everything (validate, crd, and the rest as they land)."""

from __future__ import annotations

import click

from nvcre_argo import __version__
from nvcre_argo.api.crd import build_crd
from nvcre_argo.cli.catalog import catalog_group
from nvcre_argo.cli.install import install_command
from nvcre_argo.cli.plan import plan_command
from nvcre_argo.cli.report import report_command
from nvcre_argo.cli.resolve import resolve_command
from nvcre_argo.cli.step import step_group
from nvcre_argo.cli.templates import templates_command
from nvcre_argo.cli.validate import validate_command
from nvcre_argo.cli.watch import watch_command
from nvcre_argo.yamlio import dump_yaml


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nvcre-argo")
def cli() -> None:
    """Certify GPU Kubernetes node pools with Argo Workflows."""


@cli.command("crd")
def crd_command() -> None:
    """Print the Certification CustomResourceDefinition (generated from the API models)."""
    click.echo(dump_yaml(build_crd()), nl=False)


cli.add_command(validate_command)
cli.add_command(catalog_group)
cli.add_command(resolve_command)
cli.add_command(plan_command)
cli.add_command(templates_command)
cli.add_command(step_group)
cli.add_command(watch_command)
cli.add_command(report_command)
cli.add_command(install_command)


def main() -> None:
    cli(prog_name="nvcre-argo")
