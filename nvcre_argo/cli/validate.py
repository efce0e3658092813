"""`nvcre-argo validate FILE...`: check Certification documents offline, reporting every problem.

By default a document is valid only when it would compile: the API server's checks (schema, CEL rules, object
names) and then every check the compiler runs (catalog entries, thresholds and their CEL, names Kubernetes
would refuse later, Argo template syntax). `--admission-only` stops after the API server's checks, to answer
"would `kubectl apply` accept this?". `nvcre-compile --validate-only` calls the same function.
"""

from __future__ import annotations

from pathlib import Path

import click

from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.inputs import describe, load_all, report_invalid, report_warnings
from nvcre_argo.compiler import CompileOptions, certification_warnings, check_certifications
from nvcre_argo.errors import CompileError, InvalidDocumentError


def validate_files(
    files: tuple[str, ...],
    *,
    admission_only: bool = False,
    catalog_dirs: tuple[Path, ...] = (),
    options: CompileOptions | None = None,
) -> int:
    """Exit code 0 when every document is valid, 1 otherwise; writes nothing but messages."""
    try:
        loaded = load_all(files)
    except InvalidDocumentError as error:
        report_invalid(error)
        return 1
    if not admission_only:
        catalog = open_catalog(catalog_dirs)
        report_warnings(certification_warnings(loaded, catalog=catalog))
        errors = check_certifications(loaded, catalog=catalog, options=options or CompileOptions())
        if errors:
            report_invalid(CompileError(errors))
            return 1
    for item in loaded:
        categories = len(item.certification.spec.categories)
        click.echo(f"{item.source}: Certification {describe(item)} is valid ({categories} categories)")
    return 0


@click.command("validate")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--admission-only",
    is_flag=True,
    help="Only what the API server checks (would kubectl apply accept it?), not whether it compiles.",
)
@catalog_dir_option
def validate_command(files: tuple[str, ...], admission_only: bool, catalog_dirs: tuple[Path, ...]) -> None:
    """Validate Certification files (multi-document YAML; '-' reads standard input).

    Exit 0 when every document would compile, 1 when any is invalid, 2 on a usage error.
    """
    raise SystemExit(validate_files(files, admission_only=admission_only, catalog_dirs=catalog_dirs))
