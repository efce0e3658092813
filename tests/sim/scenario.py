"""What a user does on the simulated cluster, as a user does it: the product's own CLI and the API.

Install nvcre-argo into a namespace (``nvcre-argo install``), write a fault plan, apply a Certification,
submit the compiled Workflow exactly as ``argo submit`` would (create it through the API), wait for the
verdict, and read what a user reads (Workflow phases, the Certification's status, the failed-node
ConfigMaps, ``nvcre-argo report``). Shared by the end-to-end tests and ``make demo``.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nvcre_argo import contract
from nvcre_argo.results import FAILED_NODES_KEY, SUCCEEDED_NODES_KEY, decode_failed_nodes, decode_succeeded_nodes
from tests.harness.versions import REPO_ROOT
from tests.sim.config import FAULT_PLAN_CONFIGMAP, FAULT_PLAN_KEY

EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
ARGO = ("argoproj.io", "v1alpha1")
NVCRE = ("nvcre.nvidia.com", "v1alpha1")
FINAL_PHASES = ("Succeeded", "Failed", "Error")
POLL_SECONDS = 2.0
CLI = (sys.executable, "-m", "nvcre_argo")


class ScenarioError(AssertionError):
    """The cluster did not reach the state a scenario waited for (the message says what it saw)."""


def example_certification(namespace: str, **spec_changes: Any) -> dict[str, Any]:
    """The seed example, moved to ``namespace``, with top-level spec fields replaced."""
    document = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    document["metadata"]["namespace"] = namespace
    document["spec"].update(copy.deepcopy(spec_changes))
    return dict(document)


def run_cli(
    *args: str, kubeconfig: Path, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``nvcre-argo`` (or ``nvcre-compile`` when the first arg is ``compile``) as a user would."""
    proc = subprocess.run(
        [*CLI, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )
    if check and proc.returncode != 0:
        raise ScenarioError(f"nvcre-argo {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def install(kubeconfig: Path, namespace: str, *, submit: bool) -> None:
    """``nvcre-argo install``: the watcher and the Workflow service account live in the test's namespace."""
    args = ["install", "--namespace", namespace, "--watch-namespace", namespace]
    run_cli(*args, *([] if submit else ["--no-submit"]), kubeconfig=kubeconfig)


def write_fault_plan(api: k8s.ApiClient, namespace: str, plan_yaml: str) -> None:
    """Create the namespace's fault plan, or replace it (a node "repaired" between two runs)."""
    body = {"metadata": {"name": FAULT_PLAN_CONFIGMAP}, "data": {FAULT_PLAN_KEY: plan_yaml}}
    core = k8s.CoreV1Api(api)
    try:
        core.create_namespaced_config_map(namespace, body)
    except ApiException as error:
        if error.status != 409:
            raise
        core.replace_namespaced_config_map(FAULT_PLAN_CONFIGMAP, namespace, body)


def apply_certification(api: k8s.ApiClient, certification: dict[str, Any]) -> dict[str, Any]:
    namespace = certification["metadata"]["namespace"]
    created: dict[str, Any] = k8s.CustomObjectsApi(api).create_namespaced_custom_object(
        *NVCRE, namespace, "certifications", certification
    )
    return created


def compile_workflow(
    kubeconfig: Path, certification: dict[str, Any], catalogs: Sequence[Path] = (), options: Sequence[str] = ()
) -> dict[str, Any]:
    """``nvcre-compile cert.yaml [--catalog DIR ...] [OPTIONS]`` → the certification Workflow (one document)."""
    catalog_args = [arg for directory in catalogs for arg in ("--catalog", str(directory))]
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "nvcre-compile"), "-", "--format", "json", *catalog_args, *options],
        input=yaml.safe_dump(certification),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise ScenarioError(f"nvcre-compile failed ({proc.returncode}):\n{proc.stderr}")
    workflow: dict[str, Any] = json.loads(proc.stdout)
    return workflow


def submit(api: k8s.ApiClient, workflow: dict[str, Any]) -> str:
    """Create the Workflow through the API, as ``argo submit`` does; returns its generated name."""
    namespace = workflow["metadata"]["namespace"]
    created = k8s.CustomObjectsApi(api).create_namespaced_custom_object(*ARGO, namespace, "workflows", workflow)
    return str(created["metadata"]["name"])


def start_certification(
    kubeconfig: Path,
    api: k8s.ApiClient,
    certification: dict[str, Any],
    *,
    fault_plan: str | Mapping[str, Any] | None = None,
    compile_options: Sequence[str] = (),
) -> str:
    """Write the namespace's fault plan (YAML text, or data to dump as YAML), then do what a user does to run a
    Certification: ``nvcre-argo install --no-submit``, apply it, ``nvcre-compile [OPTIONS] | argo submit``.
    Returns the certification Workflow's name."""
    namespace = certification["metadata"]["namespace"]
    install(kubeconfig, namespace, submit=False)
    if isinstance(fault_plan, str):
        write_fault_plan(api, namespace, fault_plan)
    elif fault_plan is not None:
        write_fault_plan(api, namespace, yaml.safe_dump(dict(fault_plan)))
    apply_certification(api, certification)
    return submit(api, compile_workflow(kubeconfig, certification, options=compile_options))


def finished_status(
    api: k8s.ApiClient, namespace: str, parent: str, *, phase: str, result: str, timeout_s: float
) -> dict[str, Any]:
    """Check that the certification Workflow ``parent`` ends in ``phase`` and that the watcher then gives its
    Certification (the example's name) the final ``result``; that Certification's status."""
    assert wait_workflow_done(api, namespace, parent, timeout_s=timeout_s) == phase, workflow_tree(api, namespace)
    return finished_certification_status(api, namespace, result=result)


def finished_certification_status(api: k8s.ApiClient, namespace: str, *, result: str) -> dict[str, Any]:
    """The example Certification's status once the watcher gave it a final result, checked to be ``result``."""
    status: dict[str, Any] = wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=120)["status"]
    assert status["result"] == result, json.dumps(status, indent=1)
    return status


def workflows(api: k8s.ApiClient, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    found = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
        *ARGO, namespace, "workflows", label_selector=selector
    )
    return list(found["items"])


def get_workflow(api: k8s.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
            *ARGO, namespace, "workflows", name
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def get_certification(api: k8s.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        *NVCRE, namespace, "certifications", name
    )
    return found


def wait_for(what: str, check: Callable[[], Any], *, timeout_s: float, describe: Callable[[], str]) -> Any:
    """Poll ``check`` until it returns something truthy; on timeout fail with ``describe()``'s picture."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ScenarioError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{describe()}")
        time.sleep(POLL_SECONDS)


def workflow_phase(api: k8s.ApiClient, namespace: str, name: str) -> str:
    found = get_workflow(api, namespace, name)
    return str((found or {}).get("status", {}).get("phase", ""))


def wait_workflow_done(api: k8s.ApiClient, namespace: str, name: str, *, timeout_s: float) -> str:
    wait_for(
        f"Workflow {namespace}/{name} to finish",
        lambda: workflow_phase(api, namespace, name) in FINAL_PHASES,
        timeout_s=timeout_s,
        describe=lambda: workflow_tree(api, namespace),
    )
    return workflow_phase(api, namespace, name)


def wait_certification_result(api: k8s.ApiClient, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
    """Wait until the watcher wrote a final result (PASSED, FAILED or INCOMPLETE) and return the object."""

    def final() -> dict[str, Any] | None:
        found = get_certification(api, namespace, name)
        result = found.get("status", {}).get("result")
        return found if result in ("PASSED", "FAILED", "INCOMPLETE") else None

    found: dict[str, Any] = wait_for(
        f"Certification {namespace}/{name} to get a final result",
        final,
        timeout_s=timeout_s,
        describe=lambda: (
            json.dumps(get_certification(api, namespace, name).get("status", {}), indent=1)
            + "\n"
            + workflow_tree(api, namespace)
        ),
    )
    return found


@dataclass(frozen=True)
class CategoryNodes:
    """What one category's ConfigMaps say: failed nodes with (reason, message), and succeeded nodes."""

    failed: dict[str, tuple[str, str]]
    succeeded: list[str]


def category_nodes(api: k8s.ApiClient, namespace: str, category_status: dict[str, Any]) -> CategoryNodes:
    core = k8s.CoreV1Api(api)
    failed: dict[str, tuple[str, str]] = {}
    succeeded: list[str] = []
    if category_status.get("failedNodesRef"):
        found = core.read_namespaced_config_map(category_status["failedNodesRef"]["name"], namespace)
        for node in decode_failed_nodes(_binary(found, FAILED_NODES_KEY)):
            failed[node.name] = (node.reason, node.message)
    if category_status.get("succeededNodesRef"):
        found = core.read_namespaced_config_map(category_status["succeededNodesRef"]["name"], namespace)
        succeeded = decode_succeeded_nodes(_binary(found, SUCCEEDED_NODES_KEY))
    return CategoryNodes(failed=failed, succeeded=succeeded)


def _binary(configmap: k8s.V1ConfigMap, key: str) -> bytes:
    return base64.b64decode((configmap.binary_data or {})[key])


def trainjobs(api: k8s.ApiClient, namespace: str) -> list[dict[str, Any]]:
    found = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs"
    )
    return list(found["items"])


def trainjob_finished_at(trainjob: Mapping[str, Any]) -> datetime:
    """When a finished TrainJob became Complete or Failed."""
    conditions = (trainjob.get("status") or {}).get("conditions") or []
    (end,) = [c for c in conditions if c["type"] in ("Complete", "Failed") and c["status"] == "True"]
    return datetime.fromisoformat(end["lastTransitionTime"])


def most_trainjobs_at_once(trainjobs: Sequence[dict[str, Any]]) -> int:
    """The largest number of finished ``trainjobs`` that existed unfinished at the moment one of them was
    created: how many groups ran at once, whichever way the groups were run (a suspend node's start is when
    Argo created it, before the semaphore let it run)."""
    spans = [
        (datetime.fromisoformat(item["metadata"]["creationTimestamp"]), trainjob_finished_at(item))
        for item in trainjobs
    ]
    return max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans)


def unfinished_trainjobs(api: k8s.ApiClient, namespace: str) -> list[str]:
    """TrainJobs neither Complete nor Failed: what would still hold GPUs after a run."""

    def finished(item: dict[str, Any]) -> bool:
        conditions = item.get("status", {}).get("conditions") or []
        return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)

    return names(item for item in trainjobs(api, namespace) if not finished(item))


def running_workload_pods(api: k8s.ApiClient, namespace: str) -> list[str]:
    """Workload pods (not Argo's) still Pending or Running: GPUs not given back."""
    pods = k8s.CoreV1Api(api).list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name").items
    return sorted(
        f"{pod.metadata.name} on {pod.spec.node_name}"
        for pod in pods
        if pod.status.phase in ("Pending", "Running") and not pod.metadata.deletion_timestamp
    )


def _seconds(node: dict[str, Any]) -> str:
    """How long an Argo node ran, from its RFC 3339 start and finish ("" while it runs)."""
    started, finished = node.get("startedAt"), node.get("finishedAt")
    if not started or not finished:
        return ""
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    took = datetime.strptime(finished, fmt) - datetime.strptime(started, fmt)
    return f" {took.total_seconds():.0f}s"


def workflow_tree(api: k8s.ApiClient, namespace: str) -> str:
    """Every Workflow of the namespace with its steps and how long each took, as ``argo get`` summarises."""
    lines = []
    for workflow in sorted(workflows(api, namespace), key=lambda w: w["metadata"]["creationTimestamp"]):
        status = workflow.get("status", {})
        phase = f"{status.get('phase', 'Pending')}{_seconds(status)}"
        lines.append(f"Workflow {workflow['metadata']['name']}: {phase} {status.get('message', '')}")
        nodes = status.get("nodes", {}).values()
        for node in sorted(nodes, key=lambda n: (n.get("startedAt") or "", n.get("displayName", ""))):
            if node.get("type") in ("Pod", "Skipped", "Suspend"):
                message = (node.get("message") or "").splitlines()[0:1]
                lines.append(
                    f"  {node.get('displayName')}: {node.get('phase')}{_seconds(node)}"
                    + (f" ({message[0][:160]})" if message else "")
                )
    return "\n".join(lines) or f"(no Workflow in {namespace})"


def is_group_node(node: Mapping[str, Any]) -> bool:
    """Whether an Argo node of a category Workflow is one of its groups: a `group` suspend node that the shared
    runner completes (the default), or a `run-group` step pod (`nvcre-compile --pod-per-group`)."""
    return (node.get("type"), node.get("templateName")) in {
        ("Suspend", contract.TEMPLATE_GROUP),
        ("Pod", contract.TEMPLATE_RUN_GROUP),
    }


def names(items: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in items)


def step_log(api: k8s.ApiClient, namespace: str, workflow: str, step: str) -> str:
    """The main container's log of the step pod whose Argo node name ends with ``.<step>``, read through the
    API (pods/log), as ``argo logs`` and the Argo UI read it."""
    core = k8s.CoreV1Api(api)
    pods = core.list_namespaced_pod(namespace, label_selector=f"workflows.argoproj.io/workflow={workflow}").items
    for pod in pods:
        node_name = (pod.metadata.annotations or {}).get("workflows.argoproj.io/node-name", "")
        if node_name.endswith(f".{step}") or node_name.endswith(f".{step}(0)"):
            return str(core.read_namespaced_pod_log(pod.metadata.name, namespace, container="main"))
    raise ScenarioError(f"no pod of step {step!r} in Workflow {workflow}")
