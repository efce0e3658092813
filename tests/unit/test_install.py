"""The install manifests: least-privilege RBAC read rule by rule, per watched namespace, and the CRD.

The product promises never to write a node (DESIGN.md §3, nvcre-contract.md §9), and the RBAC is the proof:
these tests fail if any rule anywhere grants a write verb on nodes, or any wildcard. The expected permission
sets are written from what each identity's code calls (`steps.children` for the certification Workflow, the
category steps, `controller/` for the watcher) and argo-hera-trainer.md §2.5, not copied from the output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nvcre_argo import contract
from nvcre_argo.api.crd import build_crd
from nvcre_argo.cli.compile import compile_command
from nvcre_argo.cli.main import cli
from nvcre_argo.render.install import InstallSettings, build_install_manifests
from nvcre_argo.yamlio import dump_yaml_documents, load_yaml_documents

IMAGE = "registry.example/nvcre-argo:0.1.0"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "*"}
ROOT = Path(__file__).resolve().parents[2]
WATCHER = "nvcre-argo-watcher"
STEP = contract.WORKFLOW_SERVICE_ACCOUNT
PARENT = contract.CERTIFICATION_SERVICE_ACCOUNT

INSTALLS = [
    pytest.param("nvcre", ("team-a",), True, id="one-namespace-submit"),
    pytest.param("nvcre", ("team-b", "team-a"), True, id="two-namespaces-submit"),
    pytest.param("nvcre", ("nvcre",), False, id="own-namespace-read-only"),
    pytest.param("nvcre-system", ("nvcre-system", "team-b"), False, id="own-and-another-read-only"),
]

Grant = tuple[str, str, str, str]


def manifests_for(namespace: str, watch_namespaces: tuple[str, ...], submit: bool) -> list[dict[str, Any]]:
    return build_install_manifests(InstallSettings(namespace, IMAGE, watch_namespaces, submit=submit))


def of_kind(manifests: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [item for item in manifests if item["kind"] in kinds]


def one(manifests: list[dict[str, Any]], kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    found = [
        item
        for item in of_kind(manifests, kind)
        if item["metadata"]["name"] == name and item["metadata"].get("namespace") == namespace
    ]
    assert len(found) == 1, f"expected one {kind} {namespace}/{name}, found {len(found)}"
    return found[0]


def rules(manifests: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(role, rule) for role in of_kind(manifests, "Role", "ClusterRole") for rule in role["rules"]]


def permissions(manifests: list[dict[str, Any]], account: tuple[str, str]) -> set[Grant]:
    """`(scope, apiGroup, resource, verb)` the service account `(namespace, name)` gets through its bindings;
    scope is the binding's namespace, or "cluster" for a ClusterRoleBinding."""
    granted = set()
    for binding in of_kind(manifests, "RoleBinding", "ClusterRoleBinding"):
        if not any((subject["namespace"], subject["name"]) == account for subject in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace")
        role = one(manifests, ref["kind"], ref["name"], namespace if ref["kind"] == "Role" else None)
        scope = namespace or "cluster"
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted |= {(scope, group, resource, verb) for verb in rule["verbs"]}
    return granted


def expand(scope: str, group: str, resources: str, verbs: str) -> set[Grant]:
    return {(scope, group, resource, verb) for resource in resources.split() for verb in verbs.split()}


def step_grants(namespace: str) -> set[Grant]:
    """Read nodes (and DRA ResourceSlices), create GB200/GB300 ComputeDomains and checkpoint PVCs (never delete
    one, never touch a PersistentVolume), run TrainJobs, read pods and
    logs, write result ConfigMaps, patch its own Workflow's deadline, and what Argo's executor needs; no Events,
    no Workflow creation."""
    return (
        expand("cluster", "", "nodes", "get list watch")
        | expand("cluster", "resource.k8s.io", "resourceslices", "get list watch")
        | expand(namespace, "resource.nvidia.com", "computedomains", "get create")
        | expand(namespace, "", "persistentvolumeclaims", "get create")
        | expand(namespace, "", "pods", "get list watch")
        | expand(namespace, "", "pods/log", "get")
        | expand(namespace, "", "configmaps", "get list create update patch")
        | expand(namespace, "trainer.kubeflow.org", "trainjobs trainingruntimes", "get list watch create delete")
        | expand(namespace, "argoproj.io", "workflows", "get patch")
        | expand(namespace, "argoproj.io", "workflows/finalizers", "update")
        | expand(namespace, "argoproj.io", "workflowtaskresults", "create patch")
    )


def certification_grants(namespace: str) -> set[Grant]:
    """Start, follow and stop category Workflows; read their failed-node ConfigMaps by name; the executor."""
    return (
        expand(namespace, "argoproj.io", "workflows", "create get list patch")
        | expand(namespace, "argoproj.io", "workflows/finalizers", "update")
        | expand(namespace, "argoproj.io", "workflowtaskresults", "create patch")
        | expand(namespace, "", "configmaps", "get")
    )


@pytest.mark.parametrize(("namespace", "watch_namespaces", "submit"), INSTALLS)
def test_no_rule_anywhere_grants_a_write_verb_on_nodes(
    namespace: str, watch_namespaces: tuple[str, ...], submit: bool
) -> None:
    node_rules = 0
    for role, rule in rules(manifests_for(namespace, watch_namespaces, submit)):
        touches_nodes = any(resource == "nodes" or resource.startswith("nodes/") for resource in rule["resources"])
        if touches_nodes:
            node_rules += 1
            assert not WRITE_VERBS & set(rule["verbs"]), f"{role['metadata']['name']} may write nodes: {rule}"
            assert sorted(rule["verbs"]) == ["get", "list", "watch"]
            assert rule["resources"] == ["nodes"], "no node subresource (status, proxy) is needed"
    assert node_rules == 1


@pytest.mark.parametrize(("namespace", "watch_namespaces", "submit"), INSTALLS)
def test_no_rule_uses_a_wildcard_or_a_non_resource_url(
    namespace: str, watch_namespaces: tuple[str, ...], submit: bool
) -> None:
    for role, rule in rules(manifests_for(namespace, watch_namespaces, submit)):
        where = f"{role['kind']} {role['metadata']['name']}: {rule}"
        assert set(rule) == {"apiGroups", "resources", "verbs"}, where
        for key in ("apiGroups", "resources", "verbs"):
            assert rule[key], where
            assert all("*" not in value for value in rule[key]), where
            assert rule[key] == sorted(set(rule[key])), f"{where}: {key} must be sorted and unique"


@pytest.mark.parametrize(("namespace", "watch_namespaces", "submit"), INSTALLS)
def test_the_step_service_account_of_each_watched_namespace_gets_exactly_what_the_category_steps_need(
    namespace: str, watch_namespaces: tuple[str, ...], submit: bool
) -> None:
    manifests = manifests_for(namespace, watch_namespaces, submit)
    for watched in watch_namespaces:
        assert permissions(manifests, (watched, STEP)) == step_grants(watched)
        one(manifests, "ServiceAccount", STEP, watched)


@pytest.mark.parametrize(("namespace", "watch_namespaces", "submit"), INSTALLS)
def test_the_certification_service_account_only_starts_follows_and_stops_category_workflows(
    namespace: str, watch_namespaces: tuple[str, ...], submit: bool
) -> None:
    manifests = manifests_for(namespace, watch_namespaces, submit)
    for watched in watch_namespaces:
        granted = permissions(manifests, (watched, PARENT))
        assert granted == certification_grants(watched)
        assert not {grant for grant in granted if grant[2] in ("nodes", "pods", "pods/exec", "trainjobs")}
        one(manifests, "ServiceAccount", PARENT, watched)


def test_only_the_certification_service_account_may_create_workflows() -> None:
    manifests = manifests_for("nvcre", ("team-a",), submit=False)
    creators = {
        (subject["namespace"], subject["name"])
        for binding in of_kind(manifests, "RoleBinding", "ClusterRoleBinding")
        for subject in binding["subjects"]
        if ("team-a", "argoproj.io", "workflows", "create")
        in permissions(manifests, (subject["namespace"], subject["name"]))
    }
    assert creators == {("team-a", PARENT)}


@pytest.mark.parametrize(("namespace", "watch_namespaces", "submit"), INSTALLS)
def test_the_watcher_reads_certifications_and_workflows_gets_configmaps_by_name_and_writes_only_status_events_lease(
    namespace: str, watch_namespaces: tuple[str, ...], submit: bool
) -> None:
    expected = expand(namespace, "coordination.k8s.io", "leases", "get create update")
    for watched in watch_namespaces:
        expected |= (
            expand(watched, "nvcre.nvidia.com", "certifications", "get list watch")
            | expand(watched, "nvcre.nvidia.com", "certifications/status", "get update patch")
            | expand(watched, "argoproj.io", "workflows", "get list watch" + (" create" if submit else ""))
            | expand(watched, "", "configmaps", "get")
            | expand(watched, "", "events", "create")
        )
    assert permissions(manifests_for(namespace, watch_namespaces, submit), (namespace, WATCHER)) == expected


@pytest.mark.parametrize(("namespace", "watch_namespaces", "submit"), INSTALLS)
def test_the_only_cluster_wide_grant_is_reading_nodes_bound_per_watched_namespace(
    namespace: str, watch_namespaces: tuple[str, ...], submit: bool
) -> None:
    manifests = manifests_for(namespace, watch_namespaces, submit)
    assert [role["metadata"]["name"] for role in of_kind(manifests, "ClusterRole")] == ["nvcre-argo-node-reader"]
    bindings = of_kind(manifests, "ClusterRoleBinding")
    assert sorted(binding["metadata"]["name"] for binding in bindings) == [
        f"nvcre-argo-node-reader:{watched}" for watched in sorted(set(watch_namespaces))
    ]
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": STEP, "namespace": binding["metadata"]["name"].split(":")[1]}
        ]


@pytest.mark.parametrize(("namespace", "watch_namespaces", "submit"), INSTALLS)
def test_every_binding_names_a_role_and_a_service_account_that_are_installed(
    namespace: str, watch_namespaces: tuple[str, ...], submit: bool
) -> None:
    manifests = manifests_for(namespace, watch_namespaces, submit)
    accounts = {
        (item["metadata"]["namespace"], item["metadata"]["name"]) for item in of_kind(manifests, "ServiceAccount")
    }
    assert accounts == {(namespace, WATCHER)} | {
        (watched, account) for watched in watch_namespaces for account in (STEP, PARENT)
    }
    for binding in of_kind(manifests, "RoleBinding", "ClusterRoleBinding"):
        ref = binding["roleRef"]
        one(
            manifests, ref["kind"], ref["name"], binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        )
        for subject in binding["subjects"]:
            assert (subject["namespace"], subject["name"]) in accounts


def test_each_namespace_appears_once_the_install_namespace_first_and_the_order_of_flags_does_not_matter() -> None:
    manifests = manifests_for("nvcre", ("team-b", "nvcre", "team-a", "team-b"), submit=True)
    assert [item["metadata"]["name"] for item in of_kind(manifests, "Namespace")] == ["nvcre", "team-a", "team-b"]
    assert manifests == manifests_for("nvcre", ("team-a", "team-b", "nvcre"), submit=True)


def test_an_installation_without_a_watched_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one watched namespace"):
        InstallSettings("nvcre", IMAGE, ())


def test_the_crd_and_the_namespaces_come_first_and_the_watchers_last() -> None:
    manifests = manifests_for("nvcre", ("team-a",), submit=True)
    assert manifests[0] == build_crd()
    assert [item["kind"] for item in manifests[1:3]] == ["Namespace", "Namespace"]
    assert manifests[-1]["kind"] == "Deployment"
    last_grant = max(index for index, item in enumerate(manifests) if item["kind"].endswith("Binding"))
    first_workload = min(index for index, item in enumerate(manifests) if item["kind"] == "Deployment")
    assert last_grant < first_workload


def test_the_output_is_deterministic_yaml_that_reads_back_unchanged() -> None:
    first = dump_yaml_documents(manifests_for("nvcre", ("team-a", "team-b"), submit=True))
    assert first == dump_yaml_documents(manifests_for("nvcre", ("team-a", "team-b"), submit=True))
    assert list(load_yaml_documents(first)) == manifests_for("nvcre", ("team-a", "team-b"), submit=True)


# --- the command ---------------------------------------------------------------------------------------------------


def printed(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["install", "--print", "--image", IMAGE, *args])
    assert result.exit_code == 0, result.output
    return list(load_yaml_documents(result.stdout))


def test_install_without_a_watched_namespace_is_a_usage_error_that_says_why() -> None:
    result = CliRunner().invoke(cli, ["install", "--print"])
    assert result.exit_code == 2
    assert "--watch-namespace" in result.output
    assert "no cluster-wide mode" in result.output


@pytest.mark.parametrize("bad", ["Team_A", ""], ids=["uppercase", "empty"])
def test_install_refuses_an_invalid_watched_namespace(bad: str) -> None:
    result = CliRunner().invoke(cli, ["install", "--print", "--watch-namespace", "team-a", "--watch-namespace", bad])
    assert result.exit_code == 2


def test_every_watched_namespace_gets_every_workflow_template() -> None:
    documents = printed("--watch-namespace", "team-a", "--watch-namespace", "team-b")
    templates = of_kind(documents, "WorkflowTemplate")
    by_namespace: dict[str, set[str]] = {}
    for template in templates:
        by_namespace.setdefault(template["metadata"]["namespace"], set()).add(template["metadata"]["name"])
    committed = {path.stem for path in (ROOT / "workflow_templates").glob("*.yaml")}
    assert by_namespace == {"team-a": committed, "team-b": committed}


def test_the_compiled_workflows_run_as_service_accounts_installed_in_their_namespace() -> None:
    installed = {
        (item["metadata"]["namespace"], item["metadata"]["name"])
        for item in of_kind(printed("--watch-namespace", "team-a"), "ServiceAccount")
    }
    template = ROOT / "workflow_templates" / "nvcre-communication-nccl-all-reduce.yaml"
    (document,) = list(load_yaml_documents(template.read_text(encoding="utf-8")))
    assert ("team-a", document["spec"]["serviceAccountName"]) in installed
    assert document["spec"]["serviceAccountName"] == STEP
    compiled = CliRunner().invoke(
        compile_command, [str(ROOT / "examples" / "gpu-cluster-cert.yaml"), "--format", "json", "--namespace", "team-a"]
    )
    assert compiled.exit_code == 0, compiled.output
    workflow = json.loads(compiled.stdout)
    assert workflow["metadata"]["namespace"] == "team-a"
    assert ("team-a", workflow["spec"]["serviceAccountName"]) in installed
    assert workflow["spec"]["serviceAccountName"] == PARENT
