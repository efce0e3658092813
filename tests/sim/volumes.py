"""Materialise a pod's volumes as host directories, as the kubelet's volume plugins would.

``emptyDir`` is a world-writable directory (the kubelet makes it 0777 so a non-root container can write);
``configMap``, ``secret``, ``downwardAPI`` and ``projected`` (service-account token through the TokenRequest
API, ``kube-root-ca.crt``, namespace) are written once as files. A volume kind nothing here uses is refused
loudly rather than faked.

Only pods that really run come here. ``hostPath`` is refused too, by name: a simulated node's host paths (the
``/dev/infiniband`` of ``rdmaDeviceAccess: hostPath``) do not exist on this machine, and this machine's own
must never reach a container. Workload pods, whose GPU and InfiniBand devices are simulated, are played from
the fault plan (``tests/sim/player.py``) and have no volume materialised at all, so a hostPath in a
workload pod is accepted the way a real GPU node with InfiniBand would accept it, and mounts nothing. So is
a ``persistentVolumeClaim`` (checkpoints on shared storage, ``tests/sim/storage.py``): what a workload saves
there lives in the sim kubelet's checkpoint store (``tests/sim/checkpoints.py``), not in files. A pod that
really runs is refused a claim, by name: no storage behind it exists on this machine.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from tests.sim.podspec import ContainerConfigError, field_ref

DEFAULT_TOKEN_SECONDS = 3607


def _write(directory: Path, relative: str, data: bytes, mode: int = 0o644) -> None:
    target = directory / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    target.chmod(mode)


def _key_items(directory: Path, source: Mapping[str, Any], values: Mapping[str, bytes]) -> None:
    items = source.get("items")
    mode = int(source.get("defaultMode", 0o644))
    if not items:
        for key, data in values.items():
            _write(directory, key, data, mode)
        return
    for item in items:
        if item["key"] not in values:
            if source.get("optional"):
                continue
            raise ContainerConfigError(f"key {item['key']!r} not found")
        _write(directory, item["path"], values[item["key"]], int(item.get("mode", mode)))


def _config_map(core: k8s.CoreV1Api, namespace: str, name: str) -> dict[str, bytes]:
    found = core.read_namespaced_config_map(name, namespace)
    values = {key: value.encode() for key, value in (found.data or {}).items()}
    values.update({key: base64.b64decode(value) for key, value in (found.binary_data or {}).items()})
    return values


def _secret(core: k8s.CoreV1Api, namespace: str, name: str) -> dict[str, bytes]:
    found = core.read_namespaced_secret(name, namespace)
    return {key: base64.b64decode(value) for key, value in (found.data or {}).items()}


def _token(core: k8s.CoreV1Api, pod: Mapping[str, Any], source: Mapping[str, Any]) -> bytes:
    metadata = pod["metadata"]
    spec: dict[str, Any] = {
        "expirationSeconds": int(source.get("expirationSeconds", DEFAULT_TOKEN_SECONDS)),
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": metadata["name"], "uid": metadata["uid"]},
    }
    if source.get("audience"):
        spec["audiences"] = [source["audience"]]
    answer = core.create_namespaced_service_account_token(
        pod["spec"].get("serviceAccountName") or "default", metadata["namespace"], {"spec": spec}
    )
    return str(answer.status.token).encode()


def _downward(directory: Path, pod: Mapping[str, Any], items: list[dict[str, Any]]) -> None:
    for item in items:
        if "fieldRef" not in item:
            raise ContainerConfigError("downwardAPI resourceFieldRef is not supported by the sim kubelet")
        _write(directory, item["path"], field_ref(pod, item["fieldRef"]["fieldPath"]).encode())


def materialise(core: k8s.CoreV1Api, pod: Mapping[str, Any], volume: Mapping[str, Any], directory: Path) -> None:
    """Fill ``directory`` with the content of one pod volume."""
    namespace = pod["metadata"]["namespace"]
    directory.mkdir(parents=True, exist_ok=True)
    if "emptyDir" in volume:
        directory.chmod(0o777)
    elif "configMap" in volume:
        _key_items(directory, volume["configMap"], _config_map(core, namespace, volume["configMap"]["name"]))
    elif "secret" in volume:
        _key_items(directory, volume["secret"], _secret(core, namespace, volume["secret"]["secretName"]))
    elif "downwardAPI" in volume:
        _downward(directory, pod, volume["downwardAPI"].get("items") or [])
    elif "projected" in volume:
        for source in volume["projected"].get("sources") or []:
            if "serviceAccountToken" in source:
                token_source = source["serviceAccountToken"]
                _write(directory, token_source["path"], _token(core, pod, token_source))
            elif "configMap" in source:
                _key_items(directory, source["configMap"], _config_map(core, namespace, source["configMap"]["name"]))
            elif "secret" in source:
                _key_items(directory, source["secret"], _secret(core, namespace, source["secret"]["name"]))
            elif "downwardAPI" in source:
                _downward(directory, pod, source["downwardAPI"].get("items") or [])
            else:
                raise ContainerConfigError(f"unsupported projected source {sorted(source)}")
    elif "persistentVolumeClaim" in volume:
        claim = volume["persistentVolumeClaim"].get("claimName")
        raise ContainerConfigError(
            f"volume {volume['name']!r}: persistentVolumeClaim {claim!r} is not provided by the sim kubelet to a pod "
            "that really runs: the simulated cluster's volumes have no storage on this machine"
        )
    elif "hostPath" in volume:
        path = volume["hostPath"].get("path")
        raise ContainerConfigError(
            f"volume {volume['name']!r}: hostPath {path!r} is not provided by the sim kubelet: a simulated node's "
            "host paths do not exist here, and this machine's are never mounted into a pod"
        )
    else:
        kinds = sorted(key for key in volume if key != "name")
        raise ContainerConfigError(f"volume {volume['name']!r}: kind {kinds} is not supported by the sim kubelet")
