"""Every input gets the right answer (issue 12, items 1-3): validation that matches compile, names checked as
Kubernetes would, and one clear line with a documented exit code instead of a traceback.

Documents are checked through the same functions the commands call, asserting `(path, kind)` pairs; the
commands themselves run in-process with click's CliRunner (exceptions are not caught, so a traceback fails the
test), with a kubeconfig that points at a loopback port nothing listens on when a cluster is needed.
"""

from __future__ import annotations

import contextlib
import copy
import re
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.cli.compile import compile_command
from nvcre_argo.cli.main import cli
from nvcre_argo.compiler import CompileOptions, check_certifications
from nvcre_argo.errors import DocumentError, format_path
from nvcre_argo.kube.client import Backoff
from nvcre_argo.kube.connect import connect
from nvcre_argo.kube.errors import KubeConfigError, UnreachableError
from nvcre_argo.loading import load_certifications
from nvcre_argo.yamlio import dump_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED_EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
BASE: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "cert", "namespace": "nvcre"},
    "spec": {
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "categories": [{"domain": "communication", "variant": "nccl-all-reduce"}],
    },
}


def document(*, metadata: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    result = copy.deepcopy(BASE)
    if metadata is not None:
        result["metadata"] = metadata
    result["spec"].update(spec)
    return result


def compile_problems(doc: dict[str, Any]) -> set[tuple[str, str]]:
    """(path, kind) of every problem `validate` reports: the loader's, else the compiler's checks."""
    try:
        loaded = load_certifications(dump_yaml(doc), "cert.yaml")
    except DocumentError as error:
        return error.kinds()
    errors = check_certifications(loaded, catalog=load_catalog(()), options=CompileOptions())
    return {(format_path(error.path), error.kind) for error in errors}


def invoke(command: click.Command, *args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(command, list(args), env=env, catch_exceptions=False)


def write(directory: Path, doc: dict[str, Any], name: str = "cert.yaml") -> Path:
    path = directory / name
    path.write_text(dump_yaml(doc), encoding="utf-8")
    return path


# -------------------------------------------------------------------- 1. validate runs every check compile runs

CATEGORY = {"domain": "communication", "variant": "nccl-all-reduce"}
COMPILE_CASES: dict[str, tuple[dict[str, Any], set[tuple[str, str]]]] = {
    "unknown-variant": (
        document(categories=[{"domain": "communication", "variant": "nccl-all-reduc"}]),
        {("spec.categories[0]", "unknown-category")},
    ),
    "unknown-threshold-key": (
        document(thresholds={"bogusKey": "value > 1"}),
        {("spec.thresholds", "unknown-threshold")},
    ),
    "threshold-syntax": (
        document(thresholds={"busBandwidthGBps": "value >>> 3"}),
        {('spec.thresholds["busBandwidthGBps"]', "invalid-threshold")},
    ),
    "threshold-not-bool": (
        document(thresholds={"busBandwidthGBps": "value + 1"}),
        {('spec.thresholds["busBandwidthGBps"]', "invalid-threshold")},
    ),
    "name-of-70-characters": (
        document(metadata={"name": "n" * 70, "namespace": "nvcre"}),
        {("metadata.name", "max-length")},
    ),
    "template-braces-in-a-value": (
        document(categories=[{**CATEGORY, "options": {"image": "registry/{{x}}"}}]),
        {("spec.categories[0].options.image", "argo-syntax")},
    ),
    "test-scale-diagnose-per-node": (
        document(testScale="diagnose", categories=[{"domain": "diagnostics", "variant": "dcgm-level1"}]),
        {("spec.testScale", "unsupported")},
    ),
}


@pytest.mark.parametrize("case", COMPILE_CASES)
def test_validate_reports_what_compile_would_refuse_at_its_field_path(case: str) -> None:
    doc, expected = COMPILE_CASES[case]

    assert compile_problems(doc) == expected


@pytest.mark.parametrize("case", COMPILE_CASES)
def test_validate_exits_1_where_admission_only_accepts_the_document(case: str, tmp_path: Path) -> None:
    path = write(tmp_path, COMPILE_CASES[case][0])

    full = invoke(cli, "validate", str(path))
    admission = invoke(cli, "validate", "--admission-only", str(path))

    assert (full.exit_code, full.stdout) == (1, "")
    assert full.stderr.endswith("1 problem found\n")
    assert admission.exit_code == 0
    assert "is valid" in admission.stdout


def test_every_compile_problem_of_one_document_is_reported_in_document_order(tmp_path: Path) -> None:
    doc = document()
    doc["spec"] = {
        "target": {},
        "testScale": "diagnose",
        "thresholds": {"bogusKey": "value > 1", "busBandwidthGBps": "value + 1"},
        "categories": [
            {"domain": "communication", "variant": "nccl-loopback"},
            {"domain": "communication", "variant": "nccl-all-reduc"},
            {**CATEGORY, "options": {"image": "a{{b}}"}},
        ],
    }
    path = write(tmp_path, doc)

    result = invoke(cli, "validate", str(path))

    located = [line.split(": ")[1] for line in result.stderr.splitlines()[:-1]]
    assert result.exit_code == 1
    assert located == [
        "spec.testScale",
        "spec.thresholds",
        'spec.thresholds["busBandwidthGBps"]',
        "spec.categories[1]",
        "spec.categories[2].options.image",
    ]


@pytest.mark.parametrize("case", ["valid", *COMPILE_CASES])
def test_compile_validate_only_agrees_with_validate(case: str, tmp_path: Path) -> None:
    path = SEED_EXAMPLE if case == "valid" else write(tmp_path, COMPILE_CASES[case][0])

    validate = invoke(cli, "validate", str(path))
    validate_only = invoke(compile_command, "--validate-only", str(path))

    assert (validate_only.exit_code, validate_only.stdout, validate_only.stderr) == (
        validate.exit_code,
        validate.stdout,
        validate.stderr,
    )
    assert validate.exit_code == (0 if case == "valid" else 1)


# ------------------------------------------------------------------------------ 2. names as Kubernetes checks

NAME_CASES: dict[str, tuple[dict[str, Any], set[tuple[str, str]]]] = {
    "non-ascii-name": (
        document(metadata={"name": "zertifizierung-größe"}),
        {("metadata.name", "name")},
    ),
    "upper-case-name-and-namespace": (
        document(metadata={"name": "My_Cert.V2", "namespace": "NVCRE"}),
        {("metadata.name", "name"), ("metadata.namespace", "name")},
    ),
    "no-name-at-all": (document(metadata={"namespace": "nvcre"}), {("metadata.name", "required")}),
    "generate-name-may-end-in-a-dash": (document(metadata={"generateName": "cert-", "name": "cert"}), set()),
    "bad-generate-name": (document(metadata={"generateName": "Cert_"}), {("metadata.generateName", "name")}),
    "metadata-labels": (
        document(metadata={"name": "cert", "labels": {"bad key!": "ok", "team": "a b"}}),
        {('metadata.labels["bad key!"]', "label-key"), ('metadata.labels["team"]', "label-value")},
    ),
    "node-selector-key-and-value": (
        document(target={"nodeSelector": {"bad key!": "true", "ok": "bad value!"}}),
        {('spec.target.nodeSelector["bad key!"]', "label-key"), ('spec.target.nodeSelector["ok"]', "label-value")},
    ),
    "match-expression-and-node-name": (
        document(
            target={
                "matchExpressions": [{"key": "a/b/c", "operator": "In", "values": ["x y"]}],
                "nodeNames": ["Node_1"],
            }
        ),
        {
            ("spec.target.matchExpressions[0].key", "label-key"),
            ("spec.target.matchExpressions[0].values[0]", "label-value"),
            ("spec.target.nodeNames[0]", "name"),
        },
    ),
    "taint-key-and-value": (
        document(target={"taintSelectors": [{"key": "Bad_Prefix/x", "value": "-x"}]}),
        {("spec.target.taintSelectors[0].key", "label-key"), ("spec.target.taintSelectors[0].value", "label-value")},
    ),
    "secret-names": (
        document(
            imagePullSecrets=[{"name": "Bad_Secret"}],
            categories=[{**CATEGORY, "options": {"imagePullSecrets": [{"name": ""}]}}],
        ),
        {
            ("spec.imagePullSecrets[0].name", "name"),
            ("spec.categories[0].options.imagePullSecrets[0].name", "name"),
        },
    ),
    "valid-names": (
        document(
            metadata={"name": "gpu.cert-1", "namespace": "nvcre", "labels": {"example.com/team": "A_b.c"}},
            target={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100"}, "nodeNames": ["node-1.rack-2"]},
            imagePullSecrets=[{"name": "registry.pull"}],
        ),
        set(),
    ),
}


@pytest.mark.parametrize("case", NAME_CASES)
def test_names_namespaces_labels_and_secret_references_are_checked_offline(case: str) -> None:
    doc, expected = NAME_CASES[case]

    assert compile_problems(doc) == expected


def test_an_invalid_name_is_reported_in_kubernetes_words_with_the_value() -> None:
    with pytest.raises(DocumentError) as raised:
        load_certifications(dump_yaml(document(metadata={"name": "zertifizierung-größe"})), "cert.yaml")

    assert str(raised.value) == (
        "cert.yaml: metadata.name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
        "characters, '-' or '.', and must start and end with an alphanumeric character, got "
        '"zertifizierung-größe"'
    )


def test_an_invalid_namespace_option_is_a_usage_error() -> None:
    result = invoke(compile_command, str(SEED_EXAMPLE), "--namespace", "Bad_NS")

    assert (result.exit_code, result.stdout) == (2, "")
    assert "Invalid value for '--namespace': a lowercase RFC 1123 label" in result.stderr


# ----------------------------------------------------------------------------------------- 3. no tracebacks


def test_an_empty_step_image_is_a_usage_error() -> None:
    result = invoke(compile_command, str(SEED_EXAMPLE), "--step-image", "")

    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.endswith("Error: Invalid value for '--step-image': must not be empty\n")


def test_an_output_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.write_text("keep me", encoding="utf-8")

    result = invoke(compile_command, str(SEED_EXAMPLE), "-o", str(existing))

    assert result.exit_code == 2
    assert f"Invalid value for '-o' / '--output': '{existing}' is a file, not a directory" in result.stderr
    assert existing.read_text(encoding="utf-8") == "keep me"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc, a directory nobody can create entries in")
def test_an_output_directory_that_cannot_be_created_is_one_line_and_exit_1() -> None:
    result = invoke(compile_command, str(SEED_EXAMPLE), "-o", "/proc/nope")

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "error: cannot write /proc/nope: No such file or directory\n"


def test_resolve_of_a_category_that_does_not_exist_is_a_usage_error() -> None:
    result = invoke(cli, "resolve", str(SEED_EXAMPLE), "--category", "99")

    assert (result.exit_code, result.stdout) == (2, "")
    assert "Invalid value for '--category': no category 99; the Certification has categories 0..1" in result.stderr


def test_templates_check_of_an_empty_directory_is_one_line_not_every_diff(tmp_path: Path) -> None:
    result = invoke(cli, "templates", "--check", "-o", str(tmp_path))

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {tmp_path} holds none of the ")


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound once to find it, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def kubeconfig_text(port: int, namespace: str | None = "team-a") -> str:
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    return dump_yaml(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "ctx", "context": context}],
            "current-context": "ctx",
        }
    )


CLUSTER_COMMANDS = {
    "report": ["report", "some-cert"],
    "watch": ["watch", "-n", "nvcre", "--metrics-port", "0", "--health-port", "0"],
    "install": ["install", "--watch-namespace", "nvcre"],
}
NO_CLUSTER_ENV = {"KUBERNETES_SERVICE_HOST": None, "KUBERNETES_SERVICE_PORT": None}


@pytest.mark.parametrize("command", CLUSTER_COMMANDS)
@pytest.mark.parametrize("kubeconfig", ["none", "nonexistent", "malformed", "not-yaml", "unreachable"])
def test_cluster_commands_without_a_usable_cluster_say_why_in_one_line_and_exit_1(
    command: str, kubeconfig: str, tmp_path: Path, closed_port: int
) -> None:
    files = {
        "malformed": "apiVersion: v1\nkind: Config\n",
        "not-yaml": "clusters: [\n",
        "unreachable": kubeconfig_text(closed_port),
    }
    env: dict[str, str | None] = {**NO_CLUSTER_ENV, "HOME": str(tmp_path), "KUBECONFIG": None}
    if kubeconfig == "nonexistent":
        env["KUBECONFIG"] = "/nonexistent"
    elif kubeconfig in files:
        env["KUBECONFIG"] = str(tmp_path / "kubeconfig")
        (tmp_path / "kubeconfig").write_text(files[kubeconfig], encoding="utf-8")
    expected = {
        "none": "error: no kubeconfig: ~/.kube/config does not exist, KUBECONFIG is not set and this is not a pod; "
        "pass --kubeconfig FILE\n",
        "nonexistent": "error: kubeconfig /nonexistent: no such file\n",
        "malformed": f"error: kubeconfig {tmp_path / 'kubeconfig'}: invalid: Expected key current-context\n",
        "unreachable": f"error: cannot reach the Kubernetes API server at https://127.0.0.1:{closed_port}: "
        "Connection refused\n",
    }

    result = invoke(cli, *CLUSTER_COMMANDS[command], env=env)

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.count("\n") == 1
    if kubeconfig in expected:
        assert result.stderr == expected[kubeconfig]
    else:
        assert result.stderr.startswith(f"error: kubeconfig {tmp_path / 'kubeconfig'}: invalid: ")


def test_an_unreachable_api_server_is_given_up_on_after_a_bounded_number_of_tries(
    tmp_path: Path, closed_port: int
) -> None:
    (tmp_path / "kubeconfig").write_text(kubeconfig_text(closed_port), encoding="utf-8")
    waits: list[float] = []
    kube = connect(str(tmp_path / "kubeconfig")).with_backoff(Backoff(sleep=waits.append))

    with pytest.raises(UnreachableError) as raised:
        kube.check_reachable()

    assert waits == [0.5, 0.5]  # three tries, 1 s of waiting in all, instead of six over 17 s
    assert str(raised.value) == f"cannot reach the Kubernetes API server at https://127.0.0.1:{closed_port}: " + (
        "Connection refused"
    )


@pytest.mark.parametrize(("namespace", "expected"), [("team-a", "team-a"), (None, "default")])
def test_the_default_namespace_is_the_kubeconfig_contexts_as_kubectl_does(
    namespace: str | None, expected: str, tmp_path: Path
) -> None:
    (tmp_path / "kubeconfig").write_text(kubeconfig_text(1, namespace), encoding="utf-8")

    assert connect(str(tmp_path / "kubeconfig")).namespace == expected


def test_a_missing_kubeconfig_is_a_kube_config_error_not_the_clients_exception() -> None:
    with pytest.raises(KubeConfigError, match=r"^kubeconfig /nonexistent: no such file$"):
        connect("/nonexistent")


# ------------------------------------------------------------------- no entry point ever exits with a traceback


@pytest.fixture(scope="module")
def inputs() -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "bad.yaml").write_text("a: [\n", encoding="utf-8")
        (root / "invalid.yaml").write_text(dump_yaml(COMPILE_CASES["threshold-syntax"][0]), encoding="utf-8")
        (root / "names.yaml").write_text(dump_yaml(NAME_CASES["secret-names"][0]), encoding="utf-8")
        (root / "file").write_text("x", encoding="utf-8")
        (root / "kubeconfig").write_text(kubeconfig_text(1), encoding="utf-8")  # port 1: refused at once
        yield {
            "SEED": str(SEED_EXAMPLE),
            "BAD": str(root / "bad.yaml"),
            "INVALID": str(root / "invalid.yaml"),
            "NAMES": str(root / "names.yaml"),
            "FILE": str(root / "file"),
            "MISSING": str(root / "missing.yaml"),
            "KUBECONFIG": str(root / "kubeconfig"),
        }


COMMANDS = [
    ["validate"],
    ["validate", "--admission-only"],
    ["resolve"],
    ["templates"],
    ["templates", "--check"],
    ["catalog", "list"],
    ["crd"],
    ["report", "x"],
    ["watch", "--metrics-port", "0", "--health-port", "0"],
    ["install"],
    ["install", "--print"],
    ["plan"],
    ["compile"],
    ["compile", "--validate-only"],
    ["compile", "--check"],
]
WORDS = [
    "SEED",
    "BAD",
    "INVALID",
    "NAMES",
    "FILE",
    "MISSING",
    "OUT",
    "-",
    "",
    "-o",
    "-n",
    "--namespace",
    "Bad_NS",
    "nvcre",
    "--category",
    "99",
    "-1",
    "0",
    "--step-image",
    "--image",
    "--gpu-arch",
    "h100",
    "--catalog",
    "--format",
    "json",
    "--name",
    "--kubeconfig",
    "KUBECONFIG",
    "-A",
    "--nodes",
    "--check",
    "--help",
    "größe",
    "{{x}}",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(COMMANDS), words=st.lists(st.sampled_from(WORDS), max_size=5))
def test_no_entry_point_ever_exits_with_a_traceback(
    command: list[str], words: list[str], inputs: dict[str, str]
) -> None:
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as directory, contextlib.chdir(directory):  # templates writes to ./
        prefix = command[1:] if command[0] == "compile" else command
        arguments = [*prefix, *(inputs.get(word, word) for word in words)]
        entry = compile_command if command[0] == "compile" else cli
        env = {**NO_CLUSTER_ENV, "KUBECONFIG": inputs["KUBECONFIG"]}

        result = runner.invoke(entry, arguments, input="", env=env)

    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------------- the README's error examples

README_DOCUMENTS = {
    "loading": """\
apiVersion: nvcre.nvidia.com/v1alpha1
kind: Certification
metadata: {name: gpu-cluster-cert, namespace: nvcre}
spec:
  target: {nodeSelector: {nvidia.com/gpu.present: "true"}}
  nodesPerJob: 0
  workloadMetadata: {labels: {nvcre.nvidia.com/x: "y"}}
  categories:
    - {domain: communication, variant: nccl-all-reduce, optoins: {}}
""",
    "compiling": """\
apiVersion: nvcre.nvidia.com/v1alpha1
kind: Certification
metadata: {name: gpu-cluster-cert, namespace: nvcre}
spec:
  target: {nodeSelector: {"nvidia.com/gpu present": "true"}}
  gangScheduler: {schedulerName: runai-scheduler, queueLabelKey: runai/queue, queue: team-a}
  categories:
    - {domain: communication, variant: nccl-all-reduce}
    - domain: training
      variant: nemotron5-8b
      options: {workloadMetadata: {labels: {runai/queue: team-b}}}
""",
}


def readme_error_examples() -> list[str]:
    """The README's fenced blocks made only of `cert.yaml: ...` lines and a count."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```\n(cert\.yaml: .*?)^```$", text, flags=re.MULTILINE | re.DOTALL)
    return [str(block) for block in blocks]


def test_the_readmes_error_examples_are_what_validate_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    printed = []
    for text in README_DOCUMENTS.values():
        Path("cert.yaml").write_text(text, encoding="utf-8")
        result = invoke(cli, "validate", "cert.yaml")
        assert result.exit_code == 1
        printed.append(result.stderr)

    assert readme_error_examples() == printed
