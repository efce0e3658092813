"""Everything `nvcre-argo install` applies: the CRD, a namespace, two service accounts, RBAC and the watcher.

Why generated rather than a static file: the RBAC depends on where the watcher looks (one namespace or all)
and on whether it submits Workflows itself, and the least-privilege rules are the product's promise (we never
cordon, taint, drain or patch a node), so they live in code that a test reads rule by rule: no wildcard, and
no write verb on nodes anywhere.

Two identities:
- `nvcre-argo-watcher` (the Deployment): reads Certifications and writes only their status subresource,
  reads Argo Workflows (creates them only with `--submit`), reads the result ConfigMaps, emits Events, and
  holds a Lease for leader election in its own namespace.
- `nvcre-argo-workflow` (every step pod of the compiled Workflows, `contract.WORKFLOW_SERVICE_ACCOUNT`): reads
  nodes (the one ClusterRole it needs: node discovery is cluster-wide), runs TrainJobs, reads their pods and
  logs, writes the node ConfigMaps, and what the Argo executor itself needs (argo-hera-trainer.md §2.5).

Namespaced Roles wherever the resource is namespaced; ClusterRoles only for nodes and, when the watcher
watches every namespace, for the watcher. Cluster-scoped bindings are named after the namespace they serve,
so two installations do not overwrite each other's subjects. Output is deterministic: verbs, resources and
labels are sorted.
"""

from __future__ import annotations

from typing import Any

from nvcre_argo import __version__, contract
from nvcre_argo.api.certification import GROUP, PLURAL
from nvcre_argo.api.crd import build_crd
from nvcre_argo.names import LABEL_MANAGED_BY, MANAGED_BY

WATCHER = "nvcre-argo-watcher"
WORKFLOW = contract.WORKFLOW_SERVICE_ACCOUNT
NODE_READER = "nvcre-argo-node-reader"
LEADER_ELECTION = f"{WATCHER}-leader-election"
METRICS_PORT = 8080
HEALTH_PORT = 8081
RUN_AS_USER = contract.STEP_USER_ID
WATCHER_RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}

ARGO = "argoproj.io"
TRAINER = "trainer.kubeflow.org"
COORDINATION = "coordination.k8s.io"
READ = ("get", "list", "watch")


def _labels(component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/component": component,
        LABEL_MANAGED_BY: MANAGED_BY,
        "app.kubernetes.io/name": "nvcre-argo",
        "app.kubernetes.io/version": __version__,
    }


def _metadata(name: str, component: str, namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = _labels(component)
    return metadata


def _rule(group: str, resources: tuple[str, ...], verbs: tuple[str, ...]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": sorted(resources), "verbs": sorted(set(verbs))}


def watcher_rules(*, submit: bool) -> list[dict[str, Any]]:
    """What the watcher may do in the namespaces it watches (the Lease is granted separately)."""
    return [
        _rule("", ("configmaps",), READ),
        _rule("", ("events",), ("create", "patch")),
        _rule(ARGO, ("workflows",), (*READ, "create") if submit else READ),
        _rule(GROUP, (PLURAL,), READ),
        _rule(GROUP, (f"{PLURAL}/status",), ("get", "patch", "update")),
    ]


def leader_election_rules() -> list[dict[str, Any]]:
    return [_rule(COORDINATION, ("leases",), ("create", "get", "update"))]


def workflow_rules() -> list[dict[str, Any]]:
    """What the step pods may do in the namespace their Workflows run in.

    `workflows` get reads the step's own Workflow and its parent (for owner references, and to see it stop);
    create and get are how a certification Workflow's category step starts and follows its category
    Workflow; list and patch are how it stops them (`spec.shutdown`) when the certification Workflow stops.
    `workflows/finalizers` update lets what the steps create carry `blockOwnerDeletion` owner references to
    their Workflow on clusters that enforce OwnerReferencesPermissionEnforcement (OpenShift; argo-hera-trainer.md
    §2.5); it grants nothing else."""
    return [
        _rule("", ("configmaps",), ("create", "get", "list", "patch", "update")),
        _rule("", ("events",), ("create",)),
        _rule("", ("pods",), READ),
        _rule("", ("pods/log",), ("get",)),
        _rule(ARGO, ("workflows",), ("create", "get", "list", "patch")),
        _rule(ARGO, ("workflows/finalizers",), ("update",)),
        _rule(ARGO, ("workflowtaskresults",), ("create", "patch")),
        _rule(TRAINER, ("trainingruntimes", "trainjobs"), (*READ, "create", "delete")),
    ]


def node_reader_rules() -> list[dict[str, Any]]:
    """Nodes are read, never written: no cordon, taint, drain or patch (the product's promise)."""
    return [_rule("", ("nodes",), READ)]


def _role(
    kind: str, name: str, component: str, rules: list[dict[str, Any]], namespace: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _metadata(name, component, namespace),
        "rules": rules,
    }


def _binding(
    kind: str,
    name: str,
    component: str,
    *,
    role: tuple[str, str],
    account: tuple[str, str],
    namespace: str | None = None,
) -> dict[str, Any]:
    role_kind, role_name = role
    account_name, account_namespace = account
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _metadata(name, component, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": account_name, "namespace": account_namespace}],
    }


def _service_account(name: str, component: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(name, component, namespace)}


def watcher_args(watch_namespace: str | None, namespace: str, *, submit: bool) -> list[str]:
    """The `nvcre-argo watch` command line the Deployment runs."""
    args = ["watch", f"--namespace={watch_namespace}" if watch_namespace else "--all-namespaces"]
    if submit:
        args.append("--submit")
    args += [
        f"--metrics-port={METRICS_PORT}",
        f"--health-port={HEALTH_PORT}",
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
    ]
    return args


def _deployment(namespace: str, image: str, watch_namespace: str | None, *, submit: bool) -> dict[str, Any]:
    selector = {"app.kubernetes.io/component": "watcher", "app.kubernetes.io/name": "nvcre-argo"}
    container = {
        "name": "watcher",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["nvcre-argo"],
        "args": watcher_args(watch_namespace, namespace, submit=submit),
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
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(WATCHER, "watcher", namespace),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": _labels("watcher")},
                "spec": {
                    "serviceAccountName": WATCHER,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS_USER,
                        "runAsGroup": RUN_AS_USER,
                        "fsGroup": RUN_AS_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


def build_install_manifests(
    namespace: str, image: str, watch_namespace: str | None, *, submit: bool = True
) -> list[dict[str, Any]]:
    """Every object to apply, in apply order (CRD and namespace first, the Deployment last).

    `namespace` holds the watcher; `watch_namespace` is the one namespace it watches (None: all). The
    workflow service account and its Role live where the Workflows run: `watch_namespace`, else `namespace`
    (Certifications in other namespaces then need the same account and RoleBinding there). `submit` runs the
    watcher with `--submit` and grants it `create` on Workflows; without it, Workflows are submitted by
    `argo submit` or GitOps and the watcher only reads them."""
    run_namespace = watch_namespace or namespace
    watcher_account, workflow_account = (WATCHER, namespace), (WORKFLOW, run_namespace)
    manifests: list[dict[str, Any]] = [
        build_crd(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": _labels("install")}},
        _service_account(WATCHER, "watcher", namespace),
        _service_account(WORKFLOW, "workflow", run_namespace),
        _role("ClusterRole", NODE_READER, "workflow", node_reader_rules()),
        _binding(
            "ClusterRoleBinding",
            f"{NODE_READER}:{run_namespace}",
            "workflow",
            role=("ClusterRole", NODE_READER),
            account=workflow_account,
        ),
    ]
    if watch_namespace is None:
        manifests += [
            _role("ClusterRole", WATCHER, "watcher", watcher_rules(submit=submit)),
            _binding(
                "ClusterRoleBinding",
                f"{WATCHER}:{namespace}",
                "watcher",
                role=("ClusterRole", WATCHER),
                account=watcher_account,
            ),
        ]
    else:
        manifests += [
            _role("Role", WATCHER, "watcher", watcher_rules(submit=submit), watch_namespace),
            _binding(
                "RoleBinding",
                WATCHER,
                "watcher",
                role=("Role", WATCHER),
                account=watcher_account,
                namespace=watch_namespace,
            ),
        ]
    manifests += [
        _role("Role", LEADER_ELECTION, "watcher", leader_election_rules(), namespace),
        _binding(
            "RoleBinding",
            LEADER_ELECTION,
            "watcher",
            role=("Role", LEADER_ELECTION),
            account=watcher_account,
            namespace=namespace,
        ),
        _role("Role", WORKFLOW, "workflow", workflow_rules(), run_namespace),
        _binding(
            "RoleBinding",
            WORKFLOW,
            "workflow",
            role=("Role", WORKFLOW),
            account=workflow_account,
            namespace=run_namespace,
        ),
        _deployment(namespace, image, watch_namespace, submit=submit),
    ]
    return manifests
