"""`nvcre-argo catalog list`: what the catalog offers (built-in entries plus `--catalog DIR`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.errors import CatalogError
from nvcre_argo.yamlio import dump_yaml

catalog_dir_option = click.option(
    "--catalog",
    "catalog_dirs",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="A directory of extra or overriding entries (<domain>/<variant>.yaml); repeatable.",
)


def open_catalog(catalog_dirs: tuple[Path, ...]) -> Catalog:
    """The catalog for a command; a malformed entry ends the command with its file and path."""
    try:
        return load_catalog(catalog_dirs)
    except CatalogError as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from None


def _summary(catalog: Catalog) -> list[dict[str, Any]]:
    return [
        {
            "domain": entry.domain,
            "variant": entry.variant,
            "measurement": entry.measurement,
            "grouping": entry.grouping,
            "timeoutPerJob": entry.defaults.timeout_per_job,
            "minGPUs": entry.defaults.min_gpus,
            "description": entry.description,
            "source": catalog.sources[key],
        }
        for key, entry in catalog.entries.items()
    ]


@click.group("catalog")
def catalog_group() -> None:
    """Inspect the catalog of certification categories."""


@catalog_group.command("list")
@catalog_dir_option
@click.option("-o", "--output", type=click.Choice(["table", "yaml", "json"]), default="table", show_default=True)
def list_command(catalog_dirs: tuple[Path, ...], output: str) -> None:
    """List every domain/variant with its measurement and default timeout."""
    rows = _summary(open_catalog(catalog_dirs))
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
    elif output == "yaml":
        click.echo(dump_yaml(rows), nl=False)
    else:
        click.echo(_table(rows))


def _table(rows: list[dict[str, Any]]) -> str:
    columns = ["domain", "variant", "measurement", "grouping", "timeoutPerJob", "description"]
    cells = [[str(row[column]) for column in columns] for row in rows]
    headers = [column.upper() for column in columns]
    widths = [
        max(len(text) for text in [header, *column])
        for header, column in zip(headers, zip(*cells, strict=True), strict=True)
    ]
    lines = [
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in [headers, *cells]
    ]
    return "\n".join(lines)
