"""The install manifests: least-privilege RBAC read rule by rule, the watcher's security settings, the CRD.

The product promises never to write a node (DESIGN.md §3, nvcre-contract.md §9), and the RBAC is the proof:
these tests fail if any rule anywhere grants a write verb on nodes, or any wildcard. The expected permission
sets are written from the brief and argo-hera-trainer.md §2.5, not copied from the output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nvcre_argo import contract
from nvcre_argo.api.crd import build_crd
from nvcre_argo.render.install import build_install_manifests
from nvcre_argo.yamlio import dump_yaml_documents, load_yaml_documents

IMAGE = "ghcr.io/example/nvcre-argo:0.1.0"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "*"}
ROOT = Path(__file__).resolve().parents[2]

INSTALLS = [
    pytest.param("nvcre", None, True, id="all-namespaces-submit"),
    pytest.param("nvcre", "team-a", True, id="one-namespace-submit"),
    pytest.param("nvcre", "nvcre", False, id="own-namespace-read-only"),
    pytest.param("nvcre-system", None, False, id="all-namespaces-read-only"),
]


def manifests_for(namespace: str, watch_namespace: str | None, submit: bool) -> list[dict[str, Any]]:
    return build_install_manifests(namespace, IMAGE, watch_namespace, submit=submit)


def of_kind(manifests: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [item for item in manifests if item["kind"] in kinds]


def one(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [item for item in of_kind(manifests, kind) if item["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def rules(manifests: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(role, rule) for role in of_kind(manifests, "Role", "ClusterRole") for rule in role["rules"]]


def permissions(manifests: list[dict[str, Any]], account: str) -> set[tuple[str, str, str, str]]:
    """`(scope, apiGroup, resource, verb)` the service account gets through its bindings; scope is the
    binding's namespace, or "cluster" for a ClusterRoleBinding."""
    granted = set()
    for binding in of_kind(manifests, "RoleBinding", "ClusterRoleBinding"):
        if not any(subject["name"] == account for subject in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace")
        role = one(manifests, ref["kind"], ref["name"])
        if ref["kind"] == "Role":
            assert role["metadata"]["namespace"] == namespace, "a RoleBinding must reference a Role in its namespace"
        scope = namespace or "cluster"
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted |= {(scope, group, resource, verb) for verb in rule["verbs"]}
    return granted


def expand(scope: str, group: str, resources: str, verbs: str) -> set[tuple[str, str, str, str]]:
    return {(scope, group, resource, verb) for resource in resources.split() for verb in verbs.split()}


@pytest.mark.parametrize(("namespace", "watch_namespace", "submit"), INSTALLS)
def test_no_rule_anywhere_grants_a_write_verb_on_nodes(
    namespace: str, watch_namespace: str | None, submit: bool
) -> None:
    node_rules = 0
    for role, rule in rules(manifests_for(namespace, watch_namespace, submit)):
        touches_nodes = any(resource == "nodes" or resource.startswith("nodes/") for resource in rule["resources"])
        if touches_nodes:
            node_rules += 1
            assert not WRITE_VERBS & set(rule["verbs"]), f"{role['metadata']['name']} may write nodes: {rule}"
            assert sorted(rule["verbs"]) == ["get", "list", "watch"]
            assert rule["resources"] == ["nodes"], "no node subresource (status, proxy) is needed"
    assert node_rules == 1


@pytest.mark.parametrize(("namespace", "watch_namespace", "submit"), INSTALLS)
def test_no_rule_uses_a_wildcard_or_a_non_resource_url(
    namespace: str, watch_namespace: str | None, submit: bool
) -> None:
    for role, rule in rules(manifests_for(namespace, watch_namespace, submit)):
        where = f"{role['kind']} {role['metadata']['name']}: {rule}"
        assert set(rule) == {"apiGroups", "resources", "verbs"}, where
        for key in ("apiGroups", "resources", "verbs"):
            assert rule[key], where
            assert all("*" not in value for value in rule[key]), where
            assert rule[key] == sorted(set(rule[key])), f"{where}: {key} must be sorted and unique"


@pytest.mark.parametrize(("namespace", "watch_namespace", "submit"), INSTALLS)
def test_the_workflow_service_account_gets_exactly_what_the_steps_and_the_argo_executor_need(
    namespace: str, watch_namespace: str | None, submit: bool
) -> None:
    run = watch_namespace or namespace
    expected = (
        expand("cluster", "", "nodes", "get list watch")
        | expand(run, "", "pods", "get list watch")
        | expand(run, "", "pods/log", "get")
        | expand(run, "", "configmaps", "get list create update patch")
        | expand(run, "", "events", "create")
        | expand(run, "trainer.kubeflow.org", "trainjobs trainingruntimes", "get list watch create delete")
        | expand(run, "argoproj.io", "workflows", "get list create patch")
        | expand(run, "argoproj.io", "workflows/finalizers", "update")
        | expand(run, "argoproj.io", "workflowtaskresults", "create patch")
    )
    manifests = manifests_for(namespace, watch_namespace, submit)
    assert permissions(manifests, contract.WORKFLOW_SERVICE_ACCOUNT) == expected
    account = one(manifests, "ServiceAccount", contract.WORKFLOW_SERVICE_ACCOUNT)
    assert account["metadata"]["namespace"] == run


@pytest.mark.parametrize(("namespace", "watch_namespace", "submit"), INSTALLS)
def test_the_watcher_reads_certifications_and_workflows_and_writes_only_status_events_and_its_lease(
    namespace: str, watch_namespace: str | None, submit: bool
) -> None:
    scope = watch_namespace or "cluster"
    expected = (
        expand(scope, "nvcre.nvidia.com", "certifications", "get list watch")
        | expand(scope, "nvcre.nvidia.com", "certifications/status", "get update patch")
        | expand(scope, "argoproj.io", "workflows", "get list watch" + (" create" if submit else ""))
        | expand(scope, "", "configmaps", "get list watch")
        | expand(scope, "", "events", "create patch")
        | expand(namespace, "coordination.k8s.io", "leases", "get create update")
    )
    assert permissions(manifests_for(namespace, watch_namespace, submit), "nvcre-argo-watcher") == expected


@pytest.mark.parametrize(("namespace", "watch_namespace", "submit"), INSTALLS)
def test_cluster_roles_exist_only_for_nodes_and_an_all_namespaces_watcher(
    namespace: str, watch_namespace: str | None, submit: bool
) -> None:
    manifests = manifests_for(namespace, watch_namespace, submit)
    cluster_roles = sorted(role["metadata"]["name"] for role in of_kind(manifests, "ClusterRole"))
    expected = ["nvcre-argo-node-reader"] + (["nvcre-argo-watcher"] if watch_namespace is None else [])
    assert cluster_roles == expected
    for binding in of_kind(manifests, "ClusterRoleBinding"):
        assert binding["metadata"]["name"].endswith(f":{binding['subjects'][0]['namespace']}")


@pytest.mark.parametrize(("namespace", "watch_namespace", "submit"), INSTALLS)
def test_every_binding_names_a_role_and_a_service_account_that_are_installed(
    namespace: str, watch_namespace: str | None, submit: bool
) -> None:
    manifests = manifests_for(namespace, watch_namespace, submit)
    accounts = {
        (item["metadata"]["namespace"], item["metadata"]["name"]) for item in of_kind(manifests, "ServiceAccount")
    }
    assert accounts == {(namespace, "nvcre-argo-watcher"), (watch_namespace or namespace, "nvcre-argo-workflow")}
    for binding in of_kind(manifests, "RoleBinding", "ClusterRoleBinding"):
        one(manifests, binding["roleRef"]["kind"], binding["roleRef"]["name"])
        for subject in binding["subjects"]:
            assert (subject["namespace"], subject["name"]) in accounts


def _watcher(manifests: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    deployment = one(manifests, "Deployment", "nvcre-argo-watcher")
    pod = deployment["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    return pod, pod["containers"][0]


def test_the_watcher_runs_as_non_root_with_a_read_only_root_and_no_capabilities() -> None:
    pod, container = _watcher(build_install_manifests("nvcre", IMAGE, None))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["privileged"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == "nvcre-argo-watcher"
    assert "hostNetwork" not in pod
    assert "hostPID" not in pod


def test_the_watcher_has_probes_on_the_health_port_metrics_on_8080_and_resources() -> None:
    _, container = _watcher(build_install_manifests("nvcre", IMAGE, None))
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert ports.get(get["port"], get["port"]) == 8081
    assert set(container["resources"]) == {"requests", "limits"}
    for part in ("requests", "limits"):
        assert set(container["resources"][part]) == {"cpu", "memory"}


@pytest.mark.parametrize(
    ("watch_namespace", "submit", "expected"),
    [
        pytest.param(None, True, ["--all-namespaces", "--submit"], id="all-submit"),
        pytest.param("team-a", False, ["--namespace=team-a"], id="one-read-only"),
    ],
)
def test_the_watcher_runs_nvcre_argo_watch_with_its_scope(
    watch_namespace: str | None, submit: bool, expected: list[str]
) -> None:
    _, container = _watcher(build_install_manifests("nvcre", IMAGE, watch_namespace, submit=submit))
    assert container["image"] == IMAGE
    assert container["command"] == ["nvcre-argo"]
    assert container["args"][0] == "watch"
    assert [
        arg for arg in container["args"] if arg in ("--all-namespaces", "--submit") or arg.startswith("--namespace=")
    ] == (expected)
    assert "--leader-election-namespace=nvcre" in container["args"]


def test_the_crd_and_the_namespace_come_first() -> None:
    manifests = build_install_manifests("nvcre", IMAGE, None)
    assert manifests[0] == build_crd()
    assert manifests[1]["kind"] == "Namespace"
    assert manifests[1]["metadata"]["name"] == "nvcre"
    assert manifests[-1]["kind"] == "Deployment"


def test_the_output_is_deterministic_yaml_that_reads_back_unchanged() -> None:
    first = dump_yaml_documents(build_install_manifests("nvcre", IMAGE, "team-a"))
    assert first == dump_yaml_documents(build_install_manifests("nvcre", IMAGE, "team-a"))
    assert list(load_yaml_documents(first)) == build_install_manifests("nvcre", IMAGE, "team-a")


def test_the_compiled_workflows_use_the_installed_workflow_service_account() -> None:
    template = ROOT / "workflow_templates" / "nvcre-communication-nccl-all-reduce.yaml"
    (document,) = list(load_yaml_documents(template.read_text(encoding="utf-8")))
    installed = {
        item["metadata"]["name"] for item in of_kind(build_install_manifests("nvcre", IMAGE, None), "ServiceAccount")
    }
    assert document["spec"]["serviceAccountName"] in installed
