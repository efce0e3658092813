"""The catalog: the built-in entries and what they run, `--catalog DIR` layering, `extends`, errors, the CLI.

What each entry runs is checked against `nvcre-contract.md` §6.2 (the domain/variant pairs) and §6.3 (images,
commands, defaults) after rendering, so the placeholders are checked filled in as the reference describes.
Catalog errors must name the file and the field path (CONVENTIONS.md "Errors people read").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.cli.main import cli
from nvcre_argo.errors import CatalogError
from nvcre_argo.loading import parse_certification
from nvcre_argo.render import pods
from nvcre_argo.render.runtime import render_runtime
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.category import resolve_certification
from nvcre_argo.resolve.values import gpu_values
from nvcre_argo.steps.health import DEFAULT_HEALTH_EXPRESSION, health_expression
from nvcre_argo.yamlio import load_yaml_documents

REFERENCE_ENTRIES = [
    "communication/nccl-all-gather",
    "communication/nccl-all-reduce",
    "communication/nccl-alltoall",
    "communication/nccl-loopback",
    "communication/nccl-loopback-nvswitch",
    "diagnostics/dcgm-level1",
    "diagnostics/dcgm-level2",
    "diagnostics/dcgm-level3",
    "diagnostics/dcgm-level4",
    "training/nemotron5-56b",
    "training/nemotron5-8b",
]
PYTORCH_NCCL_IMAGE = "nvcr.io/nvidia/pytorch:26.01-py3"
PYTORCH_TRAINING_IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.5.2-1-ubuntu22.04"
DCGM_HOST = ["dcgmi", "diag", "--host", "nvidia-dcgm.gpu-operator.svc:5555"]
MULTI_NODE_NCCL = {"nccl-all-reduce": "all_reduce", "nccl-all-gather": "all_gather", "nccl-alltoall": "alltoall"}
# §6.4 / §3.3 maxBytes: 16G, 32G on GB200/GB300.
MAX_BYTES = {"h100": "16G", "gb200": "32G"}


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return load_catalog()


def render(
    catalog: Catalog, key: str, architecture: str | None = "h100", nodes: int = 2
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The TrainingRuntime spec and TrainJob spec.trainer an entry renders to, with default options."""
    domain, variant = key.split("/")
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "cert"},
        "spec": {"target": {}, "categories": [{"domain": domain, "variant": variant}]},
    }
    resolved, errors = resolve_certification(parse_certification(document, "test.yaml").spec, catalog)
    assert errors == []
    (category,) = resolved
    gpu = gpu_values(category, architecture)
    runtime = render_runtime(category, gpu, name="rt", namespace=None, num_nodes=nodes)
    trainjob = render_trainjob(
        category,
        gpu,
        name="tj",
        namespace=None,
        certification="cert",
        runtime_name="rt",
        group="g0",
        nodes=[f"n{number}" for number in range(nodes)],
    )
    return runtime["spec"], trainjob["spec"]["trainer"]


def replicated_jobs_by_name(runtime_spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["name"]: job for job in pods.replicated_jobs(runtime_spec)}


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


def command_line(trainer: dict[str, Any]) -> list[str]:
    return [*trainer.get("command", []), *trainer.get("args", [])]


# --- the built-in entries --------------------------------------------------------------------------------------


def test_the_builtin_catalog_has_exactly_the_eleven_reference_entries(builtin: Catalog) -> None:
    assert builtin.names() == REFERENCE_ENTRIES
    for key, source in builtin.sources.items():
        assert source == f"<built-in catalog>/{key}.yaml"


@pytest.mark.parametrize("variant", sorted(MULTI_NODE_NCCL))
@pytest.mark.parametrize("architecture", sorted(MAX_BYTES))
def test_multi_node_nccl_entries_run_mpirun_over_sshd_workers_as_the_reference_describes(
    builtin: Catalog, variant: str, architecture: str
) -> None:
    entry = builtin.entries[f"communication/{variant}"]
    assert (entry.measurement, entry.grouping, entry.defaults.timeout_per_job) == ("nccl-bandwidth", "all-nodes", "1h")
    runtime, trainer = render(builtin, f"communication/{variant}", architecture)
    gpus = 8 if architecture == "h100" else 4
    mpi = runtime["mlPolicy"]["mpi"]
    assert (mpi["mpiImplementation"], mpi["numProcPerNode"], mpi["sshAuthMountPath"]) == (
        "OpenMPI",
        gpus,
        "/tmp/mpi-ssh-raw",
    )
    jobset = runtime["template"]["spec"]
    assert jobset["network"]["publishNotReadyAddresses"] is True
    assert jobset["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    jobs = replicated_jobs_by_name(runtime)
    assert list(jobs) == ["node", "launcher"]
    worker = pods.pod_spec(jobs["node"])["containers"][0]
    script = "\n".join(worker["args"])
    assert worker["image"] == PYTORCH_NCCL_IMAGE
    for line in ("if [ ! -x /usr/sbin/sshd ]", "openssh-server", "sshd -De"):  # install sshd only if absent
        assert line in script
    assert worker["readinessProbe"]["tcpSocket"]["port"] == 22
    assert "IPC_LOCK" in worker["securityContext"]["capabilities"]["add"]
    launcher = jobs["launcher"]
    launcher_pod = pods.pod_spec(launcher)
    assert [init["name"] for init in launcher_pod["initContainers"]] == ["fix-ssh-permissions"]
    assert launcher_pod["containers"][0]["resources"]["requests"] == {"cpu": "2", "memory": "1Gi"}
    assert launcher_pod["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "1Gi"}
    assert {"name": "node", "status": "Ready"} in launcher["dependsOn"]

    assert trainer["command"][-3:] == ["timeout", "3600", "/usr/local/mpi/bin/mpirun"]
    args = trainer["args"]
    assert args[args.index("NCCL_DEBUG=INFO") - 1] == "-x"
    assert args[args.index("NCCL_MNNVL_ENABLE=1" if architecture == "gb200" else "NCCL_MNNVL_ENABLE=0") - 1] == "-x"
    binary = f"/usr/local/bin/{MULTI_NODE_NCCL[variant]}_perf_mpi"
    after = args[args.index(binary) + 1 :]
    assert after[:6] == ["-b", "8", "-e", MAX_BYTES[architecture], "-f", "2"]
    assert after[after.index("-n") + 1] == "100"
    assert after[after.index("-N") + 1] == "10"


@pytest.mark.parametrize(
    ("variant", "iterations", "cycles", "network_path_only"),
    [
        pytest.param("nccl-loopback", "10", "2", True, id="loopback-through-the-network-path"),
        pytest.param("nccl-loopback-nvswitch", "100", "10", False, id="loopback-over-nvswitch"),
    ],
)
def test_single_node_nccl_entries_drive_every_gpu_from_one_process(
    builtin: Catalog, variant: str, iterations: str, cycles: str, network_path_only: bool
) -> None:
    entry = builtin.entries[f"communication/{variant}"]
    assert (entry.measurement, entry.grouping) == ("nccl-bandwidth", "per-node")
    runtime, trainer = render(builtin, f"communication/{variant}", "gb200", nodes=1)
    assert trainer["numProcPerNode"] == 1
    assert command_line(trainer) == [
        "/usr/local/bin/all_reduce_perf_mpi",
        *["-b", "8", "-e", "32G", "-f", "2", "-g", "4", "-n", iterations, "-N", cycles],
    ]
    env = env_of(trainer)
    disabled = {"NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "1"}
    if network_path_only:
        assert disabled.items() <= env.items()
    else:
        assert not disabled.keys() & env.keys()
    (node,) = pods.replicated_jobs(runtime)
    assert pods.pod_spec(node)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_dcgm_entries_run_dcgmi_diag_at_their_level_against_the_standalone_service(
    builtin: Catalog, level: int
) -> None:
    entry = builtin.entries[f"diagnostics/dcgm-level{level}"]
    assert (entry.measurement, entry.grouping) == ("exit-code", "per-node")
    runtime, trainer = render(builtin, f"diagnostics/dcgm-level{level}", "h100", nodes=1)
    line = command_line(trainer)
    assert line[:4] == DCGM_HOST
    assert line[line.index("--run") + 1] == str(level)
    assert "--json" in line
    assert "--verbose" in line
    (node,) = pods.replicated_jobs(runtime)
    spec = pods.pod_spec(node)
    assert spec["hostNetwork"] is True
    assert spec["containers"][0]["image"] == DCGM_IMAGE
    assert spec["containers"][0]["securityContext"]["privileged"] is True
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8


def test_dcgm_level4_runs_the_reference_command_with_a_two_hour_timeout(builtin: Catalog) -> None:
    assert builtin.entries["diagnostics/dcgm-level4"].defaults.timeout_per_job == "2h"
    _, trainer = render(builtin, "diagnostics/dcgm-level4", "h100", nodes=1)
    assert command_line(trainer) == [
        *DCGM_HOST,
        *["--run", "4", "--json", "--verbose"],
        *["-p", "targeted_power.test_duration=1200s"],
        *["-p", "targeted_stress.test_duration=1200s"],
        *["-p", "nvbandwidth.is_allowed=true"],
    ]


NEMOTRON_MODEL_FLAGS = {
    "nemotron5-8b": [
        "--num-layers 32",
        "--hidden-size 4096",
        "--ffn-hidden-size 21504",
        "--num-attention-heads 32",
        "--num-query-groups 8",
        "--seq-length 8192",
    ],
    "nemotron5-56b": [
        "--num-layers 79",
        "--hidden-size 8192",
        "--ffn-hidden-size 32768",
        "--num-attention-heads 64",
        "--num-query-groups 8",
        "--seq-length 8192",
        "--distributed-timeout-minutes 230",
    ],
}


@pytest.mark.parametrize(
    ("variant", "min_gpus", "tensor_by_architecture"),
    [
        pytest.param("nemotron5-8b", 4, {"h100": "2", "a100": "8", "l40s": "4", "gb200": "1"}, id="nemotron5-8b"),
        pytest.param("nemotron5-56b", 32, {"h100": "8", "a100": "8", "b200": "4", "gb200": "4"}, id="nemotron5-56b"),
    ],
)
def test_nemotron_entries_pretrain_megatron_on_mock_data_as_the_reference_describes(
    builtin: Catalog, variant: str, min_gpus: int, tensor_by_architecture: dict[str, str]
) -> None:
    entry = builtin.entries[f"training/{variant}"]
    defaults = entry.defaults
    assert (entry.measurement, entry.grouping, entry.training) == ("megatron-goodput", "all-nodes", True)
    assert (defaults.timeout_per_job, defaults.max_steps, defaults.min_gpus) == ("24h", 50, min_gpus)
    assert (defaults.startup_stall_timeout_seconds, defaults.max_restarts) == (1200, 3)
    runtime, trainer = render(builtin, f"training/{variant}", "h100")
    (node,) = pods.replicated_jobs(runtime)
    spec = pods.pod_spec(node)
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert spec["containers"][0]["image"] == PYTORCH_TRAINING_IMAGE
    assert {
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "TORCH_NCCL_HIGH_PRIORITY": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }.items() <= env_of(spec["containers"][0]).items()
    (clone,) = spec["initContainers"]
    assert (clone["name"], clone["image"]) == ("megatron-clone", PYTORCH_TRAINING_IMAGE)
    clone_script = "\n".join(clone["args"])
    # Source resolution order: pre-seeded workspace, then the image's copy, then a shallow clone of the branch.
    positions = [clone_script.index(text) for text in ("/mnt/workspace/megatron-lm", "/opt/megatron-lm", "git clone")]
    assert positions == sorted(positions)
    assert "--depth 1" in clone_script
    assert env_of(clone) == {
        "MEGATRON_BRANCH": "core_v0.15.2",
        "NVCRE_SOURCE_REPO": "https://github.com/NVIDIA/Megatron-LM.git",
    }
    workspace = next(volume for volume in spec["volumes"] if volume["name"] == "workspace")
    assert workspace == {"name": "workspace", "emptyDir": {"medium": "Memory"}}

    script = " ".join(" ".join(trainer["args"]).split())
    for flag in ["torchrun pretrain_gpt.py", "--mock-data", "--tokenizer-type NullTokenizer", "--bf16"]:
        assert flag in script
    for flag in ["--vocab-size 131072", "--micro-batch-size 1", "--log-interval 10", "--log-throughput"]:
        assert flag in script
    for flag in ["--log-straggler", "--use-distributed-optimizer", *NEMOTRON_MODEL_FLAGS[variant]]:
        assert flag in script
    env = env_of(trainer)
    assert {"TRAIN_ITERS": "50", "EXIT_DURATION_MINS": "30", "GLOBAL_BATCH_SIZE": "16"}.items() <= env.items()
    assert {"SAVE_INTERVAL": "250", "SAVE_RETAIN_INTERVAL": "1000", "ENABLE_CHECKPOINT": "false"}.items() <= env.items()
    for architecture, tensor in tensor_by_architecture.items():
        _, arch_trainer = render(builtin, f"training/{variant}", architecture)
        assert env_of(arch_trainer)["TENSOR_PARALLEL"] == tensor, architecture
        assert env_of(arch_trainer)["PIPELINE_PARALLEL"] == "1", architecture


# --- --catalog DIR ---------------------------------------------------------------------------------------------

OVERRIDE_ALL_REDUCE = """\
extends: nccl-mpi
domain: communication
variant: nccl-all-reduce
description: site all-reduce with a longer timeout
ncclTest: all_reduce
defaults:
  timeoutPerJob: 3h
"""
NEW_ENTRY = """\
extends: single-node
domain: compute
variant: gpu-burn
description: a site's own per-GPU burn-in
measurement: exit-code
trainer:
  numProcPerNode: 1
  command: [/usr/local/bin/gpu_burn, "600"]
"""


def write(directory: Path, relative: str, text: str) -> Path:
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_catalog_directory_adds_new_entries_and_overrides_builtin_ones(tmp_path: Path) -> None:
    override = write(tmp_path, "communication/nccl-all-reduce.yaml", OVERRIDE_ALL_REDUCE)
    new = write(tmp_path, "compute/gpu-burn.yaml", NEW_ENTRY)
    catalog = load_catalog([tmp_path])
    assert catalog.names() == sorted([*REFERENCE_ENTRIES, "compute/gpu-burn"])
    all_reduce = catalog.entries["communication/nccl-all-reduce"]
    assert (all_reduce.description, all_reduce.defaults.timeout_per_job) == (
        "site all-reduce with a longer timeout",
        "3h",
    )
    assert catalog.sources["communication/nccl-all-reduce"] == str(override)
    assert catalog.sources["compute/gpu-burn"] == str(new)
    assert catalog.sources["communication/nccl-all-gather"] == "<built-in catalog>/communication/nccl-all-gather.yaml"
    _, trainer = render(catalog, "communication/nccl-all-reduce")
    assert trainer["command"][-3:] == ["timeout", "10800", "/usr/local/mpi/bin/mpirun"]


def test_a_user_entry_extends_a_builtin_fragment_and_overrides_only_what_it_sets(tmp_path: Path) -> None:
    write(tmp_path, "compute/gpu-burn.yaml", NEW_ENTRY)
    catalog = load_catalog([tmp_path])
    entry = catalog.entries["compute/gpu-burn"]
    # From the built-in `single-node` fragment: per-node grouping, the GPU job, the torch runtime and its image.
    assert (entry.grouping, entry.gpu_replicated_jobs, entry.pinned_replicated_jobs) == ("per-node", ["node"], ["node"])
    runtime, trainer = render(catalog, "compute/gpu-burn", "h100", nodes=1)
    assert "torch" in runtime["mlPolicy"]
    (node,) = pods.replicated_jobs(runtime)
    assert pods.pod_spec(node)["containers"][0]["image"] == PYTORCH_NCCL_IMAGE
    assert trainer["command"] == ["/usr/local/bin/gpu_burn", "600"]


def test_an_entry_may_give_the_health_expression_its_run_step_checks(tmp_path: Path) -> None:
    expression = "node.spec.taints.exists(t, t.key == 'nvidia.com/gpu-unhealthy')"
    write(tmp_path, "compute/gpu-burn.yaml", NEW_ENTRY + f'healthExpression: "{expression}"\n')
    catalog = load_catalog([tmp_path])
    assert health_expression(catalog.entries["compute/gpu-burn"]) == expression
    # Entries that say nothing keep the reference's default.
    assert health_expression(catalog.entries["communication/nccl-all-reduce"]) == DEFAULT_HEALTH_EXPRESSION


def test_a_fragment_in_the_users_own_lib_directory_is_found_first(tmp_path: Path) -> None:
    write(
        tmp_path,
        "_lib/single-node.yaml",
        "grouping: all-nodes\ngpuReplicatedJobs: [node]\npinnedReplicatedJobs: [node]\n"
        "runtime: {mlPolicy: {numNodes: 1, torch: {}}}\n",
    )
    write(tmp_path, "compute/gpu-burn.yaml", NEW_ENTRY)
    entry = load_catalog([tmp_path]).entries["compute/gpu-burn"]
    assert entry.grouping == "all-nodes"
    assert "template" not in entry.runtime


def test_a_missing_catalog_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(CatalogError, match=str(missing)):
        load_catalog([missing])


# --- malformed entries -----------------------------------------------------------------------------------------

VALID_HEAD = "extends: nccl-mpi\ndomain: communication\nvariant: mine\ndescription: d\nncclTest: all_reduce\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(VALID_HEAD + "bogus: 1\n", ["bogus"], id="unknown-top-level-field"),
        pytest.param(
            VALID_HEAD + "defaults:\n  timeoutPerJb: 1h\n", ["defaults.timeoutPerJb"], id="unknown-nested-field"
        ),
        pytest.param(
            VALID_HEAD + "trainer:\n  args: [-x, '%{nope}']\n", ["trainer.args[1]", "%{nope}"], id="unknown-placeholder"
        ),
        pytest.param(
            VALID_HEAD + "runtime:\n  mlPolicy: {mpi: {numProcPerNode: '%{gpuPerNode|int}'}}\n",
            ["runtime.mlPolicy.mpi.numProcPerNode", "%{gpuPerNode}"],
            id="misspelt-placeholder-in-the-runtime",
        ),
        pytest.param(
            VALID_HEAD.replace("variant: mine", "variant: other"),
            ["communication/other", "communication/mine"],
            id="variant-does-not-match-the-file-name",
        ),
        pytest.param(
            VALID_HEAD.replace("domain: communication", "domain: diagnostics"),
            ["diagnostics/mine", "communication/mine"],
            id="domain-does-not-match-the-directory",
        ),
        pytest.param(VALID_HEAD + "defaults: {timeoutPerJob: 1h\n", ["invalid YAML", "line "], id="invalid-yaml"),
        pytest.param(VALID_HEAD + "- a list item\n", ["invalid YAML"], id="invalid-yaml-structure"),
        pytest.param("- a\n- list\n", ["mapping"], id="not-a-mapping"),
        pytest.param(
            VALID_HEAD.replace("extends: nccl-mpi", "extends: no-such-fragment"),
            ["extends", "no-such-fragment"],
            id="missing-fragment",
        ),
        pytest.param(VALID_HEAD.replace("extends: nccl-mpi", "extends: loop-a"), ["extends"], id="extends-cycle"),
        pytest.param(
            "domain: communication\nvariant: mine\ndescription: d\nmeasurement: exit-code\ngrouping: per-node\n"
            "gpuReplicatedJobs: [node]\npinnedReplicatedJobs: [node]\ntrainer: {}\n",
            ["runtime"],
            id="missing-required-field",
        ),
        pytest.param(VALID_HEAD + "measurement: bandwidth\n", ["measurement"], id="value-outside-the-enum"),
        pytest.param(VALID_HEAD + "gpuReplicatedJobs: node\n", ["gpuReplicatedJobs"], id="wrong-type"),
        pytest.param(
            VALID_HEAD + "healthExpression: 'node.spec.unschedulable =='\n",
            ["healthExpression", "not a CEL expression", "syntax error"],
            id="health-expression-not-cel",
        ),
        pytest.param(VALID_HEAD + "healthExpression: ''\n", ["healthExpression"], id="health-expression-empty"),
    ],
)
def test_a_malformed_entry_fails_with_a_catalog_error_naming_the_file_and_the_field(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    write(tmp_path, "_lib/loop-a.yaml", "extends: loop-b\n")
    write(tmp_path, "_lib/loop-b.yaml", "extends: loop-a\n")
    path = write(tmp_path, "communication/mine.yaml", text)
    with pytest.raises(CatalogError) as raised:
        load_catalog([tmp_path])
    message = str(raised.value)
    assert message.startswith(f"{path}: ") or message.startswith(f"{path} -> "), message
    for fragment in expected:
        assert fragment in message


def test_catalog_errors_are_worded_by_the_project_not_by_pydantic(tmp_path: Path) -> None:
    write(tmp_path, "communication/mine.yaml", VALID_HEAD + "bogus: 1\n")
    with pytest.raises(CatalogError) as raised:
        load_catalog([tmp_path])
    assert "Extra inputs are not permitted" not in str(raised.value)


# --- the CLI ---------------------------------------------------------------------------------------------------


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["catalog", "list", *args], catch_exceptions=False)


def test_catalog_list_json_lists_every_entry_with_its_defaults() -> None:
    result = invoke("-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [f"{row['domain']}/{row['variant']}" for row in rows] == REFERENCE_ENTRIES
    by_key = {f"{row['domain']}/{row['variant']}": row for row in rows}
    assert by_key["diagnostics/dcgm-level4"]["timeoutPerJob"] == "2h"
    assert by_key["training/nemotron5-8b"]["timeoutPerJob"] == "24h"
    assert by_key["training/nemotron5-56b"]["minGPUs"] == 32
    assert by_key["communication/nccl-all-reduce"]["measurement"] == "nccl-bandwidth"
    assert by_key["communication/nccl-loopback"]["grouping"] == "per-node"


def test_catalog_list_yaml_holds_the_same_rows_as_json() -> None:
    as_yaml = invoke("-o", "yaml")
    as_json = invoke("-o", "json")
    assert as_yaml.exit_code == 0, as_yaml.stderr
    (rows,) = list(load_yaml_documents(as_yaml.stdout))
    assert rows == json.loads(as_json.stdout)


def test_catalog_list_table_has_a_header_and_one_row_per_entry() -> None:
    result = invoke("-o", "table")
    assert result.exit_code == 0, result.stderr
    header, *rows = result.stdout.strip().splitlines()
    assert header.split()[:5] == ["DOMAIN", "VARIANT", "MEASUREMENT", "GROUPING", "TIMEOUTPERJOB"]
    assert [tuple(row.split()[:2]) for row in rows] == [tuple(key.split("/")) for key in REFERENCE_ENTRIES]
    assert result.stdout == invoke().stdout  # table is the default


def test_catalog_list_shows_entries_from_a_catalog_directory_and_where_they_came_from(tmp_path: Path) -> None:
    override = write(tmp_path, "communication/nccl-all-reduce.yaml", OVERRIDE_ALL_REDUCE)
    write(tmp_path, "compute/gpu-burn.yaml", NEW_ENTRY)
    result = invoke("--catalog", str(tmp_path), "-o", "json")
    assert result.exit_code == 0, result.stderr
    by_key = {f"{row['domain']}/{row['variant']}": row for row in json.loads(result.stdout)}
    assert len(by_key) == 12
    assert (
        by_key["communication/nccl-all-reduce"]["source"],
        by_key["communication/nccl-all-reduce"]["timeoutPerJob"],
    ) == (
        str(override),
        "3h",
    )
    assert by_key["compute/gpu-burn"]["measurement"] == "exit-code"


def test_catalog_list_with_a_malformed_entry_exits_1_and_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "communication/mine.yaml", VALID_HEAD + "bogus: 1\n")
    result = invoke("--catalog", str(tmp_path))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {path}: bogus")


def test_catalog_list_rejects_an_unknown_output_format_as_a_usage_error() -> None:
    result = invoke("-o", "csv")
    assert result.exit_code == 2
