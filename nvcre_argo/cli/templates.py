"""`nvcre-argo templates`: write (or check) the WorkflowTemplates of `workflow_templates/`."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import click

from nvcre_argo import contract
from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.inputs import require_non_empty
from nvcre_argo.render.catalog_templates import build_catalog_templates
from nvcre_argo.yamlio import dump_yaml


@click.command("templates")
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("workflow_templates"),
    show_default=True,
)
@click.option("--step-image", default=contract.DEFAULT_STEP_IMAGE, show_default=True, callback=require_non_empty)
@click.option("--check", is_flag=True, help="Exit 1 with a diff when the directory differs from what would be written.")
@catalog_dir_option
def templates_command(output_dir: Path, step_image: str, check: bool, catalog_dirs: tuple[Path, ...]) -> None:
    """Generate one Argo WorkflowTemplate per catalog entry (install them before submitting certifications)."""
    files = {
        name: dump_yaml(template)
        for name, template in build_catalog_templates(open_catalog(catalog_dirs), step_image=step_image).items()
    }
    if check:
        existing = {path.name for path in output_dir.glob("*.yaml")} if output_dir.is_dir() else set()
        stale = sorted(
            name
            for name in files
            if not (output_dir / name).is_file() or (output_dir / name).read_text() != files[name]
        )
        extra = sorted(existing - set(files))
        if not any((output_dir / name).is_file() for name in files):
            click.echo(
                f"error: {output_dir} holds none of the {len(files)} WorkflowTemplates; "
                f"run 'nvcre-argo templates -o {output_dir}' to write them",
                err=True,
            )
            raise SystemExit(1)
        for name in stale:
            if not (output_dir / name).is_file():
                click.echo(f"{output_dir / name}: missing", err=True)
                continue
            current = (output_dir / name).read_text()
            sys.stdout.writelines(
                difflib.unified_diff(
                    current.splitlines(True), files[name].splitlines(True), str(output_dir / name), "generated"
                )
            )
        for name in extra:
            click.echo(f"{output_dir / name}: not generated from the catalog (remove it)", err=True)
        if stale or extra:
            click.echo(f"{output_dir} is stale: run 'make generate' (nvcre-argo templates) and commit", err=True)
            raise SystemExit(1)
        click.echo(f"{output_dir}: {len(files)} templates up to date", err=True)
        return
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        for name in sorted({path.name for path in output_dir.glob("*.yaml")} - set(files)):
            (output_dir / name).unlink()
        for name, text in files.items():
            (output_dir / name).write_text(text, encoding="utf-8")
    except OSError as error:
        click.echo(f"error: cannot write {error.filename or output_dir}: {error.strerror or error}", err=True)
        raise SystemExit(1) from None
    click.echo(f"wrote {len(files)} templates to {output_dir}", err=True)
