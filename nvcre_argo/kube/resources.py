"""The API resources the product reads and writes, and their REST paths (pure data)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """`/api/v1/namespaces/ns/configmaps/x` or `/apis/g/v/...`; namespace None lists across namespaces."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
EVENTS = Resource("", "v1", "events", "Event")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
WORKFLOWS = Resource("argoproj.io", "v1alpha1", "workflows", "Workflow")
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime")
CERTIFICATIONS = Resource("nvcre.nvidia.com", "v1alpha1", "certifications", "Certification")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
SERVICES = Resource("", "v1", "services", "Service")
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
COMPUTE_DOMAINS = Resource("resource.nvidia.com", "v1beta1", "computedomains", "ComputeDomain")
WORKFLOW_TEMPLATES = Resource("argoproj.io", "v1alpha1", "workflowtemplates", "WorkflowTemplate")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")

BY_KIND = {
    resource.kind: resource
    for resource in (
        NODES,
        PODS,
        CONFIGMAPS,
        EVENTS,
        NAMESPACES,
        LEASES,
        WORKFLOWS,
        TRAINJOBS,
        TRAINING_RUNTIMES,
        CERTIFICATIONS,
        CRDS,
        SERVICE_ACCOUNTS,
        ROLES,
        ROLE_BINDINGS,
        CLUSTER_ROLES,
        CLUSTER_ROLE_BINDINGS,
        DEPLOYMENTS,
        SERVICES,
        WORKFLOW_TEMPLATES,
        PERSISTENT_VOLUME_CLAIMS,
        RESOURCE_SLICES,
        COMPUTE_DOMAINS,
    )
}


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether an object lists `uid` among its owner references (what the product creates, it owns)."""
    return any(owner.get("uid") == uid for owner in (obj.get("metadata") or {}).get("ownerReferences") or [])


def resource_of(manifest: dict[str, object]) -> Resource:
    """The Resource a manifest belongs to (by kind); KeyError for kinds the product never writes."""
    return BY_KIND[str(manifest["kind"])]
