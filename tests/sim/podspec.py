"""What a kubelet derives from a pod spec before running a container (pure).

Environment (``value``, ``fieldRef``, ``resourceFieldRef``, ``configMapKeyRef``/``secretKeyRef`` through a
lookup), ``$(VAR)`` expansion in command and args with Kubernetes' exact rules, the effective security
context (container over pod, ``runAsNonRoot`` refused for root as the kubelet does), and the container
status and pod condition documents the kubelet reports. Kept apart from the I/O of the sim kubelet so each
rule is checked by a unit test.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Lookup = Callable[[str, str, str], str | None]  # (kind "configMap"|"secret", name, key) -> value
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


class ContainerConfigError(ValueError):
    """The container cannot be started as specified (the kubelet's ``CreateContainerConfigError``)."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: known names are replaced, unknown ones kept, ``$$`` escapes ``$``."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _VAR.sub(replace, text)


def field_ref(pod: Mapping[str, Any], path: str) -> str:
    metadata, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    found = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if found:
        return str(metadata.get(found.group(1), {}).get(found.group(2), ""))
    raise ContainerConfigError(f"unsupported fieldRef {path!r}")


def container_env(
    pod: Mapping[str, Any], container: Mapping[str, Any], *, base: Mapping[str, str], lookup: Lookup
) -> dict[str, str]:
    """The container's environment, in spec order (later entries may refer to earlier ones)."""
    env = dict(base)
    if container.get("envFrom"):
        raise ContainerConfigError("envFrom is not supported by the sim kubelet (no pod here uses it)")
    for item in container.get("env") or []:
        name = item["name"]
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
            continue
        value_from = item.get("valueFrom") or {}
        if "fieldRef" in value_from:
            env[name] = field_ref(pod, value_from["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in value_from:
            resource = value_from["resourceFieldRef"]["resource"]
            kind, _, what = resource.partition(".")
            env[name] = str(container.get("resources", {}).get(kind, {}).get(what, "0"))
        else:
            for kind in ("configMap", "secret"):
                ref = value_from.get(f"{kind}KeyRef")
                if ref:
                    value = lookup(kind, ref["name"], ref["key"])
                    if value is None and not ref.get("optional"):
                        raise ContainerConfigError(f"{kind} {ref['name']!r} has no key {ref['key']!r}")
                    env[name] = value or ""
    return env


def container_argv(container: Mapping[str, Any], env: Mapping[str, str], image_entrypoint: list[str]) -> list[str]:
    """command + args with ``$(VAR)`` expanded; the image's entry point when the pod gives no command."""
    command = [expand(str(part), env) for part in container.get("command") or []]
    args = [expand(str(part), env) for part in container.get("args") or []]
    argv = (command or image_entrypoint) + args
    if not argv:
        raise ContainerConfigError(f"container {container.get('name')!r} has no command and its image no entry point")
    return argv


@dataclass(frozen=True)
class Identity:
    """Who the container's process runs as."""

    uid: int | None
    gid: int | None
    groups: tuple[int, ...]
    readonly_root: bool


def container_identity(pod: Mapping[str, Any], container: Mapping[str, Any]) -> Identity:
    """The effective security context, as the kubelet computes it (container fields win over the pod's)."""
    pod_context = pod.get("spec", {}).get("securityContext") or {}
    own = container.get("securityContext") or {}

    def pick(key: str) -> Any:
        return own.get(key, pod_context.get(key))

    uid, gid = pick("runAsUser"), pick("runAsGroup")
    if pick("runAsNonRoot") and (uid is None or int(uid) == 0):
        raise ContainerConfigError("container has runAsNonRoot and image will run as root")
    groups = [int(value) for value in pod_context.get("supplementalGroups") or []]
    if pod_context.get("fsGroup") is not None:
        groups.append(int(pod_context["fsGroup"]))
    effective_gid = None if gid is None else int(gid)
    if effective_gid is None and uid is not None:
        effective_gid = int(uid) if int(uid) != 0 else 0
    return Identity(
        uid=None if uid is None else int(uid),
        gid=effective_gid,
        groups=tuple(sorted(set(groups + ([effective_gid] if effective_gid is not None else [])))),
        readonly_root=bool(own.get("readOnlyRootFilesystem")),
    )


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def running(started_at: str) -> dict[str, Any]:
    return {"running": {"startedAt": started_at}}


def terminated(
    exit_code: int, *, started_at: str, finished_at: str, message: str = "", reason: str = ""
) -> dict[str, Any]:
    """A terminated state as the kubelet reports it: reason Completed for 0, Error (or ``reason``, e.g.
    OOMKilled) otherwise."""
    state: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else (reason or "Error"),
        "startedAt": started_at,
        "finishedAt": finished_at,
    }
    if message:
        state["message"] = message
    return {"terminated": state}


def container_status(
    container: Mapping[str, Any], state: dict[str, Any], *, ready: bool, container_id: str
) -> dict[str, Any]:
    status = {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": f"sim://{container.get('image', '')}",
        "ready": ready,
        "restartCount": 0,
        "started": "running" in state,
        "state": state,
    }
    if "waiting" not in state:
        status["containerID"] = container_id
    return status


def condition(kind: str, value: bool, now: str, reason: str = "") -> dict[str, Any]:
    item: dict[str, Any] = {"type": kind, "status": "True" if value else "False", "lastTransitionTime": now}
    if reason:
        item["reason"] = reason
    return item


def pod_ip(index: int) -> str:
    """The ``index``-th pod address, inside 127.1.0.0/16 (loopback only: never a routable address)."""
    return f"127.1.{(index // 250) % 250}.{index % 250 + 1}"


def runs_for_real(pod: Mapping[str, Any], images: Mapping[str, object]) -> bool:
    """A pod whose every image maps to a program here really runs (Argo's pods, our steps, our watcher);
    anything else (the GPU workloads) is played from the fault plan."""
    spec = pod.get("spec", {})
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    return bool(containers) and all(container.get("image") in images for container in containers)
