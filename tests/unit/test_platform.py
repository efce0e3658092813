"""Platform detection, platform arm data and arm matching (docs/platforms.md (a), (b0)-(b9)).

Detection is checked against every providerID form in the reference table, traps included (metal3, kubevirt
with and without the TogetherAI label, empty providerID with and without Forge's hostname or site label);
the arm loader refuses a bad file naming the file and the field; the built-in arms are checked for which of
them apply to each platform and GPU, in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nvcre_argo.cli.main import cli
from nvcre_argo.errors import CatalogError
from nvcre_argo.plan.model import Plan, PlanError, PlatformChoice
from nvcre_argo.plan.platform import detect_nic_resource, platform_gpu_values, select_arms
from nvcre_argo.plan.slices import architecture_from_slices
from nvcre_argo.platform.apply import ArmContext, matching_arms
from nvcre_argo.platform.arms import load_builtin_arms, load_extra_arms, merge_arms, parse_arm_file
from nvcre_argo.platform.detect import Detection, PlatformError, detect_platform, platform_of
from tests.unit.test_plan import ALL_REDUCE, resolve

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED_EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}


def node(name: str, provider_id: str | None, **labels: str) -> dict[str, Any]:
    spec = {} if provider_id is None else {"providerID": provider_id}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


# --- detection -------------------------------------------------------------------------------------------------

PROVIDER_IDS = {
    "aws": ("aws:///us-east-1a/i-0123456789abcdef0", {}, "aws"),
    "gce": ("gce://my-project/us-central1-a/gke-pool-a3-1", {}, "gcp"),
    "azure": (
        "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/"
        "aks-gpu-1/virtualMachines/0",
        {},
        "azure",
    ),
    "oci": ("ocid1.instance.oc1.iad.anuwcljt0000", {}, "oci"),
    "nscale": ("nscale://region-1/3f2a", {}, "nscale"),
    "openstack": ("openstack:///9f0e8c36-0000", {}, "onprem"),
    "kubevirt-together": ("kubevirt://vm-gpu-1", {"node-role.together.ai/worker": ""}, "togetherai"),
    "kubevirt-without-label": ("kubevirt://vm-gpu-1", {}, "onprem"),
    "metal3-is-mistral": ("metal3://capi-system/bmh-gpu-1/gpu-1", {}, "mistral"),
    "empty-forge-hostname": ("", {"kubernetes.io/hostname": "sjc4-forge-gpu-07"}, "forge"),
    "empty-forge-site": ("", {"nke.nvidia.com/site-name": "sjc4"}, "forge"),
    "empty-bcm": ("", {"kubernetes.io/hostname": "dgx-a-07"}, "onprem"),
    "absent": (None, {}, "onprem"),
    "unlisted-vsphere": ("vsphere://4204a1b2-0000", {}, "onprem"),
    "unlisted-kind": ("kind://docker/kind/kind-worker", {}, "onprem"),
}


@pytest.mark.parametrize(("provider_id", "labels", "expected"), PROVIDER_IDS.values(), ids=PROVIDER_IDS.keys())
def test_the_detection_rules_pick_the_reference_platform_for_each_provider_id_form(
    provider_id: str | None, labels: dict[str, str], expected: str
) -> None:
    assert platform_of(node("n1", provider_id, **labels)) == expected


def test_nodes_that_agree_give_their_platform_and_common_instance_type() -> None:
    nodes = [
        node(f"n{index}", f"aws:///us-east-1a/i-{index}", **{"node.kubernetes.io/instance-type": "p5.48xlarge"})
        for index in range(3)
    ]

    assert detect_platform(nodes) == Detection(platform="aws", instance_type="p5.48xlarge")


def test_mixed_instance_types_leave_the_instance_type_unknown() -> None:
    nodes = [
        node("a", "aws:///x/i-1", **{"node.kubernetes.io/instance-type": "p5.48xlarge"}),
        node("b", "aws:///x/i-2", **{"node.kubernetes.io/instance-type": "p5en.48xlarge"}),
    ]

    assert detect_platform(nodes) == Detection(platform="aws", instance_type=None)


def test_nodes_on_two_platforms_are_an_error_naming_both() -> None:
    nodes = [node("gpu-b", "aws:///x/i-1"), node("gpu-a", "gce://p/z/n"), node("gpu-c", "aws:///x/i-2")]

    with pytest.raises(PlatformError) as raised:
        detect_platform(nodes)

    assert str(raised.value) == (
        "heterogeneous platforms detected: aws (e.g. node gpu-b), gcp (e.g. node gpu-a); "
        "target one platform per Certification"
    )


def test_no_nodes_detect_no_platform() -> None:
    assert detect_platform([]) is None


def test_a_heterogeneous_target_fails_the_plan_with_the_category() -> None:
    from nvcre_argo.plan.planner import plan_category
    from tests.unit.test_plan import make_node

    nodes = [
        {**make_node("a"), "spec": {"providerID": "aws:///x/i-1"}},
        {**make_node("b"), "spec": {"providerID": "ocid1.instance.oc1.x"}},
    ]

    with pytest.raises(PlanError, match=r"^communication/nccl-all-reduce: heterogeneous platforms detected: aws"):
        plan_category(nodes, resolve(ALL_REDUCE))


# --- GPU architecture from DRA ResourceSlices -------------------------------------------------------------------


def gpu_slice(node_name: str, *products: str, driver: str = "gpu.nvidia.com", kind: str = "gpu") -> dict[str, Any]:
    devices = [
        {"name": f"gpu-{index}", "attributes": {"productName": {"string": product}, "type": {"string": kind}}}
        for index, product in enumerate(products)
    ]
    return {"spec": {"driver": driver, "nodeName": node_name, "devices": devices}}


def test_the_architecture_of_label_less_nodes_comes_from_their_gpu_slices() -> None:
    slices = [
        gpu_slice("n1", "NVIDIA GB300", "NVIDIA GB300"),
        gpu_slice("n2", "NVIDIA GB300"),
        gpu_slice("n3", "NVIDIA B200"),
        gpu_slice("elsewhere", "NVIDIA B200"),
        gpu_slice("elsewhere-2", "NVIDIA B200"),
    ]

    assert architecture_from_slices(slices, ["n1", "n2", "n3"]) == "gb300"


def test_vfio_devices_other_drivers_and_unknown_products_do_not_vote() -> None:
    slices = [
        gpu_slice("n1", "NVIDIA H100 80GB HBM3", kind="vfio"),
        gpu_slice("n1", "NVIDIA H100 80GB HBM3", driver="rdma.nscale.com"),
        gpu_slice("n2", "Some Accelerator"),
    ]

    assert architecture_from_slices(slices, ["n1", "n2"]) is None


# --- on-prem NIC resource -------------------------------------------------------------------------------------


def nic_node(**allocatable: str) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "status": {"allocatable": allocatable}}


def test_the_one_nic_resource_every_node_has_enough_of_is_chosen() -> None:
    nodes = [nic_node(**{"rdma/ib": "8", "nvidia.com/gpu": "4"}), nic_node(**{"rdma/ib": "16", "rdma/roce": "2"})]

    assert detect_nic_resource(nodes, 8) == "rdma/ib"


@pytest.mark.parametrize(
    ("allocatable", "count"),
    [
        pytest.param([{"rdma/ib": "8", "nvidia.com/mlnxnics": "8"}], 8, id="two-candidates-never-a-guess"),
        pytest.param([{"rdma/ib": "8"}, {"rdma/ib": "4"}], 8, id="one-node-short"),
        pytest.param([{"rdma/ib": "8"}], 0, id="mlnx-per-node-zero-opts-out"),
        pytest.param([{"example.com/nic": "8"}], 8, id="not-a-nic-name"),
    ],
)
def test_no_nic_resource_is_chosen_when_the_choice_is_not_clear(allocatable: list[dict[str, str]], count: int) -> None:
    assert detect_nic_resource([nic_node(**item) for item in allocatable], count) is None


# --- arm files ---------------------------------------------------------------------------------------------------


def test_the_built_in_arms_load_and_have_unique_names() -> None:
    arms = load_builtin_arms()
    names = [arm.name for arm in arms]

    assert len(names) == len(set(names))
    assert names[0] == "gb-compute-domain"
    assert {"aws-efa-nccl-tests", "gcp-a3-mega-tcpxo", "gcp-a4x-rdma", "azure-ib", "oci-roce", "onprem-gb-ib"} <= set(
        names
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "arms:\n- name: x\n  description: d\n  when: {platform: {equls: aws}}\n  patch: {}\n",
            "bad.yaml: arms[0].when.platform.equls: unknown field",
            id="unknown-matcher-key",
        ),
        pytest.param(
            "arms:\n- name: Bad_Name\n  description: d\n  patch: {}\n",
            "bad.yaml: arms[0].name: ",
            id="name-not-a-dns-label",
        ),
        pytest.param(
            "arms:\n- name: x\n  description: d\n  patch: {values: {mpiexec: /bin/x}}\n",
            "bad.yaml: arms[0].patch.values.mpiexec",
            id="unknown-placeholder-value",
        ),
        pytest.param(
            "arms:\n- name: x\n  description: d\n  when: {instanceType: {pattern: 'p5('}}\n  patch: {}\n",
            "bad.yaml: arms[0].when.instanceType.pattern: ",
            id="pattern-not-a-regex",
        ),
        pytest.param(
            "arms:\n- name: x\n  description: d\n  patch: {mlnxPerNode: -1}\n",
            "bad.yaml: arms[0].patch.mlnxPerNode: ",
            id="negative-nic-count",
        ),
        pytest.param("arms: []\n", "bad.yaml: arms: ", id="no-arms"),
        pytest.param("- a\n- b\n", "bad.yaml: a platform arm file must hold exactly one mapping", id="not-a-mapping"),
        pytest.param("arms: [\n", "bad.yaml: invalid YAML", id="yaml-syntax"),
    ],
)
def test_a_bad_arm_file_is_refused_naming_its_file_and_field(text: str, message: str) -> None:
    with pytest.raises(CatalogError) as raised:
        parse_arm_file(text, "bad.yaml")

    assert str(raised.value).startswith(message), str(raised.value)


def write_arms(directory: Path, name: str, text: str) -> Path:
    (directory / "_platform").mkdir(parents=True, exist_ok=True)
    (directory / "_platform" / name).write_text(text, encoding="utf-8")
    return directory


def test_an_extra_arm_with_a_built_in_name_replaces_it_in_place_and_a_new_one_is_appended(tmp_path: Path) -> None:
    write_arms(
        tmp_path,
        "site.yaml",
        "arms:\n"
        "- name: azure-ib\n  description: site NIC name\n  when: {platform: {equals: azure}}\n"
        "  patch: {workerResources: {limits: {rdma/ib: 1}, requests: {rdma/ib: 1}}}\n"
        "- name: site-extra\n  description: new\n  patch: {env: {SITE: '1'}}\n",
    )
    builtin = load_builtin_arms()

    merged = merge_arms(builtin, load_extra_arms([tmp_path]))

    names = [arm.name for arm in merged]
    assert names == [*[arm.name for arm in builtin], "site-extra"]
    replaced = merged[names.index("azure-ib")].patch.worker_resources
    assert replaced is not None
    assert replaced.limits == {"rdma/ib": 1}


def test_a_directory_without_platform_arms_adds_none(tmp_path: Path) -> None:
    assert load_extra_arms([tmp_path]) == ()


def test_a_duplicate_arm_name_within_a_directory_is_refused(tmp_path: Path) -> None:
    arm = "arms:\n- name: twice\n  description: d\n  patch: {}\n"
    write_arms(tmp_path, "a.yaml", arm)
    write_arms(tmp_path, "b.yaml", arm)

    with pytest.raises(CatalogError, match=r"b\.yaml: arms\[0\]\.name: arm 'twice' is also defined in .*a\.yaml"):
        load_extra_arms([tmp_path])


def test_resolve_refuses_a_bad_arm_file_from_catalog_with_its_file_and_field(tmp_path: Path) -> None:
    write_arms(tmp_path, "broken.yaml", "arms:\n- name: x\n  description: d\n  patch: {bogus: 1}\n")

    result = CliRunner().invoke(cli, ["resolve", str(SEED_EXAMPLE), "--catalog", str(tmp_path)])

    assert result.exit_code == 1
    assert f"{tmp_path / '_platform'}/broken.yaml: arms[0].patch.bogus: unknown field" in result.stderr


# --- which built-in arms apply ---------------------------------------------------------------------------------

ARM_CASES = {
    "aws-h100-p5-nccl": ("aws", "h100", "p5.48xlarge", ALL_REDUCE, ["aws-efa-nccl-tests"]),
    "aws-h100-p5-training": ("aws", "h100", "p5.48xlarge", NEMOTRON, ["aws-efa-training-p5"]),
    "aws-h200-p5en-nccl": ("aws", "h200", "p5en.48xlarge", ALL_REDUCE, ["aws-efa-nccl-tests", "aws-efa-p5en"]),
    "aws-a100-p4d-nccl": ("aws", "a100", "p4d.24xlarge", ALL_REDUCE, ["aws-efa-nccl-tests", "aws-efa-p4d"]),
    "aws-gb200-nccl": (
        "aws",
        "gb200",
        "p6e-gb200.36xlarge",
        ALL_REDUCE,
        ["gb-compute-domain", "aws-gb200-efa", "aws-gb200-nccl-tests"],
    ),
    "aws-dcgm-gets-nothing": ("aws", "h100", "p5.48xlarge", DCGM, []),
    "gcp-a3-mega": ("gcp", "h100", "a3-megagpu-8g", ALL_REDUCE, ["gcp-a3-mega-tcpxo"]),
    "gcp-a3-mega-training": (
        "gcp",
        "h100",
        "a3-megagpu-8g",
        NEMOTRON,
        ["gcp-a3-mega-tcpxo", "gcp-a3-mega-tcpxo-training"],
    ),
    "gcp-a3-high-unsupported": ("gcp", "h100", "a3-highgpu-8g", ALL_REDUCE, []),
    "gcp-a4x-gb200": ("gcp", "gb200", "a4x-highgpu-4g", ALL_REDUCE, ["gb-compute-domain", "gcp-a4x-rdma"]),
    "azure-h100": ("azure", "h100", "Standard_ND96isr_H100_v5", ALL_REDUCE, ["azure-ib", "azure-ib-nccl-tests"]),
    "azure-a100": ("azure", "a100", "Standard_ND96asr_v4", ALL_REDUCE, ["azure-ib", "azure-ib-a100"]),
    "azure-h100-training": ("azure", "h100", None, NEMOTRON, ["azure-ib", "azure-ib-training"]),
    "oci-h100": ("oci", "h100", "BM.GPU.H100.8", ALL_REDUCE, ["oci-roce"]),
    "oci-gb300": ("oci", "gb300", "BM.GPU.GB300.4", ALL_REDUCE, ["gb-compute-domain", "oci-roce", "oci-gb300"]),
    "onprem-gb200": ("onprem", "gb200", None, ALL_REDUCE, ["gb-compute-domain", "onprem-gb-ib"]),
    "onprem-h100": ("onprem", "h100", None, ALL_REDUCE, []),
    "mistral-h100-generic-only": ("mistral", "h100", None, ALL_REDUCE, []),
    "mistral-gb300": ("mistral", "gb300", None, NEMOTRON, ["gb-compute-domain", "mistral-gb300-ib"]),
    "togetherai-any-gpu": ("togetherai", "a100", None, ALL_REDUCE, ["togetherai-ib"]),
    "forge-l40": ("forge", "l40", None, ALL_REDUCE, ["forge-l40-ib"]),
    "forge-l40-training-has-no-arm": ("forge", "l40", None, NEMOTRON, []),
    "forge-gb300": ("forge", "gb300", None, ALL_REDUCE, ["gb-compute-domain", "forge-gb-mpi-tcp"]),
    "gcp-a4x-gb300-training": ("gcp", "gb300", "a4x-highgpu-4g", NEMOTRON, ["gb-compute-domain", "gcp-a4x-rdma"]),
    "gcp-g4-eight-gpus": ("gcp", "rtxpro6000", "g4-standard-384", ALL_REDUCE, ["gcp-g4-tcp", "gcp-g4-p2p-8-gpus"]),
    "no-platform-gb200-offline": (None, "gb200", None, ALL_REDUCE, ["gb-compute-domain"]),
}


@pytest.mark.parametrize(
    ("platform", "architecture", "instance_type", "entry", "expected"), ARM_CASES.values(), ids=ARM_CASES.keys()
)
def test_the_built_in_arms_that_apply_to_each_platform_and_gpu_in_order(
    platform: str | None, architecture: str, instance_type: str | None, entry: dict[str, str], expected: list[str]
) -> None:
    category = resolve(entry)

    applied = select_arms(
        category, load_builtin_arms(), platform=platform, architecture=architecture, instance_type=instance_type
    )

    assert [arm.name for arm in applied] == expected


def test_the_compute_domain_arm_needs_mnnvl_on() -> None:
    category = resolve(ALL_REDUCE, enableMNNVL=False)

    applied = select_arms(category, load_builtin_arms(), platform="onprem", architecture="gb200")

    assert [arm.name for arm in applied] == ["onprem-gb-ib"]


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        pytest.param(8, ["gcp-g4-tcp", "gcp-g4-p2p-8-gpus"], id="eight-system-wide"),
        pytest.param(4, ["gcp-g4-tcp", "gcp-g4-p2p-2-4-gpus"], id="four-host-bridge"),
        pytest.param(2, ["gcp-g4-tcp", "gcp-g4-p2p-2-4-gpus"], id="two-host-bridge"),
        pytest.param(1, ["gcp-g4-tcp"], id="one-no-p2p-level"),
    ],
)
def test_the_g4_peer_to_peer_arm_follows_the_gpus_per_node_the_pods_request(gpus: int, expected: list[str]) -> None:
    category = resolve({**ALL_REDUCE, "options": {"gpusPerNode": gpus}})

    applied = select_arms(category, load_builtin_arms(), platform="gcp", architecture="rtxpro6000")

    assert [arm.name for arm in applied] == expected


def test_every_matcher_condition_must_hold() -> None:
    (arm,) = parse_arm_file(
        "arms:\n- name: x\n  description: d\n  when:\n    platform: {in: [aws, gcp], notIn: [gcp]}\n"
        "    instanceType: {pattern: 'p5.*'}\n  patch: {}\n",
        "x.yaml",
    )

    def matches(platform: str, instance_type: str | None) -> bool:
        context = ArmContext(platform=platform, gpu_architecture="h100", instance_type=instance_type, domain="d")
        return bool(matching_arms([arm], context))

    assert matches("aws", "p5.48xlarge")
    assert not matches("gcp", "p5.48xlarge")
    assert not matches("aws", "p4d.24xlarge")
    assert not matches("aws", None)


@pytest.mark.parametrize(
    ("architecture", "options", "expected"),
    [
        pytest.param("gb200", {}, 0, id="oci-gb200-no-nic-by-default"),
        pytest.param("gb300", {}, 4, id="oci-gb300-four"),
        pytest.param("l40s", {}, 2, id="oci-l40s-two"),
        pytest.param("h100", {}, 8, id="oci-h100-architecture-default"),
        pytest.param("gb200", {"mlnxPerNode": 8}, 8, id="explicit-option-wins"),
    ],
)
def test_oci_arms_set_the_platform_nic_count_unless_mlnx_per_node_is_set(
    architecture: str, options: dict[str, Any], expected: int
) -> None:
    category = resolve({**ALL_REDUCE, "options": options})
    applied = select_arms(category, load_builtin_arms(), platform="oci", architecture=architecture)

    assert platform_gpu_values(category, architecture, applied).mlnx_per_node == expected


# --- the plan records the platform -----------------------------------------------------------------------------


def test_a_plan_with_its_platform_round_trips_through_json() -> None:
    plan = Plan(
        architecture="h100",
        candidates=("a",),
        excluded=(),
        groups=(),
        platform=PlatformChoice(
            name="aws", source="detected", instance_type="p5.48xlarge", arms=("aws-efa-nccl-tests",)
        ),
    )

    assert Plan.from_json(plan.to_json()) == plan
    assert '"platform":{"arms":["aws-efa-nccl-tests"],"instanceType":"p5.48xlarge"' in plan.to_json()


def test_a_plan_without_a_platform_keeps_its_earlier_json() -> None:
    plan = Plan(architecture=None, candidates=(), excluded=(), groups=())

    assert "platform" not in plan.to_json()


def test_a_plan_with_an_unknown_platform_source_is_refused() -> None:
    text = Plan(architecture=None, candidates=(), excluded=(), groups=()).to_json()[:-1]
    text += ',"platform":{"name":"aws","source":"guessed","instanceType":null,"arms":[],"nicResource":null}}'

    with pytest.raises(PlanError, match=r"plan\.platform\.source: expected detected or pinned"):
        Plan.from_json(text)


# --- nvcre-compile --platform ------------------------------------------------------------------------------------


def compiled_categories(*arguments: str) -> list[Any]:
    """The categories `nvcre-compile` (with these options) hands to its steps, read back as the steps read
    their category argument. `resolve_for_run` is what compile uses (tests/unit/test_cli_plan.py)."""
    from nvcre_argo.catalog.loader import load_catalog
    from nvcre_argo.cli.compile import compile_command
    from nvcre_argo.compiler import CompileOptions, resolve_for_run
    from nvcre_argo.loading import load_certifications
    from nvcre_argo.render.certification_workflow import category_arguments
    from nvcre_argo.steps.context import parse_category

    result = CliRunner().invoke(compile_command, [str(SEED_EXAMPLE), *arguments], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    platform = arguments[arguments.index("--platform") + 1] if "--platform" in arguments else None
    catalog_dirs = [Path(arguments[arguments.index("--catalog") + 1])] if "--catalog" in arguments else []
    assert result.stdout.count(f'"platform": "{platform}"') == (2 if platform else 0)
    (loaded,) = load_certifications(SEED_EXAMPLE.read_text(encoding="utf-8"), str(SEED_EXAMPLE))
    options = CompileOptions(platform=platform, platform_arms=load_extra_arms(catalog_dirs))
    resolved = resolve_for_run(loaded, catalog=load_catalog(catalog_dirs), options=options)
    return [parse_category(category_arguments(category)) for category in resolved]


def test_compile_platform_pins_the_platform_the_plan_step_then_uses_instead_of_detecting() -> None:
    from nvcre_argo.plan.planner import plan_category
    from nvcre_argo.plan.platform import category_arms
    from tests.unit.test_plan import make_node

    pinned = compiled_categories("--platform", "aws")
    nodes = [make_node("a", labels={"node.kubernetes.io/instance-type": "p5.48xlarge"}), make_node("b")]

    assert {category.platform for category in pinned} == {"aws"}
    plan = plan_category(nodes, pinned[0], arms=category_arms(pinned[0]))
    assert plan.platform == PlatformChoice(
        name="aws", source="pinned", instance_type=None, arms=("aws-efa-nccl-tests",)
    )


def test_compile_without_platform_leaves_it_to_detection() -> None:
    assert {category.platform for category in compiled_categories()} == {None}


def test_compile_carries_catalog_platform_arms_into_the_workflow(tmp_path: Path) -> None:
    write_arms(tmp_path, "site.yaml", "arms:\n- name: site-nic\n  description: d\n  patch: {env: {SITE: '1'}}\n")

    categories = compiled_categories("--catalog", str(tmp_path))

    assert all([arm.name for arm in category.platform_arms or ()] == ["site-nic"] for category in categories)


# --- the result ConfigMaps and the report carry the platform ---------------------------------------------------


def test_both_result_configmaps_carry_the_platform_and_the_report_prints_it() -> None:
    from nvcre_argo.report.model import CategoryResults, build_report
    from nvcre_argo.report.render import render_json, render_text
    from nvcre_argo.results import (
        FailedNode,
        PlatformRecord,
        failed_nodes_configmap_manifest,
        read_failed_nodes,
        read_platform,
        succeeded_nodes_configmap_manifest,
    )
    from tests.unit.test_report import CERT, status_for

    record = PlatformRecord(platform="aws", arms=("aws-efa-nccl-tests", "aws-efa-p5en"), gpu_architecture="h200")
    failed = failed_nodes_configmap_manifest(
        "f", "ns", [FailedNode("n1", "ThresholdViolation", "m")], annotations=record.annotations()
    )
    succeeded = succeeded_nodes_configmap_manifest("s", "ns", ["n2"], annotations=record.annotations())

    assert read_platform(failed) == read_platform(succeeded) == record
    assert read_failed_nodes(failed) == [FailedNode("n1", "ThresholdViolation", "m")]
    assert failed["metadata"]["annotations"] == {
        "nvcre.nvidia.com/gpu-architecture": "h200",
        "nvcre.nvidia.com/platform": "aws",
        "nvcre.nvidia.com/platform-arms": "aws-efa-nccl-tests,aws-efa-p5en",
    }
    report = build_report(CERT, status_for("Succeeded", "Failed"), {0: CategoryResults(platform=record)})
    assert "  Platform:  aws, GPU h200, arms: aws-efa-nccl-tests, aws-efa-p5en\n" in render_text(report)
    assert '"platformArms": [' in render_json(report)


def test_a_result_configmap_written_before_platforms_has_no_platform_record() -> None:
    from nvcre_argo.results import read_platform, succeeded_nodes_configmap_manifest

    assert read_platform(succeeded_nodes_configmap_manifest("s", "ns", ["n2"])) is None


def test_resolve_with_a_platform_lists_the_arms_and_prints_the_compute_domain_of_a_gb200_category(
    tmp_path: Path,
) -> None:
    from nvcre_argo.yamlio import load_yaml_documents

    document = SEED_EXAMPLE.read_text(encoding="utf-8").replace("enableMNNVL: false", "enableMNNVL: true")
    (tmp_path / "cert.yaml").write_text(document, encoding="utf-8")

    result = CliRunner().invoke(
        cli,
        ["resolve", str(tmp_path / "cert.yaml"), "--gpu-arch", "gb200", "--platform", "gcp", "--category", "0"],
        catch_exceptions=False,
    )

    assert result.exit_code == 0, result.stderr
    summary, runtime, domain, trainjob = list(load_yaml_documents(result.stdout))
    assert summary["platform"] == {"name": "gcp", "instanceType": None, "arms": ["gb-compute-domain", "gcp-a4x-rdma"]}
    assert [runtime["kind"], domain["kind"], trainjob["kind"]] == ["TrainingRuntime", "ComputeDomain", "TrainJob"]
    assert domain["spec"]["channel"]["resourceClaimTemplate"]["name"] == f"{runtime['metadata']['name']}-channel"


def test_resolve_refuses_an_instance_type_without_a_platform() -> None:
    result = CliRunner().invoke(cli, ["resolve", str(SEED_EXAMPLE), "--instance-type", "p5.48xlarge"])

    assert result.exit_code == 2
    assert "--instance-type" in result.stderr


def test_on_prem_nic_detection_is_for_gb_and_blackwell_collectives_only() -> None:
    from nvcre_argo.plan.planner import plan_category
    from tests.unit.test_plan import make_node

    def planned_nic(product: str, gpus: str, entry: dict[str, str]) -> str | None:
        nodes = [make_node(f"n{index}", product=product, gpus=gpus) for index in range(2)]
        for item in nodes:
            item["status"]["allocatable"]["rdma/ib"] = "8"
        plan = plan_category(nodes, resolve(entry, enableMNNVL=False), arms=load_builtin_arms())
        assert plan.platform is not None
        return plan.platform.nic_resource

    assert planned_nic("NVIDIA-GB200", "4", ALL_REDUCE) == "rdma/ib"
    assert planned_nic("NVIDIA-B200", "8", NEMOTRON) == "rdma/ib"
    assert planned_nic("NVIDIA-H100-80GB-HBM3", "8", ALL_REDUCE) is None
    assert planned_nic("NVIDIA-GB200", "4", DCGM) is None
