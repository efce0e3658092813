"""The least-privilege RBAC of an installation: three identities, each granted only the calls it makes.

- `nvcre-argo-watcher` (the watcher Deployments, in the install namespace): in each watched namespace it
  lists and watches Certifications and Workflows, writes only the Certification `status` subresource,
  records Events, GETs the result ConfigMaps by name (it never lists them: `controller.inputs` reads each one
  it needs by name, so no `list`/`watch` exposes every ConfigMap of a namespace), and with `--submit`
  creates Workflows. Its Leases live in its own namespace.
- `nvcre-argo-certification` (the certification Workflow's pods, `contract.CERTIFICATION_SERVICE_ACCOUNT`):
  creates, follows and stops its category Workflows (`steps.children`) and reads their failed-node
  ConfigMaps. It reads no node and runs no TrainJob.
- `nvcre-argo-workflow` (the category Workflows' step pods, `contract.WORKFLOW_SERVICE_ACCOUNT`): reads
  nodes (the one cluster-wide grant: node discovery is cluster-wide), runs TrainJobs, reads pods and logs,
  writes the result ConfigMaps, patches its own Workflow's deadline. It cannot create Workflows.

Both Workflow identities also get what Argo's executor needs (argo-hera-trainer.md §2.5). Why split them:
creating a Workflow is as strong as running a pod under any service account of the namespace, so only the
certification Workflow's few steps, which do nothing else, may do it; the step pods, which run the most code
and parse workload output, may not. The certification account still reaches, through a Workflow it creates,
whatever another account of its namespace may do: the namespace is the trust boundary, which is why `install`
takes explicit namespaces, best dedicated to certification. Nodes are read, never written: the product's
promise (no cordon, taint, drain or patch), which tests check rule by rule. Cluster-scoped bindings are named
after the namespace they serve, so installations for different namespaces never overwrite each other's
subjects.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo.api.certification import GROUP, PLURAL
from nvcre_argo.render.install_objects import (
    CERTIFICATION,
    LEADER_ELECTION,
    NODE_READER,
    WATCHER,
    WORKFLOW,
    InstallSettings,
    metadata,
)

ARGO = "argoproj.io"
TRAINER = "trainer.kubeflow.org"
COORDINATION = "coordination.k8s.io"
RBAC = "rbac.authorization.k8s.io"
READ = ("get", "list", "watch")
# Argo's executor (v3.4+) reports step outputs through WorkflowTaskResults.
EXECUTOR = (ARGO, ("workflowtaskresults",), ("create", "patch"))
# What a step creates carries a `blockOwnerDeletion` owner reference to its Workflow; clusters enforcing
# OwnerReferencesPermissionEnforcement (OpenShift) require `update` on the owner's finalizers for that.
OWNER_FINALIZERS = (ARGO, ("workflows/finalizers",), ("update",))


def _rule(group: str, resources: tuple[str, ...], verbs: tuple[str, ...]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": sorted(resources), "verbs": sorted(set(verbs))}


def watcher_rules(*, submit: bool) -> list[dict[str, Any]]:
    """What the watcher may do in each namespace it watches (its Lease is granted separately)."""
    return [
        _rule("", ("configmaps",), ("get",)),
        _rule("", ("events",), ("create",)),
        _rule(ARGO, ("workflows",), (*READ, "create") if submit else READ),
        _rule(GROUP, (PLURAL,), READ),
        _rule(GROUP, (f"{PLURAL}/status",), ("get", "patch", "update")),
    ]


def leader_election_rules() -> list[dict[str, Any]]:
    return [_rule(COORDINATION, ("leases",), ("create", "get", "update"))]


def certification_rules() -> list[dict[str, Any]]:
    """What the certification Workflow's pods may do in its namespace.

    Create and get start and follow a category Workflow (a retried step finds the one it started); list and
    patch stop them (`spec.shutdown`) when the certification Workflow stops; the failed-node ConfigMap of a
    finished category Workflow is read by name."""
    return [
        _rule("", ("configmaps",), ("get",)),
        _rule(ARGO, ("workflows",), ("create", "get", "list", "patch")),
        _rule(*OWNER_FINALIZERS),
        _rule(*EXECUTOR),
    ]


def workflow_rules() -> list[dict[str, Any]]:
    """What the category Workflows' step pods may do in their namespace.

    `workflows` get reads the step's own Workflow and its parent (owner references of the results), and
    patch is how the plan step sets its own Workflow's `activeDeadlineSeconds` (`steps.deadline`); creating
    Workflows is the certification Workflow's alone. ConfigMaps are listed by label to find the group results
    the record step gathers. No step records Events, so none may be created."""
    return [
        _rule("", ("configmaps",), ("create", "get", "list", "patch", "update")),
        _rule("", ("pods",), READ),
        _rule("", ("pods/log",), ("get",)),
        _rule(ARGO, ("workflows",), ("get", "patch")),
        _rule(*OWNER_FINALIZERS),
        _rule(*EXECUTOR),
        _rule(TRAINER, ("trainingruntimes", "trainjobs"), (*READ, "create", "delete")),
        # GB200/GB300 multi-node NVLink: the plan step creates the category's ComputeDomain (owned by the Workflow).
        _rule("resource.nvidia.com", ("computedomains",), ("get", "create")),
        # `enableCheckpoint: true`: the plan step creates the category's checkpoint PVC (owned by the Workflow,
        # so garbage collection deletes it; the step never deletes one, nor touches a PersistentVolume).
        _rule("", ("persistentvolumeclaims",), ("get", "create")),
    ]


def node_reader_rules() -> list[dict[str, Any]]:
    """Nodes are read, never written: no cordon, taint, drain or patch (the product's promise). DRA
    ResourceSlices are read for the GPU architecture of nodes without the GPU product label."""
    return [_rule("", ("nodes",), READ), _rule("resource.k8s.io", ("resourceslices",), READ)]


def _role(
    kind: str, name: str, component: str, rules: list[dict[str, Any]], namespace: str | None = None
) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": metadata(name, component, namespace), "rules": rules}


def _binding(
    kind: str, name: str, component: str, *, role: tuple[str, str], account: tuple[str, str], namespace: str | None
) -> dict[str, Any]:
    role_kind, role_name = role
    account_name, account_namespace = account
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": metadata(name, component, namespace),
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": account_name, "namespace": account_namespace}],
    }


def service_account(name: str, component: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(name, component, namespace)}


def _namespaced_grant(
    name: str, component: str, rules: list[dict[str, Any]], *, account: tuple[str, str], namespace: str
) -> list[dict[str, Any]]:
    """A Role and the RoleBinding that gives it to one service account, both in `namespace`."""
    return [
        _role("Role", name, component, rules, namespace),
        _binding("RoleBinding", name, component, role=("Role", name), account=account, namespace=namespace),
    ]


def cluster_rbac() -> list[dict[str, Any]]:
    """The one ClusterRole: reading nodes (bound per watched namespace by `namespace_rbac`)."""
    return [_role("ClusterRole", NODE_READER, "workflow", node_reader_rules())]


def watcher_namespace_rbac(settings: InstallSettings) -> list[dict[str, Any]]:
    """The watcher's service account and its Lease Role, in the install namespace."""
    return [
        service_account(WATCHER, "watcher", settings.namespace),
        *_namespaced_grant(
            LEADER_ELECTION,
            "watcher",
            leader_election_rules(),
            account=(WATCHER, settings.namespace),
            namespace=settings.namespace,
        ),
    ]


def namespace_rbac(settings: InstallSettings, namespace: str) -> list[dict[str, Any]]:
    """Everything one watched namespace needs for its Certifications to run and be watched."""
    step_account = (WORKFLOW, namespace)
    return [
        service_account(CERTIFICATION, "certification", namespace),
        service_account(WORKFLOW, "workflow", namespace),
        *_namespaced_grant(
            CERTIFICATION,
            "certification",
            certification_rules(),
            account=(CERTIFICATION, namespace),
            namespace=namespace,
        ),
        *_namespaced_grant(WORKFLOW, "workflow", workflow_rules(), account=step_account, namespace=namespace),
        _binding(
            "ClusterRoleBinding",
            f"{NODE_READER}:{namespace}",
            "workflow",
            role=("ClusterRole", NODE_READER),
            account=step_account,
            namespace=None,
        ),
        *_namespaced_grant(
            WATCHER,
            "watcher",
            watcher_rules(submit=settings.submit),
            account=(WATCHER, settings.namespace),
            namespace=namespace,
        ),
    ]
