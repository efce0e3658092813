"""What every install manifest shares: the settings of one installation, the names of its objects, labels.

Why a module of its own: the RBAC (`install_rbac`) and the watcher objects (`install_watcher`) are built
apart, but must agree on names (a RoleBinding names a ServiceAccount, a PodDisruptionBudget selects the
Deployment's pods), so the names and labels are defined once, here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre_argo import __version__, contract
from nvcre_argo.names import LABEL_MANAGED_BY, MANAGED_BY, dns_label

WATCHER = "nvcre-argo-watcher"
WORKFLOW = contract.WORKFLOW_SERVICE_ACCOUNT
CERTIFICATION = contract.CERTIFICATION_SERVICE_ACCOUNT
NODE_READER = "nvcre-argo-node-reader"
LEADER_ELECTION = f"{WATCHER}-leader-election"
METRICS_SERVICE = f"{WATCHER}-metrics"
DEFAULT_BIND_ADDRESS = "0.0.0.0"  # noqa: S104 - the pod's own network namespace; kubelet probes need it
NAME = "nvcre-argo"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_NAME = "app.kubernetes.io/name"


@dataclass(frozen=True)
class InstallSettings:
    """One installation: the watcher's namespace and the namespaces it watches (where Certifications run).

    `watch_namespaces` is explicit and never empty: every namespace a Certification may run in gets its own
    service accounts, Roles and WorkflowTemplates, and nothing is granted cluster-wide except reading nodes.
    `submit` lets the watcher create Workflows; `pdb` runs two watcher replicas per watched namespace behind
    a PodDisruptionBudget; `bind_address` is where the watcher's metrics and health servers listen."""

    namespace: str
    image: str
    watch_namespaces: tuple[str, ...]
    submit: bool = True
    pdb: bool = False
    # The watcher compiles what it submits for Argo's templateReferencing: Strict (render.template_ref).
    template_ref: bool = False
    # ... and with one pod running each category's groups (`nvcre-compile --shared-runner`).
    shared_runner: bool = True
    bind_address: str = DEFAULT_BIND_ADDRESS

    def __post_init__(self) -> None:
        if not self.watch_namespaces:
            raise ValueError("an installation needs at least one watched namespace")
        # Sorted and unique: the manifests must not depend on the order the flags were given in.
        object.__setattr__(self, "watch_namespaces", tuple(sorted(set(self.watch_namespaces))))


def watcher_name(watch_namespace: str) -> str:
    """The Deployment (and its Lease and PodDisruptionBudget) watching one namespace."""
    return dns_label(f"{WATCHER}-{watch_namespace}")


def labels(component: str, instance: str | None = None) -> dict[str, str]:
    found = {LABEL_COMPONENT: component, LABEL_MANAGED_BY: MANAGED_BY, LABEL_NAME: NAME}
    if instance is not None:
        found[LABEL_INSTANCE] = instance
    found["app.kubernetes.io/version"] = __version__
    return dict(sorted(found.items()))


def metadata(name: str, component: str, namespace: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name}
    if namespace is not None:
        found["namespace"] = namespace
    found["labels"] = labels(component)
    return found


def namespace_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels("install")}}
