"""The watcher's workload objects: one Deployment per watched namespace, a metrics Service, optional PDBs.

Why one Deployment per watched namespace: `nvcre-argo watch` watches one namespace or all of them, and "all"
would need cluster-wide read access to every Certification and Workflow (and, with `--submit`, cluster-wide
`create` on Workflows, which can run a pod under any service account of any namespace). One watcher per
namespace keeps every grant namespaced; each holds its own Lease (named after the Deployment, in the install
namespace), so the watchers of different namespaces never stand in for each other.

Why the PodDisruptionBudget is optional and comes with a second replica: a budget over a single replica
blocks every node drain. With `--pdb` each Deployment runs two replicas (one leads, the other stands by and
reports ready), spread over nodes where possible, and the budget lets a drain take one at a time.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo import contract
from nvcre_argo.render.install_objects import (
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_NAME,
    METRICS_SERVICE,
    NAME,
    WATCHER,
    InstallSettings,
    labels,
    metadata,
    watcher_name,
)

METRICS_PORT = 8080
HEALTH_PORT = 8081
RUN_AS_USER = contract.STEP_USER_ID
WATCHER_RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
REPLICAS_WITH_PDB = 2


def _selector(instance: str | None = None) -> dict[str, str]:
    selector = {LABEL_COMPONENT: "watcher", LABEL_NAME: NAME}
    if instance is not None:
        selector[LABEL_INSTANCE] = instance
    return selector


def watcher_args(settings: InstallSettings, watch_namespace: str) -> list[str]:
    """The `nvcre-argo watch` command line of the Deployment watching `watch_namespace`."""
    args = ["watch", f"--namespace={watch_namespace}"]
    if settings.submit:
        args.append("--submit")
        if settings.template_ref:
            args.append("--template-ref")
        args.append("--shared-runner" if settings.shared_runner else "--pod-per-group")
    return [
        *args,
        f"--metrics-port={METRICS_PORT}",
        f"--health-port={HEALTH_PORT}",
        f"--bind-address={settings.bind_address}",
        "--leader-elect",
        f"--leader-election-namespace={settings.namespace}",
        f"--leader-election-id={watcher_name(watch_namespace)}",
    ]


def _container(settings: InstallSettings, watch_namespace: str) -> dict[str, Any]:
    return {
        "name": "watcher",
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["nvcre-argo"],
        "args": watcher_args(settings, watch_namespace),
        "ports": [
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "health"},
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "health"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "resources": WATCHER_RESOURCES,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],  # noqa: S108 - an emptyDir, not the image's /tmp
    }


def _spread(watch_namespace: str) -> dict[str, Any]:
    """Replicas prefer different nodes, so a drain or a node failure does not take both."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": _selector(watch_namespace)},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


def watcher_deployment(settings: InstallSettings, watch_namespace: str) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "serviceAccountName": WATCHER,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(settings, watch_namespace)],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
    }
    if settings.pdb:
        pod["affinity"] = _spread(watch_namespace)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(watcher_name(watch_namespace), "watcher", settings.namespace)
        | {"labels": labels("watcher", watch_namespace)},
        "spec": {
            "replicas": REPLICAS_WITH_PDB if settings.pdb else 1,
            "selector": {"matchLabels": _selector(watch_namespace)},
            "template": {"metadata": {"labels": labels("watcher", watch_namespace)}, "spec": pod},
        },
    }


def watcher_disruption_budget(settings: InstallSettings, watch_namespace: str) -> dict[str, Any]:
    """At most one replica of a watcher evicted at a time; a replica that is not ready (crash-looping) never
    holds a drain up (`unhealthyPodEvictionPolicy: AlwaysAllow`)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(watcher_name(watch_namespace), "watcher", settings.namespace)
        | {"labels": labels("watcher", watch_namespace)},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": _selector(watch_namespace)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def metrics_service(settings: InstallSettings) -> dict[str, Any]:
    """One Service in front of every watcher's `/metrics` (a scraper finds each pod through its endpoints);
    the health port stays unexposed: only the kubelet probes it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(METRICS_SERVICE, "watcher", settings.namespace),
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(),
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def watcher_workloads(settings: InstallSettings) -> list[dict[str, Any]]:
    """The metrics Service, then per watched namespace its PodDisruptionBudget (with `pdb`) and Deployment."""
    manifests = [metrics_service(settings)]
    for watch_namespace in settings.watch_namespaces:
        if settings.pdb:
            manifests.append(watcher_disruption_budget(settings, watch_namespace))
        manifests.append(watcher_deployment(settings, watch_namespace))
    return manifests
