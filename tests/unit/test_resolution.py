"""Resolution: option inheritance, workload-label precedence, gang-scheduler queues, resources, thresholds, GPUs.

Every expected value here is written from the reference, not from the resolver's output:
`seed-certification-page.txt` ("Workload object labels", "Precedence", "Per-category queue conflicts"),
`nvcre-contract.md` §3.3 (options, inheritance, resources), §3.4 (gang scheduler), §3.5 (messages), §4 (the
workload-label contract) and §6.4 (the GPU defaults table). Precedence is tested one adjacent pair at a time, as
pydantic-settings does, so a broken step names itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.api.spec import CertificationSpec
from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.errors import FieldError, format_path
from nvcre_argo.loading import parse_certification
from nvcre_argo.render import pods
from nvcre_argo.render.certification_workflow import category_arguments
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.category import ResolvedCategory, resolve_certification
from nvcre_argo.resolve.gpu import architecture_of, defaults_for
from nvcre_argo.resolve.values import gpu_values
from nvcre_argo.steps.context import parse_category

KAI_KEY = "kai.scheduler/queue"
RUNAI_KEY = "runai/queue"
KUEUE_KEY = "kueue.x-k8s.io/queue-name"
KAI = {"schedulerName": "kai-scheduler", "queue": "team-a"}
RUNAI = {"schedulerName": "runai-scheduler", "queueLabelKey": RUNAI_KEY, "queue": "team-a"}
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
ALL_GATHER = {"domain": "communication", "variant": "nccl-all-gather"}
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
DCGM4 = {"domain": "diagnostics", "variant": "dcgm-level4"}
LABELLED = {"domain": "communication", "variant": "labelled"}
VALID_THRESHOLD_KEYS = "[busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]"
# The training defaults (§3.3 `resources`): limits cpu "128" / memory 800Gi; requests cpu "64" / memory 500Gi.
DEFAULT_LIMITS = {"cpu": "128", "memory": "800Gi"}
DEFAULT_REQUESTS = {"cpu": "64", "memory": "500Gi"}

LABELLED_ENTRY = """\
extends: nccl-mpi
domain: communication
variant: labelled
description: an all-reduce entry whose catalog job spec carries workload labels (precedence step 1)
ncclTest: all_reduce
labels:
  team: catalog
  tier: catalog
"""


# --- helpers -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The built-in catalog plus one entry with catalog labels (no built-in entry has any)."""
    directory: Path = tmp_path_factory.mktemp("catalog")
    (directory / "communication").mkdir()
    (directory / "communication" / "labelled.yaml").write_text(LABELLED_ENTRY, encoding="utf-8")
    return load_catalog([directory])


def certification_spec(spec: dict[str, Any]) -> CertificationSpec:
    """A Certification spec loaded the way a user's file is (so it is valid by the API's own rules)."""
    document = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "cert"}, "spec": {"target": {}, **spec}}
    return parse_certification(document, "test.yaml").spec


def resolve_ok(catalog: Catalog, spec: dict[str, Any]) -> list[ResolvedCategory]:
    resolved, errors = resolve_certification(certification_spec(spec), catalog)
    assert [error.render() for error in errors] == []
    return resolved


def resolve_errors(catalog: Catalog, spec: dict[str, Any]) -> list[FieldError]:
    resolved, errors = resolve_certification(certification_spec(spec), catalog)
    assert errors, f"expected errors, resolved {[category.key for category in resolved]}"
    return errors


def rendered(errors: list[FieldError]) -> list[str]:
    return [error.render() for error in errors]


def path_kinds(errors: list[FieldError]) -> list[tuple[str, str]]:
    return [(format_path(error.path), error.kind) for error in errors]


def with_labels(category: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {**category, "options": {"workloadMetadata": {"labels": labels}}}


def render_pair(category: ResolvedCategory, nodes: int = 2) -> tuple[dict[str, Any], dict[str, Any]]:
    gpu = gpu_values(category, "h100")
    runtime = render_runtime(category, gpu, name="rt", namespace="ns", num_nodes=nodes)
    trainjob = render_trainjob(
        category,
        gpu,
        name="tj",
        namespace="ns",
        certification="cert",
        runtime_name="rt",
        group="g0",
        nodes=[f"node-{number}" for number in range(nodes)],
    )
    return runtime, trainjob


def trainjob_labels(category: ResolvedCategory) -> dict[str, str]:
    labels: dict[str, str] = render_pair(category)[1]["metadata"]["labels"]
    return labels


# --- precedence, one adjacent pair at a time ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("global_labels", "category_labels", "gang", "expected"),
    [
        pytest.param(
            {"team": "global"},
            None,
            None,
            {"team": "global", "tier": "catalog"},
            id="global-replaces-a-catalog-label-by-key-and-keeps-the-others",
        ),
        pytest.param(
            {"team": "global", "environment": "burn-in"},
            {"team": "category"},
            None,
            {"team": "category", "tier": "catalog", "environment": "burn-in"},
            id="category-replaces-a-global-label-by-key-and-keeps-the-others",
        ),
        pytest.param(
            None,
            {"team": "category"},
            KAI,
            {"team": "category", "tier": "catalog", KAI_KEY: "team-a"},
            id="the-queue-label-is-inserted-after-the-category-labels",
        ),
    ],
)
def test_each_precedence_step_overrides_the_step_before_it(
    catalog: Catalog,
    global_labels: dict[str, str] | None,
    category_labels: dict[str, str] | None,
    gang: dict[str, str] | None,
    expected: dict[str, str],
) -> None:
    spec: dict[str, Any] = {"categories": [with_labels(LABELLED, category_labels) if category_labels else LABELLED]}
    if global_labels:
        spec["workloadMetadata"] = {"labels": global_labels}
    if gang:
        spec["gangScheduler"] = gang
    (category,) = resolve_ok(catalog, spec)
    assert category.workload_labels == expected


def test_the_seed_pages_worked_example_gives_the_kueue_label_only_to_its_category(catalog: Catalog) -> None:
    resolved = resolve_ok(
        catalog,
        {
            "workloadMetadata": {"labels": {"environment": "burn-in"}},
            "categories": [with_labels(ALL_REDUCE, {KUEUE_KEY: "nccl-queue"}), NEMOTRON],
        },
    )
    all_reduce, nemotron = resolved
    assert all_reduce.workload_labels == {"environment": "burn-in", KUEUE_KEY: "nccl-queue"}
    assert nemotron.workload_labels == {"environment": "burn-in"}
    assert {"environment": "burn-in", KUEUE_KEY: "nccl-queue"}.items() <= trainjob_labels(all_reduce).items()
    assert trainjob_labels(nemotron)["environment"] == "burn-in"
    assert KUEUE_KEY not in trainjob_labels(nemotron)


def test_workload_labels_are_not_copied_to_runtime_pod_or_job_templates(catalog: Catalog) -> None:
    """§4 "Not pod-label injection": the labels are not copied to JobSets, pod templates or pods."""
    (category,) = resolve_ok(
        catalog, {"workloadMetadata": {"labels": {"environment": "burn-in"}}, "categories": [ALL_REDUCE]}
    )
    runtime, _ = render_pair(category)
    for replicated_job in pods.replicated_jobs(runtime["spec"]):
        for template in (pods.job_template(replicated_job), pods.pod_template(replicated_job)):
            assert "environment" not in template.get("metadata", {}).get("labels", {})


# --- gang scheduler queues -------------------------------------------------------------------------------------


def test_a_runai_gang_scheduler_puts_runai_queue_on_the_trainjob_and_every_runtime_template(catalog: Catalog) -> None:
    resolved = resolve_ok(catalog, {"gangScheduler": RUNAI, "categories": [ALL_REDUCE, NEMOTRON, DCGM4]})
    for category in resolved:
        runtime, trainjob = render_pair(category)
        assert trainjob["metadata"]["labels"][RUNAI_KEY] == "team-a"
        assert KAI_KEY not in trainjob["metadata"]["labels"]
        for replicated_job in pods.replicated_jobs(runtime["spec"]):
            assert pods.pod_spec(replicated_job)["schedulerName"] == "runai-scheduler"
            assert pods.job_template(replicated_job)["metadata"]["labels"][RUNAI_KEY] == "team-a"
            assert pods.pod_template(replicated_job)["metadata"]["labels"][RUNAI_KEY] == "team-a"
            assert KAI_KEY not in pods.pod_template(replicated_job)["metadata"]["labels"]


def test_a_gang_scheduler_without_queue_puts_default_queue_on_every_trainjob(catalog: Catalog) -> None:
    resolved = resolve_ok(
        catalog, {"gangScheduler": {"schedulerName": "kai-scheduler"}, "categories": [ALL_REDUCE, NEMOTRON, DCGM4]}
    )
    assert len(resolved) == 3
    for category in resolved:
        assert category.workload_labels == {KAI_KEY: "default-queue"}
        runtime, trainjob = render_pair(category)
        assert trainjob["metadata"]["labels"][KAI_KEY] == "default-queue"
        for replicated_job in pods.replicated_jobs(runtime["spec"]):
            assert pods.pod_template(replicated_job)["metadata"]["labels"][KAI_KEY] == "default-queue"


def test_without_a_gang_scheduler_no_queue_label_is_added(catalog: Catalog) -> None:
    (category,) = resolve_ok(catalog, {"categories": [ALL_REDUCE]})
    assert category.workload_labels == {}
    runtime, trainjob = render_pair(category)
    assert KAI_KEY not in trainjob["metadata"]["labels"]
    for replicated_job in pods.replicated_jobs(runtime["spec"]):
        assert KAI_KEY not in pods.pod_template(replicated_job).get("metadata", {}).get("labels", {})


@pytest.mark.parametrize(
    ("gang", "key"), [pytest.param(KAI, KAI_KEY, id="kai"), pytest.param(RUNAI, RUNAI_KEY, id="runai")]
)
def test_a_category_queue_label_that_differs_from_the_gang_queue_fails_with_key_values_and_path(
    catalog: Catalog, gang: dict[str, str], key: str
) -> None:
    errors = resolve_errors(
        catalog, {"gangScheduler": gang, "categories": [ALL_REDUCE, with_labels(ALL_GATHER, {key: "team-b"})]}
    )
    assert rendered(errors) == [
        f'spec.categories[1].options.workloadMetadata.labels["{key}"]: conflicting label value "team-b", '
        'expected "team-a"'
    ]
    assert path_kinds(errors) == [(f'spec.categories[1].options.workloadMetadata.labels["{key}"]', "queue-conflict")]


def test_a_global_queue_label_that_differs_from_the_gang_queue_fails_at_the_global_path(catalog: Catalog) -> None:
    errors = resolve_errors(
        catalog,
        {
            "gangScheduler": KAI,
            "workloadMetadata": {"labels": {KAI_KEY: "team-b"}},
            "categories": [ALL_REDUCE, ALL_GATHER],
        },
    )
    assert set(rendered(errors)) == {
        'spec.workloadMetadata.labels["kai.scheduler/queue"]: conflicting label value "team-b", expected "team-a"'
    }


def test_a_catalog_queue_label_that_differs_from_the_gang_queue_fails_naming_the_category(
    catalog: Catalog, tmp_path: Path
) -> None:
    (tmp_path / "communication").mkdir()
    (tmp_path / "communication" / "labelled.yaml").write_text(
        LABELLED_ENTRY.replace("tier: catalog", f"{KAI_KEY}: team-b"), encoding="utf-8"
    )
    errors = resolve_errors(load_catalog([tmp_path]), {"gangScheduler": KAI, "categories": [ALL_REDUCE, LABELLED]})
    assert path_kinds(errors) == [("spec.categories[1]", "queue-conflict")]
    assert 'conflicting label value "team-b", expected "team-a"' in errors[0].message
    assert KAI_KEY in errors[0].message


@pytest.mark.parametrize(
    "level",
    [pytest.param("global", id="set-globally"), pytest.param("category", id="set-per-category")],
)
def test_a_queue_label_equal_to_the_gang_queue_is_accepted(catalog: Catalog, level: str) -> None:
    spec: dict[str, Any] = {"gangScheduler": KAI, "categories": [ALL_REDUCE]}
    if level == "global":
        spec["workloadMetadata"] = {"labels": {KAI_KEY: "team-a"}}
    else:
        spec["categories"] = [with_labels(ALL_REDUCE, {KAI_KEY: "team-a"})]
    (category,) = resolve_ok(catalog, spec)
    assert category.workload_labels == {KAI_KEY: "team-a"}


def test_the_queue_check_runs_after_merging_so_a_category_can_replace_a_conflicting_global_value(
    catalog: Catalog,
) -> None:
    (category,) = resolve_ok(
        catalog,
        {
            "gangScheduler": KAI,
            "workloadMetadata": {"labels": {KAI_KEY: "team-b"}},
            "categories": [with_labels(ALL_REDUCE, {KAI_KEY: "team-a"})],
        },
    )
    assert category.workload_labels == {KAI_KEY: "team-a"}


def test_kueue_queues_stay_independent_per_category_under_a_gang_scheduler(catalog: Catalog) -> None:
    first, second = resolve_ok(
        catalog,
        {
            "gangScheduler": KAI,
            "categories": [
                with_labels(ALL_REDUCE, {KUEUE_KEY: "queue-a"}),
                with_labels(NEMOTRON, {KUEUE_KEY: "queue-b"}),
            ],
        },
    )
    assert first.workload_labels == {KUEUE_KEY: "queue-a", KAI_KEY: "team-a"}
    assert second.workload_labels == {KUEUE_KEY: "queue-b", KAI_KEY: "team-a"}


# --- label values and limits -----------------------------------------------------------------------------------


def test_an_empty_label_value_is_kept_as_a_real_value(catalog: Catalog) -> None:
    (category,) = resolve_ok(catalog, {"workloadMetadata": {"labels": {"environment": ""}}, "categories": [ALL_REDUCE]})
    assert category.workload_labels == {"environment": ""}
    assert trainjob_labels(category)["environment"] == ""


def test_a_category_cannot_remove_a_global_label_because_an_empty_value_is_a_value(catalog: Catalog) -> None:
    (category,) = resolve_ok(
        catalog,
        {
            "workloadMetadata": {"labels": {"environment": "burn-in", "team": "a"}},
            "categories": [with_labels(ALL_REDUCE, {"environment": ""})],
        },
    )
    assert category.workload_labels == {"environment": "", "team": "a"}


def numbered_labels(count: int, prefix: str = "label") -> dict[str, str]:
    return {f"{prefix}-{number:02d}": "x" for number in range(count)}


@pytest.mark.parametrize(
    ("global_count", "category_count", "gang", "ok"),
    [
        pytest.param(32, 0, KAI, False, id="32-user-labels-plus-the-queue-label-fail"),
        pytest.param(31, 0, KAI, True, id="31-user-labels-plus-the-queue-label-fit"),
        pytest.param(32, 0, None, True, id="32-user-labels-without-a-gang-scheduler-fit"),
        pytest.param(16, 17, None, False, id="33-labels-after-merging-two-levels-fail"),
    ],
)
def test_at_most_32_workload_labels_are_allowed_after_merging_and_inserting_the_queue_label(
    catalog: Catalog, global_count: int, category_count: int, gang: dict[str, str] | None, ok: bool
) -> None:
    category: dict[str, Any] = ALL_REDUCE
    if category_count:
        category = with_labels(ALL_REDUCE, numbered_labels(category_count, "category"))
    spec: dict[str, Any] = {"workloadMetadata": {"labels": numbered_labels(global_count)}, "categories": [category]}
    if gang:
        spec["gangScheduler"] = gang
    resolved, errors = resolve_certification(certification_spec(spec), catalog)
    if ok:
        assert errors == []
        assert len(resolved[0].workload_labels) == global_count + category_count + (1 if gang else 0)
    else:
        assert [error.kind for error in errors] == ["too-many-labels"]
        expected_path = "spec.categories[0].options" if category_count else "spec"
        assert format_path(errors[0].path) == f"{expected_path}.workloadMetadata.labels"
        assert "32" in errors[0].message


# --- option inheritance ----------------------------------------------------------------------------------------


def test_per_category_thresholds_replace_the_global_map_wholesale(catalog: Catalog) -> None:
    overriding, inheriting = resolve_ok(
        catalog,
        {
            "thresholds": {"busBandwidthGBps": "value >= 300", "algBandwidthGBps": "value >= 200"},
            "categories": [{**ALL_REDUCE, "options": {"thresholds": {"busBandwidthGBps": "value >= 350"}}}, ALL_GATHER],
        },
    )
    assert overriding.thresholds == {"busBandwidthGBps": "value >= 350"}
    assert inheriting.thresholds == {"busBandwidthGBps": "value >= 300", "algBandwidthGBps": "value >= 200"}


def test_per_category_resources_replace_the_global_resources_wholesale(catalog: Catalog) -> None:
    (category,) = resolve_ok(
        catalog,
        {
            "resources": {"limits": {"cpu": "16", "memory": "64Gi"}, "requests": {"cpu": "8", "memory": "32Gi"}},
            "categories": [{**NEMOTRON, "options": {"resources": {"limits": {"memory": "900Gi"}}}}],
        },
    )
    # Nothing of the global value survives: the other three values are the training defaults, not 16/8/32Gi.
    assert category.resources is not None
    assert category.resources.limits == {"cpu": "128", "memory": "900Gi"}
    assert category.resources.requests == DEFAULT_REQUESTS


def test_per_category_image_pull_secrets_replace_the_global_list_wholesale(catalog: Catalog) -> None:
    overriding, inheriting = resolve_ok(
        catalog,
        {
            "imagePullSecrets": [{"name": "global-a"}, {"name": "global-b"}],
            "categories": [{**ALL_REDUCE, "options": {"imagePullSecrets": [{"name": "own"}]}}, ALL_GATHER],
        },
    )
    assert overriding.image_pull_secrets == ["own"]
    assert inheriting.image_pull_secrets == ["global-a", "global-b"]


def test_an_unset_category_option_inherits_the_global_value_and_a_set_one_wins(catalog: Catalog) -> None:
    overriding, inheriting = resolve_ok(
        catalog,
        {
            "image": "registry.example.com/global:1",
            "timeoutPerJob": "2h",
            "categories": [{**ALL_REDUCE, "options": {"image": "registry.example.com/own:1"}}, ALL_GATHER],
        },
    )
    assert (overriding.image, overriding.timeout_per_job) == ("registry.example.com/own:1", "2h")
    assert (inheriting.image, inheriting.timeout_per_job) == ("registry.example.com/global:1", "2h")


def test_without_timeout_per_job_the_catalog_default_applies(catalog: Catalog) -> None:
    """§3.3 timeoutPerJob: 1h by default; catalog meta dcgm-level4 2h, nemotron5-8b 24h."""
    all_reduce, dcgm4, nemotron = resolve_ok(catalog, {"categories": [ALL_REDUCE, DCGM4, NEMOTRON]})
    assert (all_reduce.timeout_per_job, dcgm4.timeout_per_job, nemotron.timeout_per_job) == ("1h", "2h", "24h")


def test_measurement_timeout_is_the_categorys_over_the_global_over_the_reference_default_5m(catalog: Catalog) -> None:
    """§3.3 measurementTimeout: 5m by default; a category's value replaces the global one."""
    (default,) = resolve_ok(catalog, {"categories": [ALL_REDUCE]})
    inheriting, overriding = resolve_ok(
        catalog,
        {
            "measurementTimeout": "20s",
            "categories": [ALL_REDUCE, {**NEMOTRON, "options": {"measurementTimeout": "2m30s"}}],
        },
    )
    assert (default.measurement_timeout, default.measurement_wait_seconds) == ("5m", 300)
    assert (inheriting.measurement_timeout, inheriting.measurement_wait_seconds) == ("20s", 20)
    assert (overriding.measurement_timeout, overriding.measurement_wait_seconds) == ("2m30s", 150)


def test_a_category_whose_verdict_is_the_exit_code_never_waits_for_a_measurement(catalog: Catalog) -> None:
    (dcgm4,) = resolve_ok(catalog, {"measurementTimeout": "10m", "categories": [DCGM4]})
    assert (dcgm4.measurement_timeout, dcgm4.measurement_wait_seconds) == ("10m", 0)


def test_the_resolved_measurement_timeout_reaches_the_steps_through_the_category_argument(catalog: Catalog) -> None:
    (category,) = resolve_ok(catalog, {"categories": [{**ALL_REDUCE, "options": {"measurementTimeout": "45s"}}]})
    argument = json.loads(category_arguments(category))
    assert argument["measurementTimeout"] == "45s"
    assert parse_category(category_arguments(category)).measurement_wait_seconds == 45
    # A Workflow compiled before the option existed carries no value: the steps read the reference default.
    del argument["measurementTimeout"]
    assert parse_category(json.dumps(argument)).measurement_timeout == "5m"


@pytest.mark.parametrize("value", ["hostPath", "devicePlugin"])
def test_rdma_device_access_is_inherited_and_replaced_like_every_option(catalog: Catalog, value: str) -> None:
    other = "devicePlugin" if value == "hostPath" else "hostPath"
    inheriting, overriding = resolve_ok(
        catalog,
        {"rdmaDeviceAccess": value, "categories": [ALL_REDUCE, {**NEMOTRON, "options": {"rdmaDeviceAccess": other}}]},
    )
    assert (inheriting.options.rdma_device_access, overriding.options.rdma_device_access) == (value, other)


# --- resources -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("side", "name", "value"),
    [
        pytest.param("limits", "cpu", "100", id="only-limits-cpu"),
        pytest.param("limits", "memory", "900Gi", id="only-limits-memory"),
        pytest.param("requests", "cpu", "32", id="only-requests-cpu"),
        pytest.param("requests", "memory", "100Gi", id="only-requests-memory"),
    ],
)
def test_each_of_the_four_resource_values_falls_back_to_its_default_independently(
    catalog: Catalog, side: str, name: str, value: str
) -> None:
    (category,) = resolve_ok(catalog, {"categories": [{**NEMOTRON, "options": {"resources": {side: {name: value}}}}]})
    expected: dict[str, Any] = {"limits": dict(DEFAULT_LIMITS), "requests": dict(DEFAULT_REQUESTS)}
    expected[side][name] = value
    expected["explicit"] = (f"{side}.{name}",)
    assert category.resources is not None
    assert category.resources.model_dump() == expected


def test_resolved_training_resources_reach_the_training_container(catalog: Catalog) -> None:
    (category,) = resolve_ok(
        catalog, {"categories": [{**NEMOTRON, "options": {"resources": {"limits": {"cpu": 100}}}}]}
    )
    runtime, _ = render_pair(category)
    (node,) = pods.replicated_jobs(runtime["spec"])
    resources = pods.pod_spec(node)["containers"][0]["resources"]
    assert resources["limits"] == {"cpu": "100", "memory": "800Gi", "nvidia.com/gpu": 8}
    assert resources["requests"] == {"cpu": "64", "memory": "500Gi", "nvidia.com/gpu": 8}


@pytest.mark.parametrize(
    ("where", "resources", "path"),
    [
        pytest.param(
            "category",
            {"limits": {"cpu": "8"}},
            "spec.categories[0].options.resources.requests.cpu",
            id="category-limit-below-the-default-cpu-request",
        ),
        pytest.param(
            "global",
            {"requests": {"memory": "900Gi"}},
            "spec.resources.requests.memory",
            id="global-request-above-the-default-memory-limit",
        ),
    ],
)
def test_a_request_above_its_limit_once_defaults_are_applied_is_an_error_naming_the_path(
    catalog: Catalog, where: str, resources: dict[str, Any], path: str
) -> None:
    if where == "global":
        spec: dict[str, Any] = {"resources": resources, "categories": [NEMOTRON]}
    else:
        spec = {"categories": [{**NEMOTRON, "options": {"resources": resources}}]}
    errors = resolve_errors(catalog, spec)
    assert path_kinds(errors) == [(path, "rule")]
    name = path.rsplit(".", 1)[1]
    assert f"requests.{name} must not exceed limits.{name}" in errors[0].message


def test_non_training_entries_ignore_resources(catalog: Catalog) -> None:
    (category,) = resolve_ok(catalog, {"resources": {"limits": {"cpu": "1"}}, "categories": [ALL_REDUCE]})
    assert category.resources is None
    runtime, _ = render_pair(category)
    node = next(pods.replicated_jobs(runtime["spec"]))
    assert set(pods.pod_spec(node)["containers"][0]["resources"]["limits"]) == {"nvidia.com/gpu"}


# --- categories and thresholds ---------------------------------------------------------------------------------


def test_an_unknown_variant_is_an_error_listing_the_known_variants_of_its_domain(catalog: Catalog) -> None:
    errors = resolve_errors(catalog, {"categories": [{"domain": "communication", "variant": "nccl-all-reduse"}]})
    assert path_kinds(errors) == [("spec.categories[0]", "unknown-category")]
    assert '"communication/nccl-all-reduse"' in errors[0].message
    for variant in ("nccl-all-reduce", "nccl-all-gather", "nccl-alltoall", "nccl-loopback", "nccl-loopback-nvswitch"):
        assert f"communication/{variant}" in errors[0].message


def test_an_unknown_domain_is_an_error_listing_every_known_category(catalog: Catalog) -> None:
    errors = resolve_errors(catalog, {"categories": [{"domain": "compute", "variant": "cutlass-gemm"}]})
    assert path_kinds(errors) == [("spec.categories[0]", "unknown-category")]
    for key in ("communication/nccl-all-reduce", "diagnostics/dcgm-level4", "training/nemotron5-56b"):
        assert key in errors[0].message


@pytest.mark.parametrize(
    ("where", "path"),
    [
        pytest.param("global", "spec.thresholds", id="global"),
        pytest.param("category", "spec.categories[0].options.thresholds", id="category"),
    ],
)
def test_an_unknown_threshold_key_fails_with_the_reference_message(catalog: Catalog, where: str, path: str) -> None:
    thresholds = {"x": "value > 1", "busBandwidthGBps": "value >= 300"}
    if where == "global":
        spec: dict[str, Any] = {"thresholds": thresholds, "categories": [ALL_REDUCE]}
    else:
        spec = {"categories": [{**ALL_REDUCE, "options": {"thresholds": thresholds}}]}
    errors = resolve_errors(catalog, spec)
    assert rendered(errors) == [f"{path}: unknown threshold key(s) [x]; valid keys: {VALID_THRESHOLD_KEYS}"]


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        pytest.param("value >=", None, id="does-not-compile"),
        pytest.param("value + 1.0", "bool", id="returns-a-number"),
        pytest.param("'fast'", "bool", id="returns-a-string"),
    ],
)
def test_a_threshold_that_does_not_compile_or_does_not_return_bool_is_an_error(
    catalog: Catalog, expression: str, problem: str | None
) -> None:
    errors = resolve_errors(catalog, {"thresholds": {"busBandwidthGBps": expression}, "categories": [ALL_REDUCE]})
    assert path_kinds(errors) == [('spec.thresholds["busBandwidthGBps"]', "invalid-threshold")]
    assert errors[0].message.startswith('Threshold "busBandwidthGBps": ')
    if problem:
        assert problem in errors[0].message


def test_a_valid_threshold_is_kept(catalog: Catalog) -> None:
    (category,) = resolve_ok(
        catalog, {"thresholds": {"busBandwidthGBps": "value >= 300.0"}, "categories": [ALL_REDUCE]}
    )
    assert category.thresholds == {"busBandwidthGBps": "value >= 300.0"}


def test_every_error_of_every_category_is_reported_in_category_order(catalog: Catalog) -> None:
    errors = resolve_errors(
        catalog,
        {
            "gangScheduler": KAI,
            "categories": [
                {"domain": "communication", "variant": "nope"},
                with_labels(ALL_GATHER, {KAI_KEY: "team-b"}),
                {
                    **NEMOTRON,
                    "options": {"resources": {"limits": {"cpu": "8"}}, "thresholds": {"x": "value > 1"}},
                },
                {**ALL_REDUCE, "options": {"thresholds": {"busBandwidthGBps": "value +"}}},
            ],
        },
    )
    assert path_kinds(errors) == [
        ("spec.categories[0]", "unknown-category"),
        ('spec.categories[1].options.workloadMetadata.labels["kai.scheduler/queue"]', "queue-conflict"),
        ("spec.categories[2].options.resources.requests.cpu", "rule"),
        ("spec.categories[2].options.thresholds", "unknown-threshold"),
        ('spec.categories[3].options.thresholds["busBandwidthGBps"]', "invalid-threshold"),
    ]


# --- GPU defaults (§6.4) ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("architecture", "expected"),
    [
        pytest.param("h100", (8, 8, "16G", False), id="h100"),
        pytest.param("h200", (8, 8, "16G", False), id="h200"),
        pytest.param("a100", (8, 8, "16G", False), id="a100"),
        pytest.param("l40s", (8, 8, "16G", False), id="l40s"),
        pytest.param("b200", (8, 8, "16G", False), id="b200"),
        pytest.param("b300", (8, 8, "16G", False), id="b300"),
        pytest.param("l40", (8, 4, "16G", False), id="l40"),
        pytest.param("gb200", (4, 8, "32G", True), id="gb200"),
        pytest.param("gb300", (4, 8, "32G", True), id="gb300"),
        pytest.param("rtxpro6000", (8, 0, "16G", False), id="rtxpro6000"),
        pytest.param(None, (4, 0, "16G", False), id="no-architecture"),
        pytest.param("h800", (4, 0, "16G", False), id="an-architecture-missing-from-the-table"),
    ],
)
def test_gpu_dependent_values_follow_the_gpu_defaults_table(
    catalog: Catalog, architecture: str | None, expected: tuple[int, int, str, bool]
) -> None:
    """(gpusPerNode, mlnxPerNode, maxBytes, MNNVL) per architecture key."""
    (category,) = resolve_ok(catalog, {"categories": [ALL_REDUCE]})
    values = gpu_values(category, architecture)
    assert (values.gpus_per_node, values.mlnx_per_node, values.max_bytes, values.mnnvl) == expected
    defaults = defaults_for(architecture)
    assert (defaults.gpus_per_node, defaults.mlnx_per_node) == expected[:2]


@pytest.mark.parametrize("architecture", ["gb200", "h100", None], ids=["gb200", "h100", "no-architecture"])
def test_the_users_gpu_options_win_over_the_architecture_defaults(catalog: Catalog, architecture: str | None) -> None:
    (category,) = resolve_ok(
        catalog,
        {
            "categories": [
                {
                    **ALL_REDUCE,
                    "options": {"gpusPerNode": 2, "mlnxPerNode": 0, "maxBytes": "1G", "enableMNNVL": False},
                }
            ]
        },
    )
    values = gpu_values(category, architecture)
    assert (values.gpus_per_node, values.mlnx_per_node, values.max_bytes, values.mnnvl) == (2, 0, "1G", False)


def test_mnnvl_can_be_turned_on_where_the_architecture_default_is_off(catalog: Catalog) -> None:
    (category,) = resolve_ok(catalog, {"enableMNNVL": True, "categories": [ALL_REDUCE]})
    assert gpu_values(category, "h100").mnnvl is True


@pytest.mark.parametrize(
    ("architecture", "tensor"),
    [
        pytest.param("h100", 2, id="h100-tp2"),
        pytest.param("a100", 8, id="a100-tp8"),
        pytest.param("l40", 4, id="l40-tp4"),
        pytest.param("l40s", 4, id="l40s-tp4"),
        pytest.param("gb200", 1, id="gb200-default-tp1"),
        pytest.param(None, 1, id="unknown-default-tp1"),
    ],
)
def test_nemotron5_8b_tensor_parallelism_follows_the_architecture(
    catalog: Catalog, architecture: str | None, tensor: int
) -> None:
    """§6.3 nemotron5-8b: default TP1/PP1; h100 TP2; a100 TP8; l40/l40s TP4."""
    (category,) = resolve_ok(catalog, {"categories": [NEMOTRON]})
    values = gpu_values(category, architecture)
    assert (values.tensor_parallel, values.pipeline_parallel) == (tensor, 1)


@pytest.mark.parametrize(
    ("product", "architecture"),
    [
        ("NVIDIA-H100-80GB-HBM3", "h100"),
        ("NVIDIA-GB200", "gb200"),
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-L40", "l40"),
        ("NVIDIA-B300-SXM6-AC", "b300"),
        ("NVIDIA-A100-SXM4-80GB", "a100"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "rtxpro6000"),
        ("NVIDIA-H200", "h200"),
        ("NVIDIA-B200", "b200"),
        ("NVIDIA-GB300", "gb300"),
        ("Tesla-T4", None),
        ("NVIDIA-A10G", None),
        ("NVIDIA-L4", None),
    ],
)
def test_architecture_of_maps_real_gpu_product_labels_to_table_keys(product: str, architecture: str | None) -> None:
    assert architecture_of(product) == architecture


def test_a_gh200_superchip_is_an_unknown_architecture_not_an_h200() -> None:
    assert architecture_of("NVIDIA-GH200-480GB") is None


def _resolve_errors(spec_text: str) -> set[tuple[str, str, str]]:
    from nvcre_argo.catalog.loader import load_catalog
    from nvcre_argo.errors import format_path
    from nvcre_argo.loading import load_certifications
    from nvcre_argo.resolve.category import resolve_certification

    document = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Certification\nmetadata: {name: t}\n" + spec_text
    (loaded,) = load_certifications(document, "t.yaml")
    _, errors = resolve_certification(loaded.certification.spec, load_catalog())
    return {(format_path(error.path), error.kind, error.message) for error in errors}


def test_diagnose_and_impossible_unpinned_placements_are_refused_at_compile_time() -> None:
    errors = _resolve_errors(
        "spec:\n  target: {}\n  placement: Unpinned\n  categories:\n"
        "  - {domain: communication, variant: nccl-all-reduce, options: {testScale: diagnose, nodesPerJob: 2}}\n"
        "  - {domain: diagnostics, variant: dcgm-level1}\n"
    )

    assert {(path, kind) for path, kind, _ in errors} == {
        ("spec.placement", "rule"),
        ("spec.categories[1]", "required"),
    }
    messages = {message for _, _, message in errors}
    assert "placement Unpinned cannot be combined with diagnostics/dcgm-level1, which runs one node per group" in (
        messages
    )
    assert "placement Unpinned cannot be combined with testScale diagnose" in messages


def test_diagnose_is_refused_where_no_multi_node_collective_runs() -> None:
    errors = _resolve_errors(
        "spec:\n  target: {}\n  categories:\n"
        "  - {domain: diagnostics, variant: dcgm-level1, options: {testScale: diagnose}}\n"
        "  - {domain: communication, variant: nccl-loopback, options: {testScale: diagnose}}\n"
        "  - {domain: communication, variant: nccl-all-reduce, options: {testScale: diagnose, minGroupSize: 3}}\n"
    )

    assert [(path, kind) for path, kind, _ in sorted(errors)] == [
        ("spec.categories[0].options.testScale", "unsupported"),
        ("spec.categories[1].options.testScale", "unsupported"),
    ]


def test_unpinned_without_nodes_per_job_is_one_error_per_category_naming_it_at_its_path() -> None:
    errors = _resolve_errors(
        "spec:\n  target: {}\n  placement: Unpinned\n  categories:\n"
        "  - {domain: communication, variant: nccl-all-reduce}\n"
        "  - {domain: communication, variant: nccl-all-gather, options: {nodesPerJob: 4}}\n"
        "  - {domain: training, variant: nemotron5-8b}\n"
    )

    # Issue 12 item 4(b): the reference names each offending category; a global placement is fine for the
    # category that sets its own nodesPerJob, so the error is the category's, not spec.placement's.
    assert sorted((path, kind) for path, kind, _ in errors) == [
        ("spec.categories[0]", "required"),
        ("spec.categories[2]", "required"),
    ]
    by_path = {path: message for path, _, message in errors}
    assert by_path["spec.categories[0]"].startswith(
        "communication/nccl-all-reduce: placement Unpinned requires an explicit nodesPerJob"
    )
    assert by_path["spec.categories[2]"].startswith(
        "training/nemotron5-8b: placement Unpinned requires an explicit nodesPerJob"
    )


def test_a_global_nodes_per_job_satisfies_a_global_unpinned_placement() -> None:
    assert (
        _resolve_errors(
            "spec:\n  target: {}\n  placement: Unpinned\n  nodesPerJob: 2\n  categories:\n"
            "  - {domain: communication, variant: nccl-all-reduce}\n"
        )
        == set()
    )


def test_an_unpinned_category_with_nodes_per_job_resolves() -> None:
    assert (
        _resolve_errors(
            "spec:\n  target: {}\n  categories:\n"
            "  - {domain: communication, variant: nccl-all-reduce, options: {placement: Unpinned, nodesPerJob: 4}}\n"
        )
        == set()
    )
