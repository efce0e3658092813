"""The certification Workflow in real Argo operation: stop, lost step pods, overlapping runs, deleted Workflows.

- Stopped (``argo stop``) or terminated (``argo terminate``) mid-run, the certification Workflow stops its
  category Workflow, whose exit handler deletes its TrainJobs: within 60 s no TrainJob, workload pod or
  category Workflow runs on.
- Two certifications of the same nodes submitted together run one after the other (Argo's mutex).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 600
STOP_WITHIN_S = 60
DIAGNOSTICS_ONLY = [{"domain": "diagnostics", "variant": "dcgm-level1"}]
ARGO_TIME = "%Y-%m-%dT%H:%M:%SZ"


def _start_long_run(sim: SimCluster, api: k8s.ApiClient, namespace: str, seconds: int) -> str:
    scenario.install(sim.kubeconfig, namespace, submit=False)
    scenario.write_fault_plan(api, namespace, f"defaults: {{durationSeconds: {seconds}}}\n")
    certification = scenario.example_certification(namespace, categories=DIAGNOSTICS_ONLY)
    scenario.apply_certification(api, certification)
    return scenario.submit(api, scenario.compile_workflow(sim.kubeconfig, certification))


def _wait_first_trainjob(api: k8s.ApiClient, namespace: str) -> None:
    scenario.wait_for(
        "the first TrainJob",
        lambda: scenario.trainjobs(api, namespace),
        timeout_s=RUN_TIMEOUT_S,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )


def _running_children(api: k8s.ApiClient, namespace: str) -> list[str]:
    children = scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    return [
        child["metadata"]["name"]
        for child in children
        if child.get("status", {}).get("phase") not in scenario.FINAL_PHASES
    ]


@pytest.mark.parametrize("strategy", ["Stop", "Terminate"])
def test_stopping_the_certification_workflow_frees_the_gpus_within_a_minute(
    sim: SimCluster, api: k8s.ApiClient, namespace: str, strategy: str
) -> None:
    parent = _start_long_run(sim, api, namespace, seconds=600)
    _wait_first_trainjob(api, namespace)

    # What `argo stop` / `argo terminate` do: set the Workflow's spec.shutdown.
    stopped_at = time.monotonic()
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        *scenario.ARGO, namespace, "workflows", parent, {"spec": {"shutdown": strategy}}
    )

    def everything_stopped() -> bool:
        return not (
            scenario.unfinished_trainjobs(api, namespace)
            or scenario.running_workload_pods(api, namespace)
            or _running_children(api, namespace)
        )

    scenario.wait_for(
        f"no TrainJob, workload pod or category Workflow left after `{strategy}`",
        everything_stopped,
        timeout_s=STOP_WITHIN_S,
        describe=lambda: (
            f"TrainJobs: {scenario.unfinished_trainjobs(api, namespace)}\n"
            f"pods: {scenario.running_workload_pods(api, namespace)}\n{scenario.workflow_tree(api, namespace)}"
        ),
    )
    print(f"\n{strategy}: GPUs free {time.monotonic() - stopped_at:.0f} s after the shutdown request")
    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=STOP_WITHIN_S) in ("Failed", "Error")


def _category_window(workflow: dict[str, Any]) -> tuple[datetime, datetime]:
    """When a certification Workflow's category steps ran: the first start and the last finish."""
    nodes = [
        node for node in workflow["status"]["nodes"].values() if node.get("templateName", "").startswith("category-")
    ]
    starts = [datetime.strptime(node["startedAt"], ARGO_TIME) for node in nodes]
    ends = [datetime.strptime(node["finishedAt"], ARGO_TIME) for node in nodes]
    return min(starts), max(ends)


def test_two_certifications_of_the_same_nodes_run_one_after_the_other(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    scenario.install(sim.kubeconfig, namespace, submit=False)
    scenario.write_fault_plan(api, namespace, "defaults: {durationSeconds: 10}\n")
    parents = []
    for name in ("pool-cert-a", "pool-cert-b"):
        certification = scenario.example_certification(namespace, categories=DIAGNOSTICS_ONLY)
        certification["metadata"]["name"] = name
        scenario.apply_certification(api, certification)
        parents.append(scenario.submit(api, scenario.compile_workflow(sim.kubeconfig, certification)))

    for parent in parents:
        assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S) == "Succeeded", (
            scenario.workflow_tree(api, namespace)
        )
    first, second = sorted(_category_window(scenario.get_workflow(api, namespace, parent) or {}) for parent in parents)
    assert first[1] <= second[0], f"the runs overlapped: {first} and {second}\n{scenario.workflow_tree(api, namespace)}"
