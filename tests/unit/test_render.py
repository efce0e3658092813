"""Rendering: every catalog entry's TrainingRuntime and TrainJob, under every gang scheduler and option set.

Each rendered pair is validated STRICTLY against the pinned Kubeflow Trainer CRDs (tests/support/crd_schemas.py:
unknown fields are errors, not silently pruned), then checked against the certification rules the reference
states: `argo-hera-trainer.md` §3.5 (schedulerName, `restartPolicy: Never`, Job `backoffLimit: 0`), §3.2 (v2.2+
`runtimePatches`), §3.4 (TrainJob names ≤ 40); `nvcre-contract.md` §3.3 (image, imagePullSecrets, sourceRepo,
nicResourceName, mlnxPerNode, resources, placement, rdmaDeviceAccess), §3.4 (the gang scheduler replaces the
megatron entries' `default-scheduler`; queue label on Job and pod templates), §3.2 (taintSelectors replace the
blanket toleration), §6.3 (what each entry runs) and §6.4 (GPU defaults); CONVENTIONS.md "Determinism".
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.cli.main import cli
from nvcre_argo.loading import parse_certification
from nvcre_argo.names import trainjob_name
from nvcre_argo.render import pods
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.category import ResolvedCategory, resolve_certification
from nvcre_argo.resolve.values import gpu_values
from nvcre_argo.yamlio import dump_yaml, load_yaml_documents
from tests.support.crd_schemas import check_strict_schema, validation_errors

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED_EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
PATCH_MANAGER = "nvcre.nvidia.com/nvcre-argo"
HOSTNAME = "kubernetes.io/hostname"
RFC1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
OVERRIDE_IMAGE = "registry.example.com/certify/override:1.0"
SOURCE_REPO = "https://git.example.com/mirrors/Megatron-LM.git"
DEFAULT_SOURCE_REPO = "https://github.com/NVIDIA/Megatron-LM.git"
SOURCE_REPO_ENV = "NVCRE_SOURCE_REPO"
TAINTS = [
    {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "gpu-burn-in", "effect": "NoExecute"},
    {"key": "example.com/any-effect"},
]
EXACT_TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Equal", "value": "gpu-burn-in", "effect": "NoExecute"},
    {"key": "example.com/any-effect", "operator": "Exists"},
]
# §6.4: GPUs per node by architecture (unknown → the Go fallback of 4).
GPUS_PER_NODE = {"h100": 8, "gb200": 4, None: 4}
NIC_PER_NODE = {"h100": 8, "gb200": 8, None: 0}

GANGS: dict[str, dict[str, str] | None] = {
    "no-gang": None,
    "kai": {"schedulerName": "kai-scheduler", "queue": "burn-in"},
    "runai": {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue", "queue": "team-a"},
}
GANG_QUEUE_LABELS = {"kai": ("kai.scheduler/queue", "burn-in"), "runai": ("runai/queue", "team-a")}


@dataclass(frozen=True)
class OptionSet:
    options: dict[str, Any]
    architecture: str | None
    target: dict[str, Any]


OPTION_SETS: dict[str, OptionSet] = {
    "defaults-h100": OptionSet({}, "h100", {"nodeSelector": {"nvidia.com/gpu.present": "true"}}),
    "image-pull-secrets-source-repo-gb200": OptionSet(
        {"image": OVERRIDE_IMAGE, "imagePullSecrets": [{"name": "regcred"}], "sourceRepo": SOURCE_REPO},
        "gb200",
        {},
    ),
    "taints-nic-resources-unknown-arch": OptionSet(
        {
            "nicResourceName": "rdma/ib",
            "mlnxPerNode": 2,
            "resources": {"limits": {"cpu": "6", "memory": "48Gi"}, "requests": {"cpu": "4", "memory": "32Gi"}},
        },
        None,
        {"taintSelectors": TAINTS},
    ),
    "rdma-host-path-h100": OptionSet(
        {"rdmaDeviceAccess": "hostPath"}, "h100", {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
    ),
}


@functools.cache
def builtin_catalog() -> Catalog:
    return load_catalog()


ENTRY_KEYS = builtin_catalog().names()


def certification(spec: dict[str, Any]) -> Any:
    document = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "cert"}, "spec": spec}
    return parse_certification(document, "test.yaml")


def resolve_one(catalog: Catalog, spec: dict[str, Any]) -> ResolvedCategory:
    resolved, errors = resolve_certification(certification(spec).spec, catalog)
    assert [error.render() for error in errors] == []
    (category,) = resolved
    return category


@dataclass(frozen=True)
class Rendered:
    key: str
    gang: str
    option_set: str
    category: ResolvedCategory
    runtime: dict[str, Any]
    trainjob: dict[str, Any]
    nodes: tuple[str, ...]

    @property
    def options(self) -> OptionSet:
        return OPTION_SETS[self.option_set]


def group_nodes(category: ResolvedCategory) -> tuple[str, ...]:
    """A 2-node group; per-node entries run one node per TrainJob (§6.3), so theirs has one."""
    count = 1 if category.entry.grouping == "per-node" else 2
    return tuple(f"gpu-node-{number}" for number in range(count, 0, -1))  # unsorted on purpose


def render_with(
    key: str, gang: str, options: dict[str, Any], architecture: str | None, target: dict[str, Any]
) -> tuple[ResolvedCategory, dict[str, Any], dict[str, Any], tuple[str, ...]]:
    domain, variant = key.split("/")
    spec: dict[str, Any] = {
        "target": target,
        "categories": [{"domain": domain, "variant": variant, "options": options}],
    }
    if GANGS[gang]:
        spec["gangScheduler"] = GANGS[gang]
    category = resolve_one(builtin_catalog(), spec)
    gpu = gpu_values(category, architecture)
    nodes = group_nodes(category)
    runtime = render_runtime(category, gpu, name="cert-runtime", namespace="nvcre", num_nodes=len(nodes))
    trainjob = render_trainjob(
        category,
        gpu,
        name="cert-0-g0",
        namespace="nvcre",
        certification="cert",
        runtime_name="cert-runtime",
        group="g0",
        nodes=nodes,
    )
    return category, runtime, trainjob, nodes


@functools.cache
def rendered_case(key: str, gang: str, option_set: str) -> Rendered:
    chosen = OPTION_SETS[option_set]
    category, runtime, trainjob, nodes = render_with(key, gang, chosen.options, chosen.architecture, chosen.target)
    return Rendered(key, gang, option_set, category, runtime, trainjob, nodes)


CASES = [
    pytest.param((key, gang, option_set), id=f"{key}-{gang}-{option_set}")
    for key in ENTRY_KEYS
    for gang in GANGS
    for option_set in OPTION_SETS
]


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> Rendered:
    return rendered_case(*request.param)


def all_pod_specs(runtime: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for replicated_job in pods.replicated_jobs(runtime["spec"]):
        yield replicated_job["name"], pods.pod_spec(replicated_job)


def strings_with_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings_with_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from strings_with_paths(value, (*path, index))


def lookup(document: Any, path: tuple[Any, ...]) -> Any:
    for element in path:
        document = document[element]
    return document


# --- the strict schema helper itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["TrainJob", "TrainingRuntime"])
def test_the_strict_trainer_schemas_are_valid_draft7_schemas(kind: str) -> None:
    check_strict_schema(kind)


def test_the_strict_trainjob_schema_rejects_unknown_fields_wrong_types_and_a_wrong_api_version() -> None:
    trainjob = rendered_case("communication/nccl-all-reduce", "kai", "defaults-h100").trainjob
    broken = {
        **trainjob,
        "apiVersion": "trainer.kubeflow.org/v1",
        "metadata": {**trainjob["metadata"], "labels": {"count": 3}},
        "spec": {
            **trainjob["spec"],
            "podTemplateOverrides": [],
            "trainer": {**trainjob["spec"]["trainer"], "numNodes": "2"},
        },
    }
    errors = validation_errors("TrainJob", broken)
    assert any(error.startswith("apiVersion: ") for error in errors)
    assert any(error.startswith("metadata.labels.count: 3 is not of type") for error in errors)
    assert any(error.startswith("spec: ") and "'podTemplateOverrides' was unexpected" in error for error in errors)
    assert any(error.startswith("spec.trainer.numNodes: ") for error in errors)


# --- every entry, gang scheduler and option set -----------------------------------------------------------------


def test_the_rendered_runtime_and_trainjob_validate_strictly_against_the_trainer_crds(case: Rendered) -> None:
    assert validation_errors("TrainingRuntime", case.runtime) == []
    assert validation_errors("TrainJob", case.trainjob) == []


def test_every_pod_template_never_restarts_and_every_job_template_has_backoff_limit_zero(case: Rendered) -> None:
    replicated_jobs = list(pods.replicated_jobs(case.runtime["spec"]))
    assert replicated_jobs
    for replicated_job in replicated_jobs:
        assert replicated_job["template"]["spec"]["backoffLimit"] == 0
        assert replicated_job["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_gpu_replicated_jobs_request_gpus_per_node_on_their_first_container_and_others_none(case: Rendered) -> None:
    gpus = GPUS_PER_NODE[case.options.architecture]
    gpu_jobs = set(case.category.entry.gpu_replicated_jobs)
    names = {name for name, _ in all_pod_specs(case.runtime)}
    assert gpu_jobs
    assert gpu_jobs <= names
    for name, spec in all_pod_specs(case.runtime):
        first, *others = spec["containers"]
        if name in gpu_jobs:
            assert first["resources"]["limits"]["nvidia.com/gpu"] == gpus
            assert first["resources"]["requests"]["nvidia.com/gpu"] == gpus
        for container in [*([] if name in gpu_jobs else [first]), *others, *spec.get("initContainers", [])]:
            assert "nvidia.com/gpu" not in container.get("resources", {}).get("limits", {})


def test_mpi_and_torch_process_counts_follow_gpus_per_node(case: Rendered) -> None:
    gpus = GPUS_PER_NODE[case.options.architecture]
    trainer = case.trainjob["spec"]["trainer"]
    assert trainer["numNodes"] == len(case.nodes)
    if "mpi" in case.runtime["spec"]["mlPolicy"]:
        assert case.runtime["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] == gpus
        assert trainer["args"][trainer["args"].index("-np") + 1] == str(gpus * len(case.nodes))
    elif case.category.entry.training:
        assert trainer["numProcPerNode"] == gpus  # torchrun: one process per GPU
    else:
        assert trainer["numProcPerNode"] == 1  # one process drives all GPUs (§6.3 loopback, dcgm)


def test_the_image_override_replaces_primaries_and_inits_that_shared_the_original_primary_image(
    case: Rendered,
) -> None:
    baseline = rendered_case(case.key, case.gang, "defaults-h100").runtime
    override = case.category.image
    for (name, spec), (_, original) in zip(all_pod_specs(case.runtime), all_pod_specs(baseline), strict=True):
        original_primary = original["containers"][0]["image"]
        expected_primary = override or original_primary
        assert spec["containers"][0]["image"] == expected_primary, name
        for init, original_init in zip(spec.get("initContainers", []), original.get("initContainers", []), strict=True):
            shared = original_init["image"] == original_primary
            assert init["image"] == (override if override and shared else original_init["image"]), init["name"]
        for extra, original_extra in zip(spec["containers"][1:], original["containers"][1:], strict=True):
            assert extra["image"] == original_extra["image"]
    assert case.trainjob["spec"]["trainer"].get("image") == override


def test_the_gang_scheduler_and_its_queue_label_are_on_every_pod_and_job_template(case: Rendered) -> None:
    for replicated_job in pods.replicated_jobs(case.runtime["spec"]):
        spec = pods.pod_spec(replicated_job)
        job_labels = pods.job_template(replicated_job).get("metadata", {}).get("labels", {})
        pod_labels = pods.pod_template(replicated_job).get("metadata", {}).get("labels", {})
        gang = GANGS[case.gang]
        if gang is None:
            # Only the megatron entries pin a scheduler (`default-scheduler`, §6.3); nothing else sets one.
            expected = "default-scheduler" if case.category.entry.training else None
            assert spec.get("schedulerName") == expected
            assert not {"kai.scheduler/queue", "runai/queue"} & (job_labels.keys() | pod_labels.keys())
        else:
            key, queue = GANG_QUEUE_LABELS[case.gang]
            assert spec["schedulerName"] == gang["schedulerName"]
            assert job_labels[key] == queue
            assert pod_labels[key] == queue
    if GANGS[case.gang] is not None:
        key, queue = GANG_QUEUE_LABELS[case.gang]
        assert case.trainjob["metadata"]["labels"][key] == queue


def test_the_source_repo_only_ever_appears_as_the_value_of_its_environment_variable(case: Rendered) -> None:
    repo = case.category.source_repo or DEFAULT_SOURCE_REPO
    places = []
    for document in (case.runtime, case.trainjob):
        for path, text in strings_with_paths(document):
            if repo in text:
                assert path[-1] == "value", f"{repo} inside {path}"
                assert lookup(document, path[:-1])["name"] == SOURCE_REPO_ENV
                assert text == repo
                places.append(path)
    if case.category.entry.training:
        assert places, "a training entry clones its source from NVCRE_SOURCE_REPO"
    else:
        assert places == []


def test_tolerations_are_blanket_without_taint_selectors_and_exact_with_them(case: Rendered) -> None:
    expected = EXACT_TOLERATIONS if case.options.target.get("taintSelectors") else [{"operator": "Exists"}]
    for name, spec in all_pod_specs(case.runtime):
        assert spec["tolerations"] == expected, name


def test_image_pull_secrets_go_to_every_pod_template_when_set(case: Rendered) -> None:
    expected = [{"name": "regcred"}] if case.options.options.get("imagePullSecrets") else None
    for name, spec in all_pod_specs(case.runtime):
        assert spec.get("imagePullSecrets") == expected, name


def test_the_trainjob_is_pinned_to_its_nodes_through_a_runtime_patch(case: Rendered) -> None:
    pinned = case.category.entry.pinned_replicated_jobs
    names = [name for name, _ in all_pod_specs(case.runtime)]
    assert set(case.category.entry.gpu_replicated_jobs) <= set(pinned) <= set(names)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": sorted(case.nodes)}]}
                ]
            }
        }
    }
    assert case.trainjob["spec"]["runtimePatches"] == [
        {
            "manager": PATCH_MANAGER,
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": name, "template": {"spec": {"template": {"spec": {"affinity": affinity}}}}}
                            for name in pinned
                        ]
                    }
                }
            },
        }
    ]
    assert case.trainjob["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": "cert-runtime",
    }


# --- focused rules ---------------------------------------------------------------------------------------------


# Per-node entries cannot be unpinned (refused when resolving: see test_resolution).
MULTI_NODE_KEYS = [key for key in ENTRY_KEYS if not key.startswith(("diagnostics/", "communication/nccl-loopback"))]


@pytest.mark.parametrize("key", MULTI_NODE_KEYS)
def test_an_unpinned_trainjob_has_no_hostname_pinning(key: str) -> None:
    _, _, trainjob, _ = render_with(key, "kai", {"placement": "Unpinned", "nodesPerJob": 2}, "h100", {})
    assert "runtimePatches" not in trainjob["spec"]
    assert validation_errors("TrainJob", trainjob) == []


def test_an_unpinned_trainjob_still_requires_the_target_nodes() -> None:
    target = {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
    _, runtime, trainjob, _ = render_with(
        "communication/nccl-all-reduce", "no-gang", {"placement": "Unpinned", "nodesPerJob": 2}, "h100", target
    )
    text = dump_yaml({"runtime": runtime, "trainjob": trainjob})
    assert "requiredDuringSchedulingIgnoredDuringExecution" in text
    assert "nvidia.com/gpu.present" in text


@pytest.mark.parametrize("gang", ["kai", "runai"])
def test_under_a_gang_scheduler_the_mpi_launcher_has_no_depends_on_gate(gang: str) -> None:
    # Under runai-scheduler the reference keeps the gate; dropping it there too is a deliberate difference,
    # recorded with its reason in the README ("Known differences from the reference"; issue 12 item 4c).
    runtime = rendered_case("communication/nccl-all-reduce", gang, "defaults-h100").runtime
    for replicated_job in pods.replicated_jobs(runtime["spec"]):
        assert "dependsOn" not in replicated_job, replicated_job["name"]
    assert "startupPolicy" not in runtime["spec"]["template"]["spec"]


def test_the_readme_records_why_the_launcher_gate_is_dropped_under_run_ai_too() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Known differences from the reference", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| MPI categories under `gangScheduler`")]

    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split(" | ")]
    assert len(cells) == 4, cells  # where, the reference, nvcre-argo, why
    assert all(cells), cells
    assert "runai-scheduler" in cells[1]
    assert "dependsOn" in cells[1]


def test_without_a_gang_scheduler_the_mpi_launcher_waits_for_the_workers() -> None:
    runtime = rendered_case("communication/nccl-all-reduce", "no-gang", "defaults-h100").runtime
    launcher = next(job for job in pods.replicated_jobs(runtime["spec"]) if job["name"] == "launcher")
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]


DISTINCT_IMAGES_ENTRY = """\
domain: communication
variant: sidecars
description: a runtime with a same-image init, a distinct-image init and a sidecar (like GCP's tcpxo-daemon)
measurement: exit-code
grouping: per-node
gpuReplicatedJobs: [node]
pinnedReplicatedJobs: [node]
runtime:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  initContainers:
                    - {name: same-image-init, image: example.com/primary:1}
                    - {name: tcpxo-daemon, image: example.com/tcpxo:7}
                  containers:
                    - {name: node, image: example.com/primary:1}
                    - {name: sidecar, image: example.com/sidecar:2}
trainer:
  numProcPerNode: 1
  command: [/bin/true]
"""


def test_distinct_image_init_containers_and_extra_containers_keep_their_images(tmp_path: Path) -> None:
    (tmp_path / "communication").mkdir()
    (tmp_path / "communication" / "sidecars.yaml").write_text(DISTINCT_IMAGES_ENTRY, encoding="utf-8")
    category = resolve_one(
        load_catalog([tmp_path]),
        {"target": {}, "image": OVERRIDE_IMAGE, "categories": [{"domain": "communication", "variant": "sidecars"}]},
    )
    runtime = render_runtime(category, gpu_values(category, "h100"), name="rt", namespace=None, num_nodes=1)
    (spec,) = (spec for _, spec in all_pod_specs(runtime))
    assert [(init["name"], init["image"]) for init in spec["initContainers"]] == [
        ("same-image-init", OVERRIDE_IMAGE),
        ("tcpxo-daemon", "example.com/tcpxo:7"),
    ]
    assert [(container["name"], container["image"]) for container in spec["containers"]] == [
        ("node", OVERRIDE_IMAGE),
        ("sidecar", "example.com/sidecar:2"),
    ]


@pytest.mark.parametrize(
    ("options", "architecture", "expected"),
    [
        pytest.param({"nicResourceName": "rdma/ib", "mlnxPerNode": 4}, "h100", 4, id="explicit-count"),
        pytest.param({"nicResourceName": "nvidia.com/mlnxnics"}, "gb200", 8, id="count-from-the-architecture"),
        pytest.param({"nicResourceName": "rdma/ib", "mlnxPerNode": 0}, "h100", None, id="zero-opts-out"),
        pytest.param({"nicResourceName": "rdma/ib"}, None, None, id="unknown-architecture-has-no-nics"),
        pytest.param({"mlnxPerNode": 4}, "h100", None, id="no-name-requests-nothing"),
    ],
)
def test_the_nic_resource_is_requested_at_mlnx_per_node_on_gpu_containers_only_when_named_and_nonzero(
    options: dict[str, Any], architecture: str | None, expected: int | None
) -> None:
    _, runtime, _, _ = render_with("communication/nccl-all-reduce", "no-gang", options, architecture, {})
    name = options.get("nicResourceName", "rdma/ib")
    for job, spec in all_pod_specs(runtime):
        resources = spec["containers"][0]["resources"]
        if job == "node" and expected is not None:
            assert (resources["limits"][name], resources["requests"][name]) == (expected, expected)
        else:
            assert name not in resources.get("limits", {})
            assert name not in resources.get("requests", {})


# §3.3 rdmaDeviceAccess hostPath: host /dev/infiniband (type Directory) in the worker container, privileged.
HOST_RDMA_VOLUME = {"name": "host-infiniband", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}}
HOST_RDMA_MOUNT = {"name": "host-infiniband", "mountPath": "/dev/infiniband"}


def test_host_path_rdma_access_reaches_the_gpu_workers_and_no_other_container(case: Rendered) -> None:
    if case.category.options.rdma_device_access != "hostPath":
        for name, spec in all_pod_specs(case.runtime):
            assert HOST_RDMA_VOLUME not in spec.get("volumes", []), name
            assert all(HOST_RDMA_MOUNT not in container.get("volumeMounts", []) for container in spec["containers"])
        return
    # The same options but rdmaDeviceAccess: only the GPU workers' pod specs differ, and only by the option.
    baseline = rendered_case(case.key, case.gang, "defaults-h100").runtime
    gpu_jobs = set(case.category.entry.gpu_replicated_jobs)
    for (name, spec), (_, original) in zip(all_pod_specs(case.runtime), all_pod_specs(baseline), strict=True):
        if name not in gpu_jobs:  # an MPI launcher: exactly as without the option
            assert spec == original, name
            continue
        worker, original_worker = spec["containers"][0], original["containers"][0]
        assert spec["volumes"] == [*original.get("volumes", []), HOST_RDMA_VOLUME]
        assert worker["volumeMounts"] == [*original_worker.get("volumeMounts", []), HOST_RDMA_MOUNT]
        assert worker["securityContext"] == {**original_worker.get("securityContext", {}), "privileged": True}
        changed = ("volumeMounts", "securityContext")
        assert {key: value for key, value in worker.items() if key not in changed} == {
            key: value for key, value in original_worker.items() if key not in changed
        }
        rest = {key: value for key, value in spec.items() if key not in ("volumes", "containers")}
        assert rest == {key: value for key, value in original.items() if key not in ("volumes", "containers")}
        assert spec["containers"][1:] == original["containers"][1:]


def test_host_path_rdma_access_renders_exactly_this_for_an_mpi_worker_and_leaves_the_launcher_alone() -> None:
    _, runtime, _, _ = render_with(
        "communication/nccl-all-reduce", "no-gang", {"rdmaDeviceAccess": "hostPath"}, "h100", {}
    )
    specs = dict(all_pod_specs(runtime))
    worker = specs["node"]["containers"][0]
    assert specs["node"]["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}, HOST_RDMA_VOLUME]
    assert worker["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}, HOST_RDMA_MOUNT]
    assert worker["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}, "privileged": True}
    launcher = specs["launcher"]
    assert launcher["volumes"] == [{"name": "ssh-home", "emptyDir": {}}]
    assert "securityContext" not in launcher["containers"][0]


@pytest.mark.parametrize("key", ENTRY_KEYS)
def test_device_plugin_rdma_access_renders_the_same_bytes_as_leaving_it_unset(key: str) -> None:
    unset = render_with(key, "kai", {}, "h100", {})[1:3]
    device_plugin = render_with(key, "kai", {"rdmaDeviceAccess": "devicePlugin"}, "h100", {})[1:3]
    assert dump_yaml(list(device_plugin)) == dump_yaml(list(unset))


def test_a_gang_scheduler_replaces_the_megatron_default_scheduler() -> None:
    for key in ("training/nemotron5-8b", "training/nemotron5-56b"):
        without = rendered_case(key, "no-gang", "defaults-h100").runtime
        with_kai = rendered_case(key, "kai", "defaults-h100").runtime
        assert {spec["schedulerName"] for _, spec in all_pod_specs(without)} == {"default-scheduler"}
        assert {spec["schedulerName"] for _, spec in all_pod_specs(with_kai)} == {"kai-scheduler"}


def test_the_source_repo_script_reads_the_environment_variable_not_a_spliced_value() -> None:
    runtime = rendered_case("training/nemotron5-8b", "no-gang", "image-pull-secrets-source-repo-gb200").runtime
    (spec,) = (spec for _, spec in all_pod_specs(runtime))
    clone = next(init for init in spec["initContainers"] if init["name"] == "megatron-clone")
    script = "\n".join([*clone["command"], *clone["args"]])
    assert '"${NVCRE_SOURCE_REPO}"' in script
    assert "git clone" in script
    assert "core_v0.15.2" not in script  # the branch too comes from the environment
    assert {"name": SOURCE_REPO_ENV, "value": SOURCE_REPO} in clone["env"]
    assert {"name": "MEGATRON_BRANCH", "value": "core_v0.15.2"} in clone["env"]


# --- names -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "workflow",
    [
        pytest.param("gpu-cluster-cert-0-nccl-all-reduce-x7k2p", id="typical"),
        pytest.param("a-very-long-certification-name-for-the-burn-in-of-rack-17-1-nemotron5-56b-abcde", id="long"),
        pytest.param("1st-certification-of-the-new-gb200-racks-0-nccl-all-reduce-abcde", id="long-digit-first"),
        pytest.param("7-short", id="short-digit-first"),
    ],
)
def test_trainjob_names_are_unique_rfc1035_labels_of_at_most_40_characters(workflow: str) -> None:
    names = [trainjob_name(workflow, group, iteration) for group in ("g0", "g1", "g12") for iteration in (0, 1)]
    for name in names:
        assert len(name) <= 40, name
        assert RFC1035_LABEL.match(name), name
    assert len(set(names)) == len(names)
    assert names == [trainjob_name(workflow, group, iteration) for group in ("g0", "g1", "g12") for iteration in (0, 1)]


# --- determinism -----------------------------------------------------------------------------------------------


def test_rendering_is_byte_for_byte_deterministic_in_one_process() -> None:
    def render_all() -> list[str]:
        texts = []
        for key in ENTRY_KEYS:
            for gang in GANGS:
                for chosen in OPTION_SETS.values():
                    _, runtime, trainjob, _ = render_with(key, gang, chosen.options, chosen.architecture, chosen.target)
                    texts += [dump_yaml(runtime), dump_yaml(trainjob)]
        return texts

    assert render_all() == render_all()


def run_resolve(hash_seed: str) -> str:
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
    completed = subprocess.run(
        [sys.executable, "-m", "nvcre_argo", "resolve", str(SEED_EXAMPLE), "--gpu-arch", "h100"],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_resolve_prints_the_same_bytes_in_processes_with_different_hash_seeds() -> None:
    first, second = run_resolve("1"), run_resolve("4242")
    assert first == second
    assert first.count("kind: TrainJob") == 2


# --- the seed example ------------------------------------------------------------------------------------------


def resolve_seed() -> str:
    result = CliRunner().invoke(cli, ["resolve", str(SEED_EXAMPLE), "--gpu-arch", "h100"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_the_resolve_output_of_the_seed_example_matches_the_reviewed_snapshot(snapshot: Any) -> None:
    assert resolve_seed() == snapshot


def test_the_seed_example_renders_what_the_reference_describes() -> None:
    documents = list(load_yaml_documents(resolve_seed()))
    summary_0, runtime_0, trainjob_0, summary_1, runtime_1, trainjob_1 = documents
    assert (summary_0["variant"], summary_1["variant"]) == ("nccl-all-reduce", "nemotron5-8b")
    for runtime, trainjob in ((runtime_0, trainjob_0), (runtime_1, trainjob_1)):
        assert validation_errors("TrainingRuntime", runtime) == []
        assert validation_errors("TrainJob", trainjob) == []
        assert trainjob["metadata"]["labels"]["kai.scheduler/queue"] == "high-priority"
        assert trainjob["metadata"]["namespace"] == "nvcre"
        for replicated_job in pods.replicated_jobs(runtime["spec"]):
            assert pods.pod_spec(replicated_job)["schedulerName"] == "kai-scheduler"
            assert pods.pod_template(replicated_job)["metadata"]["labels"]["kai.scheduler/queue"] == "high-priority"
            assert pods.job_template(replicated_job)["metadata"]["labels"]["kai.scheduler/queue"] == "high-priority"
    # §6.3 nccl-all-reduce on H100: 8 GPUs per node, mpirun under `timeout 3600`, MNNVL off (enableMNNVL: false).
    assert runtime_0["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] == 8
    args = trainjob_0["spec"]["trainer"]["args"]
    assert trainjob_0["spec"]["trainer"]["command"][-3:] == ["timeout", "3600", "/usr/local/mpi/bin/mpirun"]
    assert args[5:10] == ["-x", "NCCL_DEBUG=INFO", "-x", "NCCL_MNNVL_ENABLE=0", "/usr/local/bin/all_reduce_perf_mpi"]
    assert args[10:16] == ["-b", "8", "-e", "16G", "-f", "2"]
    assert args[-4:] == ["-n", "100", "-N", "10"]
    # §3.1 / §6.3 nemotron5-8b: the example's resources, 8 GPUs, TP2 on H100, 50 steps, 16 GPUs in the batch.
    (node,) = pods.replicated_jobs(runtime_1["spec"])
    resources = pods.pod_spec(node)["containers"][0]["resources"]
    assert resources == {
        "limits": {"cpu": "6", "memory": "48Gi", "nvidia.com/gpu": 8},
        "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": 8},
    }
    env = {item["name"]: item["value"] for item in trainjob_1["spec"]["trainer"]["env"]}
    assert {key: env[key] for key in ("TRAIN_ITERS", "TENSOR_PARALLEL", "GLOBAL_BATCH_SIZE", "NCCL_MNNVL_ENABLE")} == {
        "TRAIN_ITERS": "50",
        "TENSOR_PARALLEL": "2",
        "GLOBAL_BATCH_SIZE": "16",
        "NCCL_MNNVL_ENABLE": "0",
    }
