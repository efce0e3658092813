"""The installed watchers: one Deployment per watched namespace, its security settings, the metrics Service,
the optional PodDisruptionBudget, and the bind address of its metrics and health servers.

What is checked is what a cluster would do with the objects: a Service routes to the pods its selector
matches, a budget guards the pods its selector matches, two watchers with one Lease name would stand in for
each other. The bind address is checked by binding real sockets.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from nvcre_argo.cli.main import cli
from nvcre_argo.controller.observability import serve
from nvcre_argo.render.install import InstallSettings, build_install_manifests

IMAGE = "registry.example/nvcre-argo:0.1.0"


def manifests_for(*watched: str, **options: Any) -> list[dict[str, Any]]:
    return build_install_manifests(InstallSettings("nvcre", IMAGE, watched, **options))


def of_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [item for item in manifests if item["kind"] == kind]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(only)


def arg(deployment: dict[str, Any], flag: str) -> str:
    values = [item.split("=", 1)[1] for item in container(deployment)["args"] if item.startswith(f"{flag}=")]
    assert len(values) == 1, f"{flag} given {len(values)} times"
    return values[0]


def test_each_watched_namespace_gets_its_own_watcher_and_its_own_lease() -> None:
    deployments = of_kind(manifests_for("team-a", "team-b", submit=True), "Deployment")
    assert [arg(item, "--namespace") for item in deployments] == ["team-a", "team-b"]
    assert {item["metadata"]["namespace"] for item in deployments} == {"nvcre"}
    assert {arg(item, "--leader-election-namespace") for item in deployments} == {"nvcre"}
    leases = [arg(item, "--leader-election-id") for item in deployments]
    assert len(set(leases)) == 2, "watchers of different namespaces sharing a Lease would stand in for each other"
    for item in deployments:
        assert container(item)["args"][0] == "watch"
        assert "--submit" in container(item)["args"]
        assert "--all-namespaces" not in container(item)["args"]
        others = [other for other in deployments if other is not item]
        assert selects(item["spec"]["selector"]["matchLabels"], pod_labels(item))
        assert not any(selects(item["spec"]["selector"]["matchLabels"], pod_labels(other)) for other in others)


def test_a_read_only_install_runs_the_watchers_without_submit() -> None:
    (deployment,) = of_kind(manifests_for("team-a", submit=False), "Deployment")
    assert "--submit" not in container(deployment)["args"]


def test_a_long_namespace_still_gives_a_valid_watcher_name() -> None:
    (deployment,) = of_kind(manifests_for("t" * 63), "Deployment")
    assert len(deployment["metadata"]["name"]) <= 63
    assert arg(deployment, "--leader-election-id") == deployment["metadata"]["name"]


def test_the_watcher_runs_as_non_root_with_a_read_only_root_and_no_capabilities() -> None:
    (deployment,) = of_kind(manifests_for("team-a"), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container(deployment)["securityContext"]
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
    (deployment,) = of_kind(manifests_for("team-a"), "Deployment")
    ports = {port["name"]: port["containerPort"] for port in container(deployment)["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert arg(deployment, "--metrics-port") == "8080"
    assert arg(deployment, "--health-port") == "8081"
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container(deployment)[probe]["httpGet"]
        assert get["path"] == path
        assert ports.get(get["port"], get["port"]) == 8081
    assert set(container(deployment)["resources"]) == {"requests", "limits"}


def test_the_metrics_service_routes_to_every_watchers_metrics_port_and_to_nothing_else() -> None:
    manifests = manifests_for("team-a", "team-b")
    (service,) = of_kind(manifests, "Service")
    assert service["metadata"]["namespace"] == "nvcre"
    assert service["spec"]["type"] == "ClusterIP"
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["targetPort"], port["protocol"]) == (8080, "metrics", "TCP")
    deployments = of_kind(manifests, "Deployment")
    assert len(deployments) == 2
    for deployment in deployments:
        assert selects(service["spec"]["selector"], pod_labels(deployment))
        assert "metrics" in {item["name"] for item in container(deployment)["ports"]}


def test_without_pdb_each_watcher_has_one_replica_and_no_budget() -> None:
    manifests = manifests_for("team-a")
    assert of_kind(manifests, "PodDisruptionBudget") == []
    (deployment,) = of_kind(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 1


def test_with_pdb_each_watcher_has_two_spread_replicas_and_a_budget_that_lets_a_drain_take_one() -> None:
    manifests = manifests_for("team-a", "team-b", pdb=True)
    deployments = of_kind(manifests, "Deployment")
    budgets = of_kind(manifests, "PodDisruptionBudget")
    assert len(budgets) == len(deployments) == 2
    for deployment, budget in zip(deployments, budgets, strict=True):
        assert deployment["spec"]["replicas"] == 2
        assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]
        assert budget["spec"]["maxUnavailable"] == 1
        assert "minAvailable" not in budget["spec"]
        assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        matching = [
            item for item in deployments if selects(budget["spec"]["selector"]["matchLabels"], pod_labels(item))
        ]
        assert matching == [deployment]
        spread = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        (term,) = spread["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        assert selects(term["podAffinityTerm"]["labelSelector"]["matchLabels"], pod_labels(deployment))


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "127.0.0.1"])
def test_the_bind_address_reaches_every_watcher(address: str) -> None:
    for deployment in of_kind(manifests_for("team-a", "team-b", bind_address=address), "Deployment"):
        assert arg(deployment, "--bind-address") == address


def test_install_prints_a_pdb_per_watcher_and_the_bind_address_given() -> None:
    result = CliRunner().invoke(
        cli,
        ["install", "--print", "--watch-namespace", "team-a", "--pdb", "--watcher-bind-address", "::"],
    )
    assert result.exit_code == 0, result.output
    assert "kind: PodDisruptionBudget" in result.stdout
    assert "--bind-address=::" in result.stdout


@pytest.mark.parametrize("command", ["install", "watch"])
@pytest.mark.parametrize("bad", ["localhost", "0.0.0.0:8080", ""], ids=["hostname", "with-port", "empty"])
def test_a_bind_address_that_is_not_an_ip_is_a_usage_error(command: str, bad: str) -> None:
    flag = "--watcher-bind-address" if command == "install" else "--bind-address"
    args = ["install", "--print", "--watch-namespace", "team-a"] if command == "install" else ["watch", "-n", "a"]
    result = CliRunner().invoke(cli, [*args, flag, bad])
    assert result.exit_code == 2, result.output
    assert "IPv4 or IPv6 address" in result.output


@contextmanager
def serving(bind: str) -> Iterator[ThreadingHTTPServer]:
    server = serve(bind=bind, port=0, metrics=None, ready=lambda: True, alive=lambda: True)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def healthz(host: str, port: int) -> int:
    with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5) as answer:
        return int(answer.status)


@pytest.mark.parametrize(
    ("bind", "clients"),
    [
        pytest.param("127.0.0.1", ["127.0.0.1"], id="ipv4-loopback"),
        pytest.param("::1", ["[::1]"], id="ipv6-loopback"),
        pytest.param("::", ["[::1]", "127.0.0.1"], id="ipv6-any-is-dual-stack"),
    ],
)
def test_the_health_server_answers_on_the_address_it_binds(bind: str, clients: list[str]) -> None:
    with serving(bind) as server:
        port = server.server_address[1]
        assert [healthz(client, port) for client in clients] == [200] * len(clients)
