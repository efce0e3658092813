"""`nvcre-compile`: the GitOps compiler. `nvcre-compile cert.yaml | argo submit -`, or `-o DIR` to commit.

All inputs are validated and compiled before anything is written: a Certification that cannot be compiled
produces no output at all. `--check DIR` compares committed output with what would be written and exits 1
with a diff when it is stale, for a GitOps repository's CI.

Exit codes: 0 compiled (or up to date), 1 an invalid Certification, a stale `--check` or an output that cannot
be written, 2 a usage error (a bad option value, `-o` naming a file).
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from nvcre_argo import __version__, contract
from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.inputs import check_namespace, load_all, report_invalid, report_warnings, require_non_empty
from nvcre_argo.cli.resolve import gpu_arch_option, open_arms
from nvcre_argo.cli.validate import validate_files
from nvcre_argo.cli.workflow_options import lifetime_options, step_placement, step_placement_options
from nvcre_argo.compiler import CompiledCertification, CompileOptions, certification_warnings, compile_certifications
from nvcre_argo.errors import DocumentError
from nvcre_argo.names import DNS_LABEL_LIMIT
from nvcre_argo.platform.detect import PLATFORMS
from nvcre_argo.render.certification_workflow import DEFAULT_LOCK
from nvcre_argo.yamlio import dump_yaml, dump_yaml_documents


def _check_workflow_name(value: str | None) -> str | None:
    """A Workflow name must be a DNS-1123 label with room for its category Workflows' `-<index>`."""
    if value is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value):
        raise click.BadParameter(f"{value!r} is not a DNS-1123 label (lower-case letters, digits and '-')")
    if value is not None and len(value) > DNS_LABEL_LIMIT - 4:
        raise click.BadParameter(f"must be at most {DNS_LABEL_LIMIT - 4} characters, got {len(value)}")
    return value


# Options a certification Workflow that only references WorkflowTemplates cannot carry: Argo's strict template
# referencing refuses every pod spec field, and the mutex is the installed template's.
_NOT_WITH_TEMPLATE_REF = (
    "step_image",
    "lock",
    "no_lock",
    "step_node_selector",
    "step_toleration",
    "step_priority_class",
    "step_image_pull_secret",
    "steps_on_target",
)


def _refuse_with_template_ref(ctx: click.Context) -> None:
    """A usage error naming every option given with `--template-ref` that it cannot carry."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in _NOT_WITH_TEMPLATE_REF
        if ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT, None)
    ]
    if given:
        raise click.UsageError(
            f"--template-ref cannot carry {', '.join(given)}: a Workflow that references a WorkflowTemplate under "
            "Argo's templateReferencing: Strict may set no pod field; the step image and the step pods' placement "
            "are those the templates were installed with (`nvcre-argo install --image ... --step-node-selector ...`)"
        )


def render_output(compiled: list[CompiledCertification], output_format: str) -> dict[str, str]:
    """File name → text for `-o DIR` (one file per Certification)."""
    files: dict[str, str] = {}
    for item in compiled:
        file_name = f"{item.certification}.{output_format}"
        if file_name in files:
            raise click.UsageError(
                f"two Certifications are named {item.certification}; write them to separate directories"
            )
        files[file_name] = _serialise(item, output_format)
    return files


def _serialise(item: CompiledCertification, output_format: str) -> str:
    if output_format == "json":
        return json.dumps(item.workflow, indent=2) + "\n"
    return dump_yaml(item.workflow)


def _check(files: dict[str, str], directory: Path) -> int:
    stale = 0
    for file_name, expected in files.items():
        path = directory / file_name
        actual = path.read_text(encoding="utf-8") if path.is_file() else ""
        if actual != expected:
            stale += 1
            diff = difflib.unified_diff(
                actual.splitlines(keepends=True), expected.splitlines(keepends=True), str(path), f"{path} (compiled)"
            )
            sys.stdout.writelines(diff)
    if stale:
        click.echo(f"{stale} compiled file(s) in {directory} are stale; run nvcre-compile -o {directory}", err=True)
        return 1
    click.echo(f"{len(files)} compiled file(s) in {directory} are up to date", err=True)
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nvcre-compile")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "-o", "--output", default="-", show_default=True, help="Directory to write <name>.yaml files into, or - for stdout."
)
@click.option("--format", "output_format", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
@catalog_dir_option
@click.option(
    "--namespace",
    default=None,
    callback=check_namespace,
    help="Namespace of the Workflows (default: the Certification's).",
)
@click.option(
    "--name",
    default=None,
    callback=lambda _ctx, _param, value: _check_workflow_name(value),
    help="Pin the certification Workflow's name instead of generateName.",
)
@click.option(
    "--step-image",
    default=contract.DEFAULT_STEP_IMAGE,
    show_default=True,
    callback=require_non_empty,
    help="Image of the step containers.",
)
@gpu_arch_option
@click.option(
    "--platform",
    type=click.Choice(PLATFORMS),
    default=None,
    help="Pin the platform whose arms the plan step applies (it then skips detecting it from the nodes' "
    "providerID and labels); preview the result with `nvcre-argo resolve --platform`.",
)
@click.option(
    "--lock",
    default=DEFAULT_LOCK,
    show_default=True,
    callback=lambda _ctx, _param, value: _check_workflow_name(value),
    help="Argo mutex the certification Workflow holds: certifications sharing it run one at a time.",
)
@click.option("--no-lock", is_flag=True, help="Hold no mutex (only when targets can never overlap).")
@click.option(
    "--check",
    "check_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Exit 1 with a diff when DIR holds stale output.",
)
@click.option("--validate-only", is_flag=True, help="Only validate the Certifications; write nothing.")
@click.option(
    "--template-ref",
    is_flag=True,
    help="For Argo's templateReferencing: Strict: reference the installed nvcre-certification WorkflowTemplate "
    "(step image and placement are then those `nvcre-argo install` set).",
)
@click.option(
    "--shared-runner/--pod-per-group",
    default=True,
    show_default=True,
    help="Run each category's groups in one step pod, however many (the default), or a step pod per group; "
    "either way each group is a node of its own in the Argo UI (with one runner, a suspend node it completes).",
)
@step_placement_options
@lifetime_options
def compile_command(
    files: tuple[str, ...],
    output: str,
    output_format: str,
    catalog_dirs: tuple[Path, ...],
    namespace: str | None,
    name: str | None,
    step_image: str,
    gpu_arch: str | None,
    platform: str | None,
    lock: str,
    no_lock: bool,
    check_dir: Path | None,
    validate_only: bool,
    ttl: int | None,
    deadline: int | None,
    category_deadline: int | None,
    template_ref: bool,
    shared_runner: bool,
    **placement: Any,
) -> None:
    """Compile Certification files into Argo Workflows ('-' reads standard input)."""
    if template_ref:
        _refuse_with_template_ref(click.get_current_context())
    options = CompileOptions(
        step_image=step_image,
        namespace=namespace,
        name=name,
        gpu_architecture=gpu_arch,
        platform=platform,
        platform_arms=open_arms(catalog_dirs),
        lock=None if no_lock else lock,
        placement=step_placement(**placement),
        ttl_seconds=ttl,
        deadline_seconds=deadline,
        category_deadline_seconds=category_deadline,
        template_ref=template_ref,
        shared_runner=shared_runner,
    )
    writes_files = output != "-" and not validate_only and check_dir is None
    if writes_files and Path(output).exists() and not Path(output).is_dir():
        # Checked before compiling: a usage error, and nothing written (not a traceback from mkdir).
        raise click.BadParameter(f"{output!r} is a file, not a directory", param_hint="'-o' / '--output'")
    if validate_only:
        raise SystemExit(validate_files(files, catalog_dirs=catalog_dirs, options=options))
    try:
        loaded = load_all(files)
        if name and len(loaded) > 1:
            raise click.UsageError("--name pins one Workflow name; give exactly one Certification")
        catalog = open_catalog(catalog_dirs)
        report_warnings(certification_warnings(loaded, catalog=catalog))
        compiled = compile_certifications(loaded, catalog=catalog, options=options)
    except DocumentError as error:
        report_invalid(error)
        raise SystemExit(1) from None
    if check_dir is not None:
        raise SystemExit(_check(render_output(compiled, output_format), check_dir))
    if output == "-":
        if output_format == "json" and len(compiled) > 1:
            raise click.UsageError("--format json writes one object; use -o DIR for several Certifications")
        text = (
            _serialise(compiled[0], "json")
            if output_format == "json"
            else dump_yaml_documents([item.workflow for item in compiled])
        )
        click.echo(text, nl=False)
        return
    directory = Path(output)
    files_to_write = render_output(compiled, output_format)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for file_name, text in files_to_write.items():
            (directory / file_name).write_text(text, encoding="utf-8")
            click.echo(f"wrote {directory / file_name}", err=True)
    except OSError as error:
        target = error.filename or directory
        click.echo(f"error: cannot write {target}: {error.strerror or error}", err=True)
        raise SystemExit(1) from None


def main() -> None:
    compile_command(prog_name="nvcre-compile")
