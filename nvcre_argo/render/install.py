"""Everything `nvcre-argo install` applies: the CRD, namespaces, service accounts, RBAC and the watchers.

Why per namespace, and never cluster-wide: a Certification runs its Workflows in its own namespace, under
service accounts that must exist there, and a cluster-wide install cannot provision namespaces that do not
exist yet (a Certification there failed with "service account not found"). It would also need cluster-wide
grants: reading every ConfigMap, and with `--submit` creating Workflows in any namespace, which is as strong
as running a pod under any service account of the cluster. So an installation names the namespaces it serves
(`InstallSettings.watch_namespaces`, at least one), and each of them gets, namespaced: the certification and
step service accounts and their Roles, the watcher's Role, and the WorkflowTemplates (added by the CLI).
The one cluster-wide grant left is reading nodes (`install_rbac`).

Why generated rather than a static file: the least-privilege rules are the product's promise (we never
cordon, taint, drain or patch a node), so they live in code that a test reads rule by rule: no wildcard, and
no write verb on nodes anywhere. Output is deterministic: namespaces, verbs, resources and labels are sorted.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo.api.crd import build_crd
from nvcre_argo.render.install_objects import InstallSettings, namespace_manifest
from nvcre_argo.render.install_rbac import cluster_rbac, namespace_rbac, watcher_namespace_rbac
from nvcre_argo.render.install_watcher import watcher_workloads

__all__ = ["InstallSettings", "build_install_manifests"]


def build_install_manifests(settings: InstallSettings) -> list[dict[str, Any]]:
    """Every object to apply, in apply order: the CRD, then the namespaces (the install namespace first),
    cluster RBAC, the watcher's own objects, each watched namespace's RBAC, and the watcher workloads last
    (so a watcher never starts before what it may do is granted)."""
    namespaces = [settings.namespace, *(name for name in settings.watch_namespaces if name != settings.namespace)]
    manifests: list[dict[str, Any]] = [build_crd(), *(namespace_manifest(name) for name in namespaces)]
    manifests += cluster_rbac()
    manifests += watcher_namespace_rbac(settings)
    for watch_namespace in settings.watch_namespaces:
        manifests += namespace_rbac(settings, watch_namespace)
    manifests += watcher_workloads(settings)
    return manifests
