"""`nvcre-argo install` against a real API server: two watched namespaces, and what each identity may do.

The RBAC the unit tests read rule by rule is judged here by the API server's own RBAC authorizer, through
SubjectAccessReviews (what `kubectl auth can-i --as system:serviceaccount:NS:NAME` asks), and for a few calls
by really making them with each service account's own token. The expectations are the brief's, per identity:
the certification Workflow's account creates Workflows and nothing that runs or reads a node; the step pods'
account runs TrainJobs and reads nodes but never writes one and creates no Workflow; the watcher GETs result
ConfigMaps by name and cannot list them; nobody writes a node; and nothing reaches an unwatched namespace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre_argo import contract
from nvcre_argo.cli.main import cli
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.connect import connect
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    DEPLOYMENTS,
    NAMESPACES,
    NODES,
    SERVICE_ACCOUNTS,
    SERVICES,
    WORKFLOW_TEMPLATES,
)
from tests.harness.controlplane import Cluster
from tests.harness.namespaces import namespace_name

WATCHER = "nvcre-argo-watcher"
STEP = contract.WORKFLOW_SERVICE_ACCOUNT
PARENT = contract.CERTIFICATION_SERVICE_ACCOUNT
NODE_WRITES = ("create", "update", "patch", "delete", "deletecollection")
SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class Installed:
    """One installation: the watcher's namespace and the two namespaces it watches."""

    home: str
    team_a: str  # did not exist before `install`
    team_b: str  # existed, with its own labels


@dataclass(frozen=True)
class Check:
    """`kubectl auth can-i VERB RESOURCE[/SUB] [-n NS]` for one service account, and the expected answer."""

    verb: str
    resource: str
    group: str = ""
    namespace: str | None = None  # None: cluster-scoped (nodes) or across all namespaces
    allowed: bool = True

    def describe(self) -> str:
        where = f" -n {self.namespace}" if self.namespace else " (cluster)"
        return f"{'can' if self.allowed else 'cannot'} {self.verb} {self.group or 'core'}/{self.resource}{where}"


def can(kube: KubeClient, account: tuple[str, str], check: Check) -> bool:
    """The API server's answer to a SubjectAccessReview for the service account `(namespace, name)`."""
    namespace, name = account
    resource, _, subresource = check.resource.partition("/")
    attributes: dict[str, Any] = {"verb": check.verb, "group": check.group, "resource": resource}
    if subresource:
        attributes["subresource"] = subresource
    if check.namespace:
        attributes["namespace"] = check.namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{namespace}:{name}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            "resourceAttributes": attributes,
        },
    }
    return bool(kube.request("POST", SAR_PATH, body=review)["status"].get("allowed"))


def misjudged(kube: KubeClient, account: tuple[str, str], checks: list[Check]) -> list[str]:
    """The checks the API server answers otherwise than expected (empty when all hold)."""
    return [check.describe() for check in checks if can(kube, account, check) != check.allowed]


def node_write_checks() -> list[Check]:
    return [
        Check(verb, resource, allowed=False)
        for verb in NODE_WRITES
        for resource in ("nodes", "nodes/status", "nodes/proxy")
    ]


@pytest.fixture
def installed(kube: KubeClient, control_plane: Cluster, namespace: str) -> Iterator[Installed]:
    """`nvcre-argo install --pdb` for two watched namespaces, one missing and one that exists, applied for real."""
    team_a = namespace_name("install-team-a")
    team_b = namespace_name("install-team-b")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team_b, "labels": {"team": "b"}}})
    args = ["install", "--namespace", namespace, "--watch-namespace", team_b, "--watch-namespace", team_a, "--pdb"]
    result = CliRunner().invoke(cli, [*args, "--kubeconfig", str(control_plane.kubeconfig)])
    try:
        assert result.exit_code == 0, result.output
        yield Installed(namespace, team_a, team_b)
    finally:
        for name in (team_a, team_b):
            with contextlib.suppress(ApiError):
                kube.delete(NAMESPACES, name)
            with contextlib.suppress(ApiError):
                kube.delete(CLUSTER_ROLE_BINDINGS, f"nvcre-argo-node-reader:{name}")


def test_install_creates_a_missing_namespace_leaves_an_existing_one_alone_and_provisions_both(
    kube: KubeClient, installed: Installed
) -> None:
    assert kube.get(NAMESPACES, installed.team_a) is not None
    existing = kube.get(NAMESPACES, installed.team_b) or {}
    assert existing["metadata"]["labels"].get("team") == "b"
    assert "app.kubernetes.io/managed-by" not in existing["metadata"]["labels"]
    for watched in (installed.team_a, installed.team_b):
        for account in (PARENT, STEP):
            assert kube.get(SERVICE_ACCOUNTS, account, watched) is not None, f"{watched}/{account}"
        assert kube.get(WORKFLOW_TEMPLATES, "nvcre-communication-nccl-all-reduce", watched) is not None
        deployment = kube.get(DEPLOYMENTS, f"{WATCHER}-{watched}", installed.home) or {}
        assert f"--namespace={watched}" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert deployment["spec"]["replicas"] == 2
        budget = kube.request(
            "GET", f"/apis/policy/v1/namespaces/{installed.home}/poddisruptionbudgets/{WATCHER}-{watched}"
        )
        assert budget["spec"]["maxUnavailable"] == 1
    assert kube.get(SERVICE_ACCOUNTS, WATCHER, installed.home) is not None
    service = kube.get(SERVICES, f"{WATCHER}-metrics", installed.home) or {}
    assert service["spec"]["clusterIP"], "the API server allocated the metrics Service an address"


def test_the_certification_service_account_creates_workflows_and_nothing_that_runs_or_reads_nodes(
    kube: KubeClient, installed: Installed
) -> None:
    for watched, other in ((installed.team_a, installed.team_b), (installed.team_b, installed.team_a)):
        checks = [
            *(Check(verb, "workflows", "argoproj.io", watched) for verb in ("create", "get", "list", "patch")),
            Check("update", "workflows/finalizers", "argoproj.io", watched),
            Check("create", "workflowtaskresults", "argoproj.io", watched),
            Check("get", "configmaps", namespace=watched),
            Check("list", "configmaps", namespace=watched, allowed=False),
            Check("delete", "workflows", "argoproj.io", watched, allowed=False),
            Check("create", "pods", namespace=watched, allowed=False),
            Check("create", "pods/exec", namespace=watched, allowed=False),
            Check("get", "pods/log", namespace=watched, allowed=False),
            Check("create", "trainjobs", "trainer.kubeflow.org", watched, allowed=False),
            Check("get", "secrets", namespace=watched, allowed=False),
            Check("get", "nodes", allowed=False),
            Check("list", "nodes", allowed=False),
            Check("create", "workflows", "argoproj.io", other, allowed=False),
            Check("create", "workflows", "argoproj.io", installed.home, allowed=False),
            Check("list", "workflows", "argoproj.io", allowed=False),
            *node_write_checks(),
        ]
        assert misjudged(kube, (watched, PARENT), checks) == []


def test_the_step_service_account_runs_trainjobs_and_reads_nodes_but_writes_no_node_and_creates_no_workflow(
    kube: KubeClient, installed: Installed
) -> None:
    for watched, other in ((installed.team_a, installed.team_b), (installed.team_b, installed.team_a)):
        checks = [
            *(
                Check(verb, "trainjobs", "trainer.kubeflow.org", watched)
                for verb in ("create", "get", "list", "delete")
            ),
            Check("create", "trainingruntimes", "trainer.kubeflow.org", watched),
            *(Check(verb, "nodes") for verb in ("get", "list", "watch")),
            Check("list", "pods", namespace=watched),
            Check("get", "pods/log", namespace=watched),
            *(Check(verb, "configmaps", namespace=watched) for verb in ("create", "get", "list", "update")),
            Check("get", "workflows", "argoproj.io", watched),
            Check("patch", "workflows", "argoproj.io", watched),
            Check("create", "workflowtaskresults", "argoproj.io", watched),
            Check("create", "workflows", "argoproj.io", watched, allowed=False),
            Check("create", "pods", namespace=watched, allowed=False),
            Check("create", "pods/exec", namespace=watched, allowed=False),
            Check("create", "events", namespace=watched, allowed=False),
            Check("get", "secrets", namespace=watched, allowed=False),
            Check("create", "trainjobs", "trainer.kubeflow.org", other, allowed=False),
            Check("list", "configmaps", namespace=other, allowed=False),
            Check("list", "configmaps", allowed=False),
            *node_write_checks(),
        ]
        assert misjudged(kube, (watched, STEP), checks) == []


def test_the_watcher_reads_only_the_watched_namespaces_and_gets_configmaps_without_listing_them(
    kube: KubeClient, installed: Installed
) -> None:
    checks = [
        Check("create", "leases", "coordination.k8s.io", installed.home),
        Check("update", "leases", "coordination.k8s.io", installed.home),
        Check("list", "certifications", "nvcre.nvidia.com", allowed=False),
        Check("list", "workflows", "argoproj.io", allowed=False),
        Check("get", "configmaps", allowed=False),
        *node_write_checks(),
        Check("get", "nodes", allowed=False),
    ]
    for watched in (installed.team_a, installed.team_b):
        checks += [
            *(Check(verb, "certifications", "nvcre.nvidia.com", watched) for verb in ("get", "list", "watch")),
            Check("update", "certifications/status", "nvcre.nvidia.com", watched),
            Check("update", "certifications", "nvcre.nvidia.com", watched, allowed=False),
            *(Check(verb, "workflows", "argoproj.io", watched) for verb in ("get", "list", "watch", "create")),
            Check("get", "configmaps", namespace=watched),
            Check("list", "configmaps", namespace=watched, allowed=False),
            Check("watch", "configmaps", namespace=watched, allowed=False),
            Check("create", "events", namespace=watched),
            Check("create", "pods", namespace=watched, allowed=False),
            Check("get", "secrets", namespace=watched, allowed=False),
        ]
    unwatched = "default"
    checks += [
        Check("list", "certifications", "nvcre.nvidia.com", unwatched, allowed=False),
        Check("get", "configmaps", namespace=unwatched, allowed=False),
        Check("create", "workflows", "argoproj.io", unwatched, allowed=False),
    ]
    assert misjudged(kube, (installed.home, WATCHER), checks) == []


def token_client(kube: KubeClient, control_plane: Cluster, account: tuple[str, str], tmp_path: Path) -> KubeClient:
    """A client that authenticates as the service account, with a token the API server issues for it."""
    namespace, name = account
    answer = kube.request(
        "POST",
        f"{SERVICE_ACCOUNTS.path(namespace, name)}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    config = yaml.safe_load(control_plane.kubeconfig.read_text(encoding="utf-8"))
    config["users"][0]["user"] = {"token": answer["status"]["token"]}
    path = tmp_path / f"{namespace}-{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return connect(str(path))


def refused(call: Any) -> int:
    """The HTTP status of a call that must fail (403 Forbidden for a refusal by RBAC)."""
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value.status


def test_requests_made_with_each_service_accounts_own_token_are_allowed_and_refused_as_reviewed(
    kube: KubeClient, control_plane: Cluster, installed: Installed, tmp_path: Path
) -> None:
    watched = installed.team_a
    workflow = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "rbac-probe-", "namespace": watched},
        "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
    }
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rbac-probe", "namespace": watched}}
    node_patch = {"metadata": {"labels": {"nvcre.example/probe": "x"}}}
    name = namespace_name("install-node")
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    try:
        parent = token_client(kube, control_plane, (watched, PARENT), tmp_path)
        assert parent.create(workflow, dry_run=True)["metadata"]["namespace"] == watched
        assert refused(lambda: parent.create(configmap, dry_run=True)) == 403
        assert refused(lambda: parent.get(NODES, name)) == 403

        step = token_client(kube, control_plane, (watched, STEP), tmp_path)
        assert step.create(configmap, dry_run=True)["metadata"]["name"] == "rbac-probe"
        assert (step.get(NODES, name) or {})["metadata"]["name"] == name
        assert refused(lambda: step.create(workflow, dry_run=True)) == 403
        assert refused(lambda: step.merge_patch(NODES, name, node_patch)) == 403
        assert refused(lambda: step.merge_patch(NODES, name, node_patch, subresource="status")) == 403
        assert refused(lambda: step.delete(NODES, name)) == 403
        elsewhere = {**configmap, "metadata": {**configmap["metadata"], "namespace": installed.team_b}}
        assert refused(lambda: step.create(elsewhere, dry_run=True)) == 403
        assert (kube.get(NODES, name) or {})["metadata"].get("labels") is None, "the node was never written"
    finally:
        kube.delete(NODES, name)
