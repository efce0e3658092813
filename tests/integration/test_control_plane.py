"""Proof that the integration harness runs a real control plane: version, CRDs, storage, validation, teardown.

These tests guard the harness itself. Each one checks an observable behaviour of the real apiserver, so a
harness that silently fell back to something fake (or installed the minimal, schema-less Argo CRDs) fails.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from tests.harness.controlplane import Cluster, ControlPlane, pid_alive, process_group_alive
from tests.harness.crds import CRD_API, OWN_CRD, OWN_CRD_REQUIRED, condition_true, raw_request
from tests.harness.versions import binary_dirs, load_versions

EXPECTED_CRDS = {
    "clusterworkflowtemplates.argoproj.io",
    "cronworkflows.argoproj.io",
    "workflowartifactgctasks.argoproj.io",
    "workfloweventbindings.argoproj.io",
    "workflows.argoproj.io",
    "workflowtaskresults.argoproj.io",
    "workflowtasksets.argoproj.io",
    "workflowtemplates.argoproj.io",
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
    "jobsets.jobset.x-k8s.io",
}
OWN_CRD_NAME = "certifications.nvcre.nvidia.com"


def workflow(name: str, **spec_extra: Any) -> dict[str, Any]:
    """A minimal valid Argo Workflow, plus any extra spec fields."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox:1.36", "command": ["echo", "hello"]}}],
            **spec_extra,
        },
    }


def trainjob(name: str, **spec_extra: Any) -> dict[str, Any]:
    """A minimal valid Trainer TrainJob (runtime reference only), plus any extra spec fields."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec_extra},
    }


def rejection(exc_info: pytest.ExceptionInfo[ApiException]) -> str:
    """The apiserver's Status message of a rejected request."""
    assert exc_info.value.status == 400, exc_info.value.body
    message: str = json.loads(exc_info.value.body or "{}")["message"]
    return message


def strict_dry_run_create(
    api: k8s_client.ApiClient, group: str, plural: str, namespace: str, body: dict[str, Any]
) -> dict[str, Any]:
    """Create a namespaced custom object with ``dryRun=All`` and ``fieldValidation=Strict``."""
    version = body["apiVersion"].split("/", 1)[1]
    created = k8s_client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, namespace, plural, body, dry_run="All", field_validation="Strict"
    )
    assert isinstance(created, dict)
    return created


def test_apiserver_reports_pinned_version(control_plane: Cluster) -> None:
    pinned = load_versions()["K8S_VERSION"]
    assert pinned == "v1.36.3"
    with control_plane.api_client() as api:
        info = k8s_client.VersionApi(api).get_code()
    assert info.git_version == pinned
    assert (info.major, info.minor) == ("1", "36")


def test_every_expected_crd_is_established(control_plane: Cluster) -> None:
    expected = EXPECTED_CRDS | ({OWN_CRD_NAME} if OWN_CRD_REQUIRED or OWN_CRD.exists() else set())
    with control_plane.api_client() as api:
        listed = raw_request(api, "GET", CRD_API)["items"]
    by_name = {crd["metadata"]["name"]: crd for crd in listed}
    assert expected <= set(by_name), f"missing: {sorted(expected - set(by_name))}"
    not_established = sorted(n for n in expected if not condition_true(by_name[n], "Established"))
    assert not not_established
    assert set(control_plane.crds.names) == expected


def test_configmap_round_trips(control_plane: Cluster, namespace: str) -> None:
    data = {"plain": "value", "multi-line": "a\nb\n", "unicode": "grüße ✓"}
    with control_plane.api_client() as api:
        core = k8s_client.CoreV1Api(api)
        body = k8s_client.V1ConfigMap(metadata=k8s_client.V1ObjectMeta(name="round-trip"), data=data)
        created = core.create_namespaced_config_map(namespace, body)
        read = core.read_namespaced_config_map("round-trip", namespace)
    assert created.metadata is not None
    assert read.metadata is not None
    assert created.metadata.resource_version
    assert read.metadata.uid == created.metadata.uid
    assert read.metadata.namespace == namespace
    assert read.data == data


def test_argo_workflow_strict_dry_run(control_plane: Cluster, namespace: str) -> None:
    with control_plane.api_client() as api:
        accepted = strict_dry_run_create(api, "argoproj.io", "workflows", namespace, workflow("valid"))
        with pytest.raises(ApiException) as exc_info:
            strict_dry_run_create(api, "argoproj.io", "workflows", namespace, workflow("invalid", notAnArgoField=True))
        stored = k8s_client.CustomObjectsApi(api).list_namespaced_custom_object(
            "argoproj.io", "v1alpha1", namespace, "workflows"
        )
    assert accepted["spec"]["entrypoint"] == "main"
    assert "notAnArgoField" in rejection(exc_info)
    assert isinstance(stored, dict)
    assert stored["items"] == [], "a dry run must not persist anything"


def test_trainjob_unknown_field_rejected(control_plane: Cluster, namespace: str) -> None:
    group = "trainer.kubeflow.org"
    with control_plane.api_client() as api:
        accepted = strict_dry_run_create(api, group, "trainjobs", namespace, trainjob("valid"))
        with pytest.raises(ApiException) as exc_info:
            strict_dry_run_create(api, group, "trainjobs", namespace, trainjob("invalid", notATrainerField="x"))
    assert accepted["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime", "schema default applied"
    assert "notATrainerField" in rejection(exc_info)


def _port_open(url: str) -> bool:
    host, port = url.removeprefix("https://").rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, int(port))) == 0


def test_stop_leaves_no_process_behind(control_plane: Cluster) -> None:
    del control_plane  # only to run after the shared plane exists: two planes side by side must work
    plane = ControlPlane(binary_dirs()).start()
    pids = plane.pids
    server, workdir = plane.server, plane.workdir
    assert set(pids) == {"etcd", "kube-apiserver"}
    assert all(pid_alive(pid) for pid in pids.values())
    assert plane.get("/readyz") == (200, "ok")
    plane.stop()
    survivors = {name: pid for name, pid in pids.items() if pid_alive(pid) or process_group_alive(pid)}
    assert survivors == {}
    assert not _port_open(server)
    assert not workdir.exists()
    plane.stop()  # idempotent
