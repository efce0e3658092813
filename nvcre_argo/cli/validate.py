"""`nvcre-argo validate FILE...`: check Certification documents offline, reporting every problem."""

from __future__ import annotations

import click

from nvcre_argo.cli.inputs import describe, load_all, report_invalid
from nvcre_argo.errors import InvalidDocumentError


def validate_files(files: tuple[str, ...]) -> int:
    """Exit code 0 when every document is valid, 1 otherwise; writes nothing but messages."""
    try:
        loaded = load_all(files)
    except InvalidDocumentError as error:
        report_invalid(error)
        return 1
    for item in loaded:
        categories = len(item.certification.spec.categories)
        click.echo(f"{item.source}: Certification {describe(item)} is valid ({categories} categories)")
    return 0


@click.command("validate")
@click.argument("files", nargs=-1, required=True)
def validate_command(files: tuple[str, ...]) -> None:
    """Validate Certification files (multi-document YAML; '-' reads standard input)."""
    raise SystemExit(validate_files(files))
