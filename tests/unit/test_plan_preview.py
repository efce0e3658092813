"""The plan preview (`nvcre-argo plan`'s model): the plan step's plan, its TrainJobs and their GPU-hours.

Expected values are worked out by hand from the rules: GPU-hours = sum over TrainJobs of (group nodes x GPUs
per node) x timeoutPerJob (upper bound) or x the catalog's nominalDuration (nominal); one TrainJob per group
and iteration of repeatCount; H100 nodes get 8 GPUs per node unless `gpusPerNode` says otherwise.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.compiler import CompileOptions, compile_certification, resolve_for_run
from nvcre_argo.loading import load_certifications
from nvcre_argo.plan.planner import plan_category
from nvcre_argo.plan.preview import (
    CategoryPreview,
    GpuHours,
    PlanPreview,
    TrainJobPreview,
    preview_category,
    preview_certification,
    preview_document,
)
from nvcre_argo.plan.preview_text import format_hours, render_preview_text
from nvcre_argo.resolve.category import ResolvedCategory

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
DCGM_4 = {"domain": "diagnostics", "variant": "dcgm-level4"}
NEMOTRON_8B = {"domain": "training", "variant": "nemotron5-8b"}


def make_node(
    name: str,
    *,
    product: str = H100,
    gpus: str = "8",
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, **(labels or {})},
        },
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": gpus}},
    }


def make_nodes(count: int, **fields: Any) -> list[dict[str, Any]]:
    return [make_node(f"n{index}", **fields) for index in range(count)]


@cache
def _catalog() -> Catalog:
    return load_catalog()


def resolve_all(*categories: dict[str, Any], gpu_arch: str | None = None, **spec: Any) -> list[ResolvedCategory]:
    """The categories of a Certification as `nvcre-argo plan` resolves them (as compiled)."""
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "cert", "namespace": "nvcre"},
        "spec": {
            "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
            "categories": list(categories),
            **spec,
        },
    }
    (loaded,) = load_certifications(json.dumps(document), "t.yaml")
    return resolve_for_run(loaded, catalog=_catalog(), options=CompileOptions(gpu_architecture=gpu_arch))


def preview_one(category: dict[str, Any], nodes: list[dict[str, Any]], **spec: Any) -> CategoryPreview:
    (resolved,) = resolve_all(category, **spec)
    return preview_category(resolved, nodes)


def options(category: dict[str, Any], **values: Any) -> dict[str, Any]:
    return {**category, "options": values}


# --- the plan is the plan step's --------------------------------------------------------------------------------


def test_the_preview_plans_with_the_plan_steps_planner() -> None:
    nodes = [*make_nodes(5), make_node("cordoned", unschedulable=True), make_node("old", product=A100)]
    (category,) = resolve_all(options(ALL_REDUCE, nodesPerJob=2))

    preview = preview_category(category, nodes)

    assert preview.plan == plan_category(nodes, category)
    assert preview.error is None


def test_excluded_nodes_keep_the_plan_steps_reasons() -> None:
    nodes = [*make_nodes(3), make_node("cordoned", unschedulable=True), make_node("old", product=A100)]

    preview = preview_one(ALL_REDUCE, nodes)

    assert preview.plan is not None
    assert preview.plan.candidates == ("cordoned", "n0", "n1", "n2", "old")
    assert preview.plan.eligible == ("n0", "n1", "n2")
    assert {item.node: item.reason for item in preview.plan.excluded} == {
        "cordoned": "Cordoned",
        "old": "MinorityGPUArchitecture",
    }


# --- TrainJobs and GPU-hours ------------------------------------------------------------------------------------


def test_one_full_scale_group_costs_its_gpus_times_the_timeout() -> None:
    preview = preview_one(ALL_REDUCE, make_nodes(4))

    assert preview.gpus_per_node == 8
    assert preview.trainjobs == (TrainJobPreview("g0", 0, nodes=4, gpus=32),)
    assert preview.gpu_hours == GpuHours(upper_bound=32.0, nominal=None)  # 4 x 8 GPUs x 1h, no nominal known


def test_an_overflow_group_is_a_full_size_trainjob_of_its_own() -> None:
    # 5 nodes in groups of 3: g0 = n0..n2, g1-overflow = n3, n4 + one borrowed node; 2 x 3 x 8 GPUs x 1h.
    preview = preview_one(options(ALL_REDUCE, nodesPerJob=3), make_nodes(5))

    assert preview.trainjobs == (
        TrainJobPreview("g0", 0, nodes=3, gpus=24),
        TrainJobPreview("g1-overflow", 0, nodes=3, gpus=24),
    )
    assert preview.gpu_hours == GpuHours(upper_bound=48.0, nominal=None)


def test_every_iteration_of_repeat_count_is_a_trainjob_and_counts() -> None:
    preview = preview_one(options(ALL_REDUCE, nodesPerJob=2, repeatCount=3), make_nodes(4))

    assert [(job.group, job.iteration) for job in preview.trainjobs] == [
        ("g0", 0),
        ("g0", 1),
        ("g0", 2),
        ("g1", 0),
        ("g1", 1),
        ("g1", 2),
    ]
    assert preview.gpu_hours == GpuHours(upper_bound=96.0, nominal=None)  # 6 TrainJobs x 2 x 8 GPUs x 1h


def test_the_catalogs_nominal_duration_gives_the_nominal_figure() -> None:
    # dcgm-level4: one group per node, timeoutPerJob 2h, nominalDuration 90m; 3 nodes x 8 GPUs = 24 GPUs.
    preview = preview_one(DCGM_4, make_nodes(3))

    assert [job.group for job in preview.trainjobs] == ["g0", "g1", "g2"]
    assert preview.nominal_duration == "90m"
    assert preview.gpu_hours == GpuHours(upper_bound=48.0, nominal=36.0)


def test_a_nominal_duration_past_the_timeout_is_cut_to_the_timeout() -> None:
    # dcgm-level4 normally runs 90m; with timeoutPerJob 1h the run step stops it at 1h.
    preview = preview_one(options(DCGM_4, timeoutPerJob="1h"), make_nodes(1))

    assert preview.gpu_hours == GpuHours(upper_bound=8.0, nominal=8.0)


def test_the_users_timeout_and_gpus_per_node_are_what_the_bound_uses() -> None:
    preview = preview_one(options(ALL_REDUCE, timeoutPerJob="20m", gpusPerNode=4), make_nodes(3))

    assert preview.gpus_per_node == 4
    assert preview.gpu_hours == GpuHours(upper_bound=4.0, nominal=None)  # 3 x 4 GPUs x 1/3 h


def test_an_unpinned_group_is_sized_by_nodes_per_job() -> None:
    preview = preview_one(options(ALL_REDUCE, placement="Unpinned", nodesPerJob=2), make_nodes(5))

    assert preview.plan is not None
    assert [(group.nodes, group.pinned) for group in preview.plan.groups] == [((), False)]
    assert preview.trainjobs == (TrainJobPreview("g0", 0, nodes=2, gpus=16),)


def test_a_category_the_nodes_cannot_run_carries_the_plan_steps_error_and_the_others_are_still_previewed() -> None:
    unpinned = options(ALL_REDUCE, placement="Unpinned", nodesPerJob=4)
    categories = resolve_all(ALL_REDUCE, unpinned, DCGM_4)

    preview = preview_certification("nvcre/cert", categories, make_nodes(2))

    assert [item.category.index for item in preview.planned] == [0, 2]
    (failed,) = preview.failed
    assert (failed.category.index, failed.plan, failed.trainjobs, failed.gpu_hours) == (1, None, (), None)
    assert failed.error == (
        "communication/nccl-all-reduce: placement Unpinned asks for nodesPerJob 4 nodes, only 2 eligible"
    )
    # Totals count what can run: 16 GPUs x 1h, and 2 x 8 GPUs x 2h (nominal x 1.5h).
    assert preview.gpu_hours == GpuHours(upper_bound=48.0, nominal=24.0)


def test_totals_add_the_planned_categories_and_the_nominal_figures_that_exist() -> None:
    categories = resolve_all(ALL_REDUCE, DCGM_4)

    preview = preview_certification("nvcre/cert", categories, make_nodes(2))

    # all-reduce: 16 GPUs x 1h = 16 (no nominal); dcgm-level4: 2 x 8 GPUs x 2h = 32, nominal 16 x 1.5h = 24.
    assert preview.gpu_hours == GpuHours(upper_bound=48.0, nominal=24.0)
    assert preview.failed == ()


def test_no_target_node_is_an_error_naming_the_selector() -> None:
    preview = preview_one(ALL_REDUCE, [])

    assert preview.error is not None
    assert "no node matches the target (nodeSelector nvidia.com/gpu.present=true); 0 node(s) listed" in preview.error


# --- the nominal duration is the catalog's, and never reaches a compiled Workflow ---------------------------------


def test_the_nominal_duration_is_left_out_of_compiled_workflows() -> None:
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "cert", "namespace": "nvcre"},
        "spec": {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "categories": [DCGM_4]},
    }
    (loaded,) = load_certifications(json.dumps(document), "t.yaml")

    compiled = compile_certification(loaded, catalog=_catalog(), options=CompileOptions())

    assert _catalog().entries["diagnostics/dcgm-level4"].defaults.nominal_duration == "90m"
    assert "nominalDuration" not in json.dumps(compiled.workflow)


# --- JSON and text --------------------------------------------------------------------------------------------


def test_the_json_document_lists_every_node_and_figure() -> None:
    nodes = [*make_nodes(3), make_node("cordoned", unschedulable=True)]
    categories = resolve_all(options(ALL_REDUCE, nodesPerJob=2, maxConcurrent=1))

    document = preview_document(preview_certification("nvcre/cert", categories, nodes))

    message = (
        "node is cordoned (spec.unschedulable); taint-select node.kubernetes.io/unschedulable in spec.target "
        "to certify cordoned nodes"
    )
    assert document == {
        "certification": "nvcre/cert",
        "categories": [
            {
                "index": 0,
                "domain": "communication",
                "variant": "nccl-all-reduce",
                "timeoutPerJob": "1h",
                "nominalDuration": None,
                "repeatCount": 1,
                "maxConcurrent": 1,
                "error": None,
                "architecture": "h100",
                "gpusPerNode": 8,
                "platform": {
                    "name": "onprem",
                    "source": "detected",
                    "instanceType": None,
                    "arms": [],
                    "nicResource": None,
                },
                "candidates": ["cordoned", "n0", "n1", "n2"],
                "selected": ["n0", "n1", "n2"],
                "excluded": [{"node": "cordoned", "reason": "Cordoned", "message": message}],
                "groups": [
                    {
                        "name": "g0",
                        "nodes": ["n0", "n1"],
                        "size": 2,
                        "gpus": 16,
                        "overflow": False,
                        "pinned": True,
                        "domain": None,
                    },
                    {
                        "name": "g1-overflow",
                        "nodes": ["n0", "n2"],
                        "size": 2,
                        "gpus": 16,
                        "overflow": True,
                        "pinned": True,
                        "domain": None,
                    },
                ],
                "trainJobs": [
                    {"group": "g0", "iteration": 0, "nodes": 2, "gpus": 16},
                    {"group": "g1-overflow", "iteration": 0, "nodes": 2, "gpus": 16},
                ],
                "gpuHours": {"upperBound": 32.0, "nominal": None},
            }
        ],
        "gpuHours": {"upperBound": 32.0, "nominal": None},
    }
    json.dumps(document)  # JSON-ready as it is


def test_a_category_that_cannot_be_planned_is_in_the_json_with_its_error_only() -> None:
    document = preview_document(preview_certification("nvcre/cert", resolve_all(ALL_REDUCE), []))

    (category,) = document["categories"]
    assert set(category) == {
        "index",
        "domain",
        "variant",
        "timeoutPerJob",
        "nominalDuration",
        "repeatCount",
        "maxConcurrent",
        "error",
    }
    assert category["error"].startswith("communication/nccl-all-reduce: no node matches the target")
    assert document["gpuHours"] == {"upperBound": 0.0, "nominal": None}


def test_the_text_says_per_category_what_runs_where_and_what_it_costs() -> None:
    nodes = [*make_nodes(2), make_node("old", product=A100)]
    categories = resolve_all(ALL_REDUCE, DCGM_4)

    text = render_preview_text(preview_certification("nvcre/cert", categories, nodes))

    minority = (
        "GPU NVIDIA-A100-SXM4-80GB (nvidia.com/gpu.product) is architecture a100, not the majority architecture "
        "h100 (2 of 3 labelled nodes)"
    )
    assert text == (
        "Certification nvcre/cert: 2 categories, run in order\n"
        "\n"
        "category 0: communication/nccl-all-reduce\n"
        "  nodes:     3 match the target, 2 selected, 1 excluded\n"
        f"  excluded:  old: MinorityGPUArchitecture: {minority}\n"
        "  GPUs:      architecture h100, 8 per node\n"
        "  platform:  onprem (detected)\n"
        "  arms:      none\n"
        "  groups:    1\n"
        "             g0: 2 nodes, 16 GPUs: n0,n1\n"
        "  TrainJobs: 1 (1 group x 1 iteration), no limit on how many at once\n"
        "  GPU-hours: at most 16 (16 GPUs x timeoutPerJob 1h); no nominal duration in the catalog\n"
        "\n"
        "category 1: diagnostics/dcgm-level4\n"
        "  nodes:     3 match the target, 2 selected, 1 excluded\n"
        f"  excluded:  old: MinorityGPUArchitecture: {minority}\n"
        "  GPUs:      architecture h100, 8 per node\n"
        "  platform:  onprem (detected)\n"
        "  arms:      none\n"
        "  groups:    2\n"
        "             g0: 1 node, 8 GPUs: n0\n"
        "             g1: 1 node, 8 GPUs: n1\n"
        "  TrainJobs: 2 (2 groups x 1 iteration), no limit on how many at once\n"
        "  GPU-hours: at most 32 (16 GPUs x timeoutPerJob 2h); nominal 24 (16 GPUs x nominalDuration 90m)\n"
        "\n"
        "total: at most 48 GPU-hours; nominal 24 GPU-hours for the 1 of 2 with a nominal duration\n"
    )


def test_the_text_shortens_long_node_lists_and_states_what_cannot_be_planned() -> None:
    # nemotron5-8b needs minGPUs 4: a group of 1 node x 1 GPU cannot start.
    categories = resolve_all(ALL_REDUCE, options(NEMOTRON_8B, nodesPerJob=1, gpusPerNode=1))

    text = render_preview_text(preview_certification("nvcre/cert", categories, make_nodes(12)))

    assert "             g0: 12 nodes, 96 GPUs: n0,n1,n10,n11,n2 (+7 more)\n" in text
    assert "category 1: training/nemotron5-8b\n  error:     cannot be planned: training/nemotron5-8b: " in text
    assert text.endswith("total: at most 96 GPU-hours over 1 of 2 categories; 1 category cannot be planned\n")


@pytest.mark.parametrize(
    ("hours", "shown"),
    [(1536.0, "1,536"), (1.5, "1.5"), (0.27, "0.27"), (0.0, "0"), (10.0, "10")],
    ids=["thousands", "half", "two-decimals", "zero", "round-ten"],
)
def test_gpu_hours_are_shown_with_at_most_two_decimals(hours: float, shown: str) -> None:
    assert format_hours(hours) == shown


def test_the_text_says_how_many_run_at_once_and_which_group_waits_for_the_others() -> None:
    categories = resolve_all(options(ALL_REDUCE, nodesPerJob=2, maxConcurrent=2))

    text = render_preview_text(preview_certification("nvcre/cert", categories, make_nodes(5)))

    assert "  TrainJobs: 3 (3 groups x 1 iteration), at most 2 at once (maxConcurrent)\n" in text
    overflow = "g2-overflow: 2 nodes, 16 GPUs, borrows nodes from g0 and runs after it, in g0's step: n0,n4"
    assert f"             {overflow}\n" in text


def test_a_diagnose_preview_shows_the_screening_round_that_starts_every_isolation() -> None:
    nodes = [make_node(f"n{i}", labels={"nvidia.com/gpu.clique": f"c{i // 4}"}) for i in range(8)]

    preview = preview_one(options(ALL_REDUCE, testScale="diagnose"), nodes)
    text = render_preview_text(PlanPreview("cert", (preview,)))

    assert preview.plan is not None
    assert {group.round for group in preview.plan.groups} == {1}
    assert {group.stage for group in preview.plan.groups} >= {"intra-screening"}
    assert len(preview.trainjobs) == len(preview.plan.groups)
    assert "testScale diagnose over 2 domain(s), minGroupSize 2: round 1 below" in text
