"""Reading Certification files named on the command line (`-` is standard input)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace

import click

from nvcre_argo.api.labels import dns1123_label_problems
from nvcre_argo.errors import DocumentError, FieldError, InvalidDocumentError
from nvcre_argo.loading import LoadedCertification, load_certifications


def read_source(name: str) -> str:
    """The text of a file, or of standard input for `-`; an unreadable file is an input error, not a crash."""
    if name == "-":
        return sys.stdin.read()
    try:
        with open(name, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InvalidDocumentError([FieldError((), "unreadable", f"cannot read file: {reason}", name)]) from None


def load_all(names: Sequence[str]) -> list[LoadedCertification]:
    """Every Certification in every named file; raises one InvalidDocumentError with all problems of all files."""
    loaded: list[LoadedCertification] = []
    problems: list[FieldError] = []
    for name in names:
        source = "<stdin>" if name == "-" else name
        try:
            loaded.extend(load_certifications(read_source(name), source))
        except InvalidDocumentError as error:
            problems.extend(error.errors)
    if problems:
        raise InvalidDocumentError(problems)
    return loaded


def report_invalid(error: DocumentError) -> None:
    """Print every problem to stderr, one per line, and a count."""
    for problem in error.errors:
        click.echo(problem.render(), err=True)
    count = len(error.errors)
    click.echo(f"{count} problem{'s' if count != 1 else ''} found", err=True)


def report_warnings(warnings: Sequence[FieldError]) -> None:
    """Print each warning to stderr as `<source>: <path>: warning: <message>`; warnings never change the exit
    code."""
    for warning in warnings:
        click.echo(replace(warning, message=f"warning: {warning.message}").render(), err=True)


def require_non_empty(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """A click callback for options such as `--step-image` that must name something."""
    if not value.strip():
        raise click.BadParameter("must not be empty")
    return value


def check_namespace(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a namespace option must be a DNS-1123 label, as the API server requires."""
    if value is not None and (problems := dns1123_label_problems(value)):
        raise click.BadParameter(f"{'; '.join(problems)}, got {value!r}")
    return value


def describe(loaded: LoadedCertification) -> str:
    """`namespace/name` (or name) of a loaded Certification, for progress and success lines."""
    metadata = loaded.certification.metadata
    name = metadata.name or metadata.generate_name or "<unnamed>"
    return f"{metadata.namespace}/{name}" if metadata.namespace else name
