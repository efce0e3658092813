"""`nvcre-compile`: the GitOps compiler entry point."""

from __future__ import annotations

import click

from nvcre_argo import __version__
from nvcre_argo.cli.validate import validate_files


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nvcre-compile")
@click.argument("files", nargs=-1, required=True)
@click.option("--validate-only", is_flag=True, help="Only validate the Certifications; write nothing.")
def compile_command(files: tuple[str, ...], validate_only: bool) -> None:
    """Compile Certification files into Argo Workflows ('-' reads standard input)."""
    if not validate_only:
        raise click.UsageError("compiling is not available yet; use --validate-only")
    raise SystemExit(validate_files(files))


def main() -> None:
    compile_command(prog_name="nvcre-compile")
