"""The sim kubelet's pod-spec rules match the kubelet's: env, $(VAR) expansion, security context, logs, and
the volumes it refuses to provide."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from tests.sim import podspec
from tests.sim.logserver import select
from tests.sim.volumes import materialise

POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "x"}},
    "spec": {"nodeName": "gpu-node-1", "securityContext": {"runAsUser": 65532, "runAsNonRoot": True, "fsGroup": 7}},
    "status": {"podIP": "127.1.0.1"},
}


def no_lookup(kind: str, name: str, key: str) -> str | None:
    return {"configMap": {"cm": {"k": "from-cm"}}}.get(kind, {}).get(name, {}).get(key)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("$(A)-x", "1-x", id="known-variable"),
        pytest.param("$(MISSING)", "$(MISSING)", id="unknown-kept"),
        pytest.param("$$(A)", "$(A)", id="double-dollar-escapes"),
        pytest.param("$A", "$A", id="shell-syntax-untouched"),
    ],
)
def test_variable_expansion_follows_kubernetes_rules(text: str, expected: str) -> None:
    assert podspec.expand(text, {"A": "1"}) == expected


def test_env_resolves_values_field_refs_and_config_map_keys_in_order() -> None:
    container = {
        "name": "main",
        "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
            {"name": "BOTH", "value": "$(POD)/$(FROM_CM)"},
        ],
    }
    env = podspec.container_env(POD, container, base={"PATH": "/bin"}, lookup=no_lookup)
    assert env == {
        "PATH": "/bin",
        "POD": "p",
        "UID": "u-1",
        "APP": "x",
        "FROM_CM": "from-cm",
        "BOTH": "p/from-cm",
    }


def test_a_missing_required_key_is_a_container_config_error() -> None:
    container = {"name": "main", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
    with pytest.raises(podspec.ContainerConfigError, match="no key 'k'"):
        podspec.container_env(POD, container, base={}, lookup=no_lookup)


def test_argv_is_command_then_args_and_falls_back_to_the_image_entry_point() -> None:
    env = {"X": "1"}
    assert podspec.container_argv({"command": ["a"], "args": ["$(X)"]}, env, ["img"]) == ["a", "1"]
    assert podspec.container_argv({"args": ["b"]}, env, ["img"]) == ["img", "b"]


def test_the_container_runs_as_the_pod_user_with_fs_group_and_its_own_read_only_root() -> None:
    identity = podspec.container_identity(POD, {"securityContext": {"readOnlyRootFilesystem": True}})
    assert identity == podspec.Identity(uid=65532, gid=65532, groups=(7, 65532), readonly_root=True)


def test_run_as_non_root_refuses_a_root_user() -> None:
    pod = {"spec": {"securityContext": {"runAsNonRoot": True}}}
    with pytest.raises(podspec.ContainerConfigError, match="runAsNonRoot"):
        podspec.container_identity(pod, {"securityContext": {"runAsUser": 0}})


def test_pod_addresses_stay_in_loopback() -> None:
    addresses = {podspec.pod_ip(index) for index in range(100_000)}
    assert all(address.startswith("127.") for address in addresses)
    assert len({podspec.pod_ip(index) for index in range(1000)}) == 1000


@pytest.mark.parametrize(
    ("tail", "limit", "expected"),
    [
        pytest.param(None, None, b"a\nb\nc\n", id="all"),
        pytest.param(2, None, b"b\nc\n", id="tail-lines"),
        pytest.param(0, None, b"", id="tail-zero"),
        pytest.param(None, 3, b"a\nb", id="limit-bytes"),
        pytest.param(2, 3, b"b\nc", id="tail-then-limit"),
    ],
)
def test_log_selection_applies_tail_lines_then_limit_bytes(
    tail: int | None, limit: int | None, expected: bytes
) -> None:
    assert select(b"a\nb\nc\n", tail_lines=tail, limit_bytes=limit) == expected


def test_only_pods_whose_every_image_is_mapped_run_as_processes() -> None:
    images = {"argoexec:v1": object(), "nvcre-argo:0.1.0": object()}
    argo_pod = {"spec": {"initContainers": [{"image": "argoexec:v1"}], "containers": [{"image": "nvcre-argo:0.1.0"}]}}
    workload = {"spec": {"containers": [{"image": "nvcr.example/pytorch:1"}]}}
    mixed = {"spec": {"containers": [{"image": "argoexec:v1"}, {"image": "other:1"}]}}
    assert podspec.runs_for_real(argo_pod, images)
    assert not podspec.runs_for_real(workload, images)
    assert not podspec.runs_for_real(mixed, images)


def test_a_pod_that_really_runs_never_gets_a_host_path_mounted(tmp_path: Path) -> None:
    """The host's /dev/infiniband (or any host path) is refused, never bound into a container; no API call is
    needed to refuse it (the client here would fail any)."""
    volume = {"name": "host-infiniband", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}}
    target = tmp_path / "volumes" / "host-infiniband"
    with pytest.raises(podspec.ContainerConfigError, match="hostPath '/dev/infiniband' is not provided"):
        materialise(cast(k8s.CoreV1Api, None), POD, volume, target)
    assert list(target.iterdir()) == []  # nothing of the host was copied or linked in


def test_a_pod_that_really_runs_is_refused_a_claim_by_name(tmp_path: Path) -> None:
    """Claims are for played workload pods (their content is the checkpoint store); a real process would find
    an empty directory where it expects shared storage, so it is not started."""
    volume = {"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}}
    with pytest.raises(podspec.ContainerConfigError, match="persistentVolumeClaim 'checkpoints' is not provided"):
        materialise(cast(k8s.CoreV1Api, None), POD, volume, tmp_path / "volumes" / "ckpt")
