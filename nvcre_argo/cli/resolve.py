"""`nvcre-argo resolve CERT.yaml`: show exactly what each category will run, before running it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.inputs import load_all, report_invalid, report_warnings
from nvcre_argo.errors import CatalogError, CompileError, InvalidDocumentError
from nvcre_argo.names import checkpoint_claim_name, checkpoint_dir
from nvcre_argo.plan.platform import platform_gpu_values, select_arms
from nvcre_argo.platform.apply import render_compute_domain
from nvcre_argo.platform.arms import PlatformArm, load_builtin_arms, load_extra_arms, merge_arms
from nvcre_argo.platform.detect import PLATFORMS
from nvcre_argo.render.checkpoint import render_checkpoint_claim
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.category import ResolvedCategory, resolution_warnings, resolve_certification
from nvcre_argo.resolve.gpu import KNOWN_ARCHITECTURES
from nvcre_argo.yamlio import dump_yaml_documents

gpu_arch_option = click.option(
    "--gpu-arch",
    type=click.Choice(KNOWN_ARCHITECTURES),
    default=None,
    help="GPU architecture for GPU-dependent defaults; without it they are decided on the cluster at run time.",
)


platform_option = click.option(
    "--platform",
    type=click.Choice(PLATFORMS),
    default=None,
    help="Platform whose arms (EFA, TCPXO, InfiniBand, RoCE, ...) to apply; without it the plan step detects "
    "the platform from the nodes' providerID and labels at run time.",
)
instance_type_option = click.option(
    "--instance-type",
    default=None,
    help="Instance type (node.kubernetes.io/instance-type) for arms that depend on it, e.g. a3-megagpu-8g, "
    "p5en.48xlarge; only with --platform.",
)


def open_arms(catalog_dirs: tuple[Path, ...]) -> tuple[PlatformArm, ...]:
    """The arms of `--catalog DIR/_platform/`; a malformed arm file ends the command with its file and field."""
    try:
        return load_extra_arms(catalog_dirs)
    except CatalogError as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from None


def _summary(category: ResolvedCategory) -> dict[str, Any]:
    return {
        "category": category.index,
        "domain": category.domain,
        "variant": category.variant,
        "options": category.options.model_dump(by_alias=True, exclude_none=True),
        "workloadLabels": category.workload_labels,
        "gangScheduler": (
            {
                "schedulerName": category.gang.scheduler_name,
                "queue": category.gang.queue,
                "queueLabelKey": category.gang.queue_label_key,
            }
            if category.gang
            else None
        ),
        "resources": category.resources.model_dump() if category.resources else None,
        "timeoutPerJob": category.timeout_per_job,
        "measurementTimeout": category.measurement_timeout,
        "thresholds": category.thresholds,
        "checkpoint": category.checkpoint.model_dump(by_alias=True) if category.checkpoint else None,
    }


@click.command("resolve")
@click.argument("file")
@click.option("--category", "only", type=int, default=None, help="Only this category index.")
@click.option("--nodes", type=click.IntRange(min=1), default=2, show_default=True, help="Example group size.")
@gpu_arch_option
@platform_option
@instance_type_option
@catalog_dir_option
def resolve_command(
    file: str,
    only: int | None,
    nodes: int,
    gpu_arch: str | None,
    platform: str | None,
    instance_type: str | None,
    catalog_dirs: tuple[Path, ...],
) -> None:
    """Print each category's resolved options and its rendered TrainingRuntime and TrainJob.

    The TrainJob is shown for an example group of --nodes nodes named example-node-1.. (the real groups are
    planned on the cluster). With --platform (and --gpu-arch, --instance-type) the platform's arms are applied
    as the plan step would apply them on such nodes, and the summary lists them in the order applied; a
    GB200/GB300 category's ComputeDomain is printed before its TrainJob.
    """
    if instance_type and not platform:
        raise click.BadParameter("needs --platform", param_hint="'--instance-type'")
    try:
        loaded = load_all((file,))
    except InvalidDocumentError as error:
        report_invalid(error)
        raise SystemExit(1) from None
    counts = [len(item.certification.spec.categories) for item in loaded]
    if only is not None and not any(0 <= only < count for count in counts):
        raise click.BadParameter(
            f"no category {only}; the Certification has categories 0..{max(counts) - 1}", param_hint="'--category'"
        )
    catalog = open_catalog(catalog_dirs)
    arms = merge_arms(load_builtin_arms(), open_arms(catalog_dirs))
    documents: list[Any] = []
    for item in loaded:
        certification = item.certification
        report_warnings([warning.at(item.source) for warning in resolution_warnings(certification.spec, catalog)])
        resolved, errors = resolve_certification(certification.spec, catalog)
        if errors:
            report_invalid(CompileError(error.at(item.source) for error in errors))
            raise SystemExit(1)
        name = certification.metadata.name or "certification"
        for category in resolved:
            if only is not None and category.index != only:
                continue
            applied = select_arms(category, arms, platform=platform, architecture=gpu_arch, instance_type=instance_type)
            gpu = platform_gpu_values(category, gpu_arch, applied)
            summary = _summary(category)
            if platform:
                summary["platform"] = {
                    "name": platform,
                    "instanceType": instance_type,
                    "arms": [arm.name for arm in applied],
                }
            runtime = f"{name}-{category.index}-{category.variant}-runtime"
            claim = checkpoint_claim_name(f"{name}-{category.index}-{category.variant}")
            group_nodes = [f"example-node-{number}" for number in range(1, nodes + 1)]
            trainjob = f"{name}-{category.index}-g0"
            documents += [
                summary,
                *(
                    [
                        render_checkpoint_claim(
                            category.checkpoint,
                            name=claim,
                            namespace=certification.metadata.namespace,
                            category_index=category.index,
                        )
                    ]
                    if category.checkpoint is not None
                    else []
                ),
                render_runtime(
                    category,
                    gpu,
                    name=runtime,
                    namespace=certification.metadata.namespace,
                    num_nodes=nodes,
                    arms=applied,
                    checkpoint_claim=claim,
                ),
                *(
                    [render_compute_domain(runtime, namespace=certification.metadata.namespace, num_nodes=nodes)]
                    if any(arm.patch.compute_domain for arm in applied)
                    else []
                ),
                render_trainjob(
                    category,
                    gpu,
                    name=trainjob,
                    namespace=certification.metadata.namespace,
                    certification=name,
                    runtime_name=runtime,
                    group="g0",
                    nodes=group_nodes,
                    checkpoint_dir=checkpoint_dir(trainjob),
                ),
            ]
    click.echo(dump_yaml_documents(documents), nl=False)
