"""`nvcre-argo plan` on saved node lists: text and JSON, exit codes, and one clear line for every mistake.

The command runs in-process with click's CliRunner (exceptions are not caught, so a traceback fails the test).
Planning on a real API server is in tests/integration/test_plan_command.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre_argo.cli.main import cli
from nvcre_argo.yamlio import dump_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED_EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
H100 = "NVIDIA-H100-80GB-HBM3"
NO_CLUSTER_ENV: dict[str, str | None] = {
    "KUBECONFIG": None,
    "KUBERNETES_SERVICE_HOST": None,
    "KUBERNETES_SERVICE_PORT": None,
}


def gpu_node(name: str, *, product: str = H100, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}},
    }


def node_list(*nodes: dict[str, Any]) -> str:
    return dump_yaml({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(nodes)})


@pytest.fixture
def nodes_file(tmp_path: Path) -> Path:
    """Eight H100 nodes (one cordoned) and a CPU node the target does not select."""
    nodes = [gpu_node(f"gpu-{index}", unschedulable=index == 7) for index in range(8)]
    cpu = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-0"}, "status": {"allocatable": {"cpu": "8"}}}
    path = tmp_path / "nodes.yaml"
    path.write_text(node_list(*nodes, cpu), encoding="utf-8")
    return path


def write_unreachable_kubeconfig(directory: Path) -> Path:
    """A kubeconfig naming 127.0.0.1:1, where nothing listens: refused at once."""
    path = directory / "kubeconfig"
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    context = {"name": "ctx", "context": {"cluster": "c", "user": "u"}}
    document = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster], "contexts": [context]}
    document |= {"users": [{"name": "u", "user": {"token": "t"}}], "current-context": "ctx"}
    path.write_text(dump_yaml(document), encoding="utf-8")
    return path


def invoke(*args: str, env: dict[str, str | None] | None = None, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["plan", *args], env={**NO_CLUSTER_ENV, **(env or {})}, input=stdin)


def only_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# --- what it prints -------------------------------------------------------------------------------------------


def test_the_text_preview_shows_each_categorys_nodes_groups_trainjobs_and_gpu_hours(nodes_file: Path) -> None:
    result = invoke(str(SEED_EXAMPLE), "--nodes", str(nodes_file))

    assert result.exit_code == 0, result.output
    assert result.exception is None
    lines = result.stdout.splitlines()
    assert lines[0] == "Certification nvcre/gpu-cluster-cert: 2 categories, run in order"
    assert "category 0: communication/nccl-all-reduce" in lines
    assert "category 1: training/nemotron5-8b" in lines
    assert lines.count("  nodes:     8 match the target, 7 selected, 1 excluded") == 2
    assert "             g0: 7 nodes, 56 GPUs: gpu-0,gpu-1,gpu-2,gpu-3,gpu-4 (+2 more)" in lines  # all-reduce
    # nemotron5-8b with nodesPerJob 8 over 7 nodes: one group of all 7 (clamped), 56 GPUs x 24h.
    assert "  GPU-hours: at most 1,344 (56 GPUs x timeoutPerJob 24h); no nominal duration in the catalog" in lines
    assert lines[-1] == "total: at most 1,400 GPU-hours"
    assert result.stderr == ""


def test_the_json_preview_has_every_node_and_figure(nodes_file: Path) -> None:
    result = invoke(str(SEED_EXAMPLE), "--nodes", str(nodes_file), "-o", "json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["certification"] == "nvcre/gpu-cluster-cert"
    first = document["categories"][0]
    assert first["selected"] == [f"gpu-{index}" for index in range(7)]
    assert [(item["node"], item["reason"]) for item in first["excluded"]] == [("gpu-7", "Cordoned")]
    assert [group["nodes"] for group in first["groups"]] == [[f"gpu-{index}" for index in range(7)]]
    assert first["trainJobs"] == [{"group": "g0", "iteration": 0, "nodes": 7, "gpus": 56}]
    assert document["gpuHours"] == {"upperBound": 1400.0, "nominal": None}  # 56 x 1h + 56 x 24h


def test_the_node_list_can_come_from_standard_input(nodes_file: Path) -> None:
    from_file = invoke(str(SEED_EXAMPLE), "--nodes", str(nodes_file), "-o", "json")
    from_stdin = invoke(str(SEED_EXAMPLE), "--nodes", "-", "-o", "json", stdin=nodes_file.read_text())

    assert from_stdin.exit_code == 0, from_stdin.output
    assert from_stdin.stdout == from_file.stdout


def test_kubeconfig_in_the_environment_does_not_contradict_nodes(nodes_file: Path) -> None:
    result = invoke(str(SEED_EXAMPLE), "--nodes", str(nodes_file), env={"KUBECONFIG": "/nonexistent"})

    assert result.exit_code == 0, result.output


def test_gpu_arch_decides_instead_of_the_vote_as_in_compile(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(node_list(gpu_node("a"), gpu_node("b"), gpu_node("c", product="NVIDIA-B200")), encoding="utf-8")

    result = invoke(str(SEED_EXAMPLE), "--nodes", str(path), "--gpu-arch", "b200", "-o", "json")

    document = json.loads(result.stdout)
    assert [item["selected"] for item in document["categories"]] == [["c"], ["c"]]
    assert {item["architecture"] for item in document["categories"]} == {"b200"}


# --- exit codes and one-line errors ---------------------------------------------------------------------------


def test_a_category_the_nodes_cannot_run_is_shown_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(node_list(gpu_node("a")), encoding="utf-8")  # one node: all-reduce runs, 2 unpinned cannot

    cert = tmp_path / "cert.yaml"
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": "c", "namespace": "nvcre"},
        "spec": {
            "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
            "categories": [
                {"domain": "communication", "variant": "nccl-all-reduce"},
                {
                    "domain": "communication",
                    "variant": "nccl-all-gather",
                    "options": {"placement": "Unpinned", "nodesPerJob": 2},
                },
            ],
        },
    }
    cert.write_text(dump_yaml(document), encoding="utf-8")

    result = invoke(str(cert), "--nodes", str(path))

    assert result.exit_code == 1
    assert (
        "  error:     cannot be planned: communication/nccl-all-gather: placement Unpinned asks for nodesPerJob 2 "
        "nodes, only 1 eligible"
    ) in result.stdout.splitlines()
    assert (
        result.stdout.splitlines()[-1]
        == "total: at most 8 GPU-hours over 1 of 2 categories; 1 category cannot be planned"
    )
    assert only_line(result.stderr) == "error: 1 of 2 categories cannot be planned on these nodes"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param([], "say where the nodes are: --kubeconfig K (or $KUBECONFIG)", id="neither"),
        pytest.param(["--nodes", "NODES", "--kubeconfig", "K"], "give --kubeconfig or --nodes, not both", id="both"),
        pytest.param(["--nodes", "NODES", "-o", "yaml"], "Invalid value for '-o' / '--output'", id="bad-output"),
    ],
)
def test_usage_errors_exit_2(arguments: list[str], expected: str, nodes_file: Path) -> None:
    words = [str(nodes_file) if word == "NODES" else word for word in arguments]

    result = invoke(str(SEED_EXAMPLE), *words)

    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert result.stdout == ""


def test_both_from_standard_input_is_a_usage_error() -> None:
    result = invoke("-", "--nodes", "-", stdin="")

    assert result.exit_code == 2
    assert "only one of FILE and --nodes can be standard input" in result.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(None, "nodes.yaml: <document>: cannot read file: No such file or directory", id="missing-file"),
        pytest.param(
            "items: [\n",
            "nodes.yaml: <document>: invalid YAML: line 2, column 1: while parsing a flow node, expected the node "
            "content, but found '<stream end>'",
            id="bad-yaml",
        ),
        pytest.param(
            "kind: Pod\nmetadata: {name: p}\n",
            'nodes.yaml: kind: must be a Node or a List of Nodes, got string "Pod"',
            id="not-nodes",
        ),
    ],
)
def test_an_unusable_node_list_is_one_line_and_exit_1(
    content: str | None, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if content is not None:
        Path("nodes.yaml").write_text(content, encoding="utf-8")

    result = invoke(str(SEED_EXAMPLE), "--nodes", "nodes.yaml")

    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines() == [expected, "1 problem found"]
    assert result.stdout == ""


def test_a_certification_compile_refuses_is_refused_with_compiles_messages(tmp_path: Path, nodes_file: Path) -> None:
    cert = tmp_path / "cert.yaml"
    text = SEED_EXAMPLE.read_text(encoding="utf-8").replace("variant: nccl-all-reduce", "variant: nccl-all-reduc")
    cert.write_text(text, encoding="utf-8")

    result = invoke(str(cert), "--nodes", str(nodes_file))

    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith(
        f'{cert}: spec.categories[0]: no catalog entry "communication/nccl-all-reduc"'
    )
    assert result.stdout == ""


def test_a_file_of_several_certifications_is_refused(tmp_path: Path, nodes_file: Path) -> None:
    cert = tmp_path / "certs.yaml"
    text = SEED_EXAMPLE.read_text(encoding="utf-8")
    cert.write_text(f"{text}\n---\n{text}", encoding="utf-8")

    result = invoke(str(cert), "--nodes", str(nodes_file))

    assert result.exit_code == 1
    assert only_line(result.stderr) == f"{cert} (document 1): holds 2 Certifications; plan previews one at a time"


def test_an_unreachable_cluster_is_one_line_and_exit_1(tmp_path: Path) -> None:
    kubeconfig = write_unreachable_kubeconfig(tmp_path)

    result = invoke(str(SEED_EXAMPLE), "--kubeconfig", str(kubeconfig))

    assert result.exit_code == 1
    assert only_line(result.stderr).startswith("error: cannot reach the Kubernetes API server at https://127.0.0.1:1")


def test_the_command_is_registered_with_help() -> None:
    result = CliRunner().invoke(cli, ["plan", "--help"])

    assert result.exit_code == 0
    assert "plan" in cli.commands
    assert "--nodes NODES.yaml" in result.stdout


def test_the_readmes_example_is_what_plan_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's node list: gpu-node-01..10 (09 cordoned, 10 an A100) and a CPU node."""
    nodes = [gpu_node(f"gpu-node-{index:02d}", unschedulable=index == 9) for index in range(1, 10)]
    nodes.append(gpu_node("gpu-node-10", product="NVIDIA-A100-SXM4-80GB"))
    cpu = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-node-1"}, "status": {"allocatable": {}}}
    monkeypatch.chdir(tmp_path)
    Path("nodes.yaml").write_text(node_list(*nodes, cpu), encoding="utf-8")
    command = "$ .venv/bin/nvcre-argo plan examples/gpu-cluster-cert.yaml --nodes nodes.yaml\n"
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    shown = readme.split(command, 1)[1].split("```", 1)[0]

    result = invoke(str(SEED_EXAMPLE), "--nodes", "nodes.yaml")

    assert result.exit_code == 0, result.output
    assert result.stdout == shown


WORDS = ["SEED", "BAD", "MISSING", "NODES", "KUBECONFIG", "--nodes", "--kubeconfig", "-o", "json", "yaml", "-", ""]
WORDS += ["--gpu-arch", "h100", "--catalog", "--help"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), max_size=6))
def test_plan_never_exits_with_a_traceback(words: list[str], nodes_file: Path) -> None:
    root = nodes_file.parent
    (root / "bad.yaml").write_text("a: [\n", encoding="utf-8")
    write_unreachable_kubeconfig(root)
    files = {
        "SEED": str(SEED_EXAMPLE),
        "BAD": str(root / "bad.yaml"),
        "MISSING": str(root / "missing.yaml"),
        "NODES": str(nodes_file),
        "KUBECONFIG": str(root / "kubeconfig"),
    }

    result = invoke(*(files.get(word, word) for word in words), stdin="")

    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
