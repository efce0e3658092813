"""The certification Workflow in real Argo operation: stop, lost step pods, overlapping runs, deleted Workflows.

- Stopped (``argo stop``) or terminated (``argo terminate``) mid-run, the certification Workflow stops its
  category Workflow, whose exit handler deletes its TrainJobs: within 60 s no TrainJob, workload pod or
  category Workflow runs on.
- A step pod gone mid-run (the category step of the certification Workflow, and the shared runner; deleted
  at once, as the pod garbage collector deletes a lost node's pods) is retried, follows the Workflow and the
  TrainJobs already started, and the run ends with its results recorded; each group's TrainJob is created
  exactly once.
- A category step lost for good (its container SIGTERM'd with its pod left) does not let the next category
  start while its category Workflow runs on: the next category step waits for it. The Certification calls
  that category Failed, as the Argo UI shows its step, although its Workflow passed.
- A shared runner lost for good (SIGTERM'd with its pod left: `Failed`, exit code 143, which Argo does not
  retry) does not leave its groups waiting for the deadline: the category step stops the category Workflow.
- Two certifications of the same nodes submitted together run one after the other (Argo's mutex).
- `argo retry` of a failed certification tests the failed category again, as a new category Workflow.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.harness.versions import binary_dirs
from tests.sim import scenario
from tests.sim.cluster import SimCluster
from tests.sim.processes import step_processes

RUN_TIMEOUT_S = 600
STOP_WITHIN_S = 60
DIAGNOSTICS_ONLY = [{"domain": "diagnostics", "variant": "dcgm-level1"}]
ARGO_TIME = "%Y-%m-%dT%H:%M:%SZ"


def _start_long_run(
    sim: SimCluster, api: k8s.ApiClient, namespace: str, seconds: int, categories: list[dict[str, str]] | None = None
) -> str:
    scenario.install(sim.kubeconfig, namespace, submit=False)
    scenario.write_fault_plan(api, namespace, f"defaults: {{durationSeconds: {seconds}}}\n")
    certification = scenario.example_certification(namespace, categories=categories or DIAGNOSTICS_ONLY)
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


def _step_pods(api: k8s.ApiClient, namespace: str, workflow: str, step: str) -> list[k8s.V1Pod]:
    """Pods of the Workflow whose Argo node name holds ``step`` (``.name``) and whose step still runs (a pod
    stays Running for a moment after its `main` container ended, while Argo's `wait` container saves outputs)."""
    pods = (
        k8s.CoreV1Api(api)
        .list_namespaced_pod(namespace, label_selector=f"workflows.argoproj.io/workflow={workflow}")
        .items
    )
    return [
        pod
        for pod in pods
        if step in (pod.metadata.annotations or {}).get("workflows.argoproj.io/node-name", "")
        and pod.status.phase == "Running"
        and any(c.name == "main" and c.state.running for c in pod.status.container_statuses or [])
    ]


def test_step_pods_lost_mid_run_are_retried_and_the_results_are_recorded(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    parent = _start_long_run(sim, api, namespace, seconds=60)
    _wait_first_trainjob(api, namespace)
    (child,) = scenario.names(scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category"))

    # The shared runner running every group of the category (first: it ends with the groups' workloads), then
    # the certification Workflow's category step, each gone as on a lost node, whose pods the pod garbage
    # collector deletes at once: the runner's retry must follow the TrainJobs its groups started, the category
    # step's the category Workflow. (A graceful deletion lets the kubelet report the step's exit code 143 first;
    # Argo reads that as `Failed` when it looks before the pod is gone, and does not retry it: the tests of a
    # step "lost for good" below.)
    for workflow, step in ((child, ".run-groups"), (parent, ".dcgm-level1")):
        pod = scenario.wait_for(
            f"a running {step} step pod",
            lambda workflow=workflow, step=step: _step_pods(api, namespace, workflow, step),
            timeout_s=120,
            describe=lambda: scenario.workflow_tree(api, namespace),
        )[0]
        k8s.CoreV1Api(api).delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)

    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S) == "Succeeded", (
        f"{scenario.workflow_tree(api, namespace)}\nchild spec.shutdown: "
        f"{(scenario.get_workflow(api, namespace, child) or {}).get('spec', {}).get('shutdown')}"
    )
    # The deleted attempt ended `Error` (`pod deleted`), or, deleted before Argo recorded it running, Argo made
    # its pod again in the same attempt.
    for workflow, template in ((parent, "category-"), (child, "run-groups")):
        attempts = sorted(
            (
                node
                for node in scenario.get_workflow(api, namespace, workflow)["status"]["nodes"].values()
                if node["type"] == "Pod" and node.get("templateName", "").startswith(template)
            ),
            key=lambda node: str(node["startedAt"]),
        )
        ends = [node["phase"] for node in attempts]
        assert ends[-1] == "Succeeded", ends
        assert all(phase == "Error" for phase in ends[:-1]), ends
    assert scenario.names(scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")) == [child]
    # One TrainJob per group, never a second one for a retried step.
    trainjobs = scenario.trainjobs(api, namespace)
    groups = [item["metadata"]["labels"]["nvcre.nvidia.com/group"] for item in trainjobs]
    assert len(groups) == len(set(groups)), scenario.names(trainjobs)
    (record,) = [
        node
        for node in scenario.get_workflow(api, namespace, child)["status"]["nodes"].values()
        if node.get("templateName") == "record" and node["type"] == "Pod"
    ]
    assert record["phase"] == "Succeeded"
    status = {"succeededNodesRef": {"name": _output(record, "succeeded-nodes-ref")}}
    assert len(scenario.category_nodes(api, namespace, status).succeeded) == 8


def _output(node: dict[str, Any], name: str) -> str:
    (value,) = [item["value"] for item in node["outputs"]["parameters"] if item["name"] == name]
    return str(value)


def _category_window(workflow: dict[str, Any]) -> tuple[datetime, datetime]:
    """When a certification Workflow's category steps ran: the first start and the last finish."""
    nodes = [
        node for node in workflow["status"]["nodes"].values() if node.get("templateName", "").startswith("category-")
    ]
    starts = [datetime.strptime(node["startedAt"], ARGO_TIME) for node in nodes]
    ends = [datetime.strptime(node["finishedAt"], ARGO_TIME) for node in nodes]
    return min(starts), max(ends)


def _stop_step_container(
    api: k8s.ApiClient, namespace: str, workflow: str, step: str, *, command: str | None = None
) -> None:
    """SIGTERM the first process of a running step's container (the pod of `workflow` whose Argo node name holds
    `.step`, running the step command `command`, by default `step`), as the kubelet does when it stops a
    container and leaves its pod: Argo then reads `Failed`, exit code 143."""
    scenario.wait_for(
        f"a running .{step} step pod",
        lambda: _step_pods(api, namespace, workflow, f".{step}"),
        timeout_s=120,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )
    wanted = command or step
    (process,) = [item for item in step_processes() if item.command == wanted and item.container_first]
    os.kill(process.pid, signal.SIGTERM)


def test_a_shared_runner_lost_for_good_stops_its_category_at_once_and_frees_the_gpus(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    """A runner whose container the kubelet stopped with its pod left (SIGTERM to the container's first
    process, Argo's executor): Argo reads `Failed`, exit code 143, and does not retry it. Its groups would wait
    for the category's deadline (10-minute workloads here); the category step stops the category Workflow
    instead, whose exit handler deletes the TrainJobs, and the certification fails at once saying why."""
    parent = _start_long_run(sim, api, namespace, seconds=600)
    _wait_first_trainjob(api, namespace)
    (child,) = scenario.names(scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category"))
    _stop_step_container(api, namespace, child, "run-groups")
    stopped_at = time.monotonic()

    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=2 * STOP_WITHIN_S) == "Failed", (
        scenario.workflow_tree(api, namespace)
    )
    print(f"\nrunner lost: certification Failed {time.monotonic() - stopped_at:.0f} s after the SIGTERM")
    assert scenario.unfinished_trainjobs(api, namespace) == []
    assert scenario.get_workflow(api, namespace, child)["spec"]["shutdown"] == "Stop"
    child_nodes = scenario.get_workflow(api, namespace, child)["status"]["nodes"].values()
    (runner,) = [node for node in child_nodes if node["type"] == "Pod" and node["templateName"] == "run-groups"]
    assert (runner["phase"], runner["outputs"]["exitCode"]) == ("Failed", "143")
    parent_nodes = scenario.get_workflow(api, namespace, parent)["status"]["nodes"].values()
    (category_step,) = [
        node for node in parent_nodes if node["type"] == "Retry" and node["templateName"].startswith("category-")
    ]
    lost = "main: Error (exit code 143)"
    expected = f"stopped Workflow {child} because its shared runner run-groups ended Failed: {lost}"
    assert expected in category_step["message"], category_step["message"]


def test_a_category_step_lost_for_good_does_not_let_the_next_category_start_beside_its_category(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    """The category step's container stopped with its pod left: Argo reads `Failed`, exit code 143, does not
    retry it, and goes on to the next category while the lost step's category Workflow runs on. The next
    category step waits for it to end before starting its own."""
    two = [*DIAGNOSTICS_ONLY, {"domain": "diagnostics", "variant": "dcgm-level2"}]
    parent = _start_long_run(sim, api, namespace, seconds=30, categories=two)
    _wait_first_trainjob(api, namespace)
    (first,) = scenario.names(scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category"))
    _stop_step_container(api, namespace, parent, "dcgm-level1", command="category")

    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S) == "Failed"
    parent_nodes = scenario.get_workflow(api, namespace, parent)["status"]["nodes"].values()
    lost = [node for node in parent_nodes if node["type"] == "Pod" and node["templateName"] == "category-0"]
    assert [(node["phase"], node["outputs"]["exitCode"]) for node in lost] == [("Failed", "143")]
    categories = {
        item["metadata"]["labels"]["nvcre.nvidia.com/category-index"]: item
        for item in scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    }
    assert sorted(categories) == ["0", "1"]
    assert categories["0"]["metadata"]["name"] == first
    assert categories["0"]["status"]["phase"] == "Succeeded"  # it ran on, unfollowed
    assert categories["1"]["status"]["phase"] == "Succeeded"
    ended = datetime.strptime(categories["0"]["status"]["finishedAt"], ARGO_TIME)
    started = datetime.strptime(categories["1"]["metadata"]["creationTimestamp"], ARGO_TIME)
    assert started >= ended, (categories["0"]["status"]["finishedAt"], categories["1"]["metadata"]["creationTimestamp"])

    # kubectl agrees with the Argo UI's red step: the unfollowed category is Failed, saying its tests passed.
    status = scenario.wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=120)["status"]
    assert (status["result"], status["passed"]) == ("FAILED", "1/2"), status
    unfollowed, followed = status["categoryStatuses"]
    assert unfollowed["status"] == "Failed", unfollowed
    assert unfollowed["message"].startswith("the certification Workflow's step for this category failed:"), unfollowed
    assert unfollowed["message"].endswith(f"(Workflow {first} Succeeded)"), unfollowed
    assert followed["status"] == "Succeeded", followed


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


CRASH_ON_NODE_3 = "defaults: {durationSeconds: 3}\nnodes:\n  gpu-node-3: {fault: crash, exitCode: 1, afterSeconds: 1}\n"
REPAIRED = "defaults: {durationSeconds: 3}\n"


def _failed_run_then_repaired(sim: SimCluster, api: k8s.ApiClient, namespace: str) -> tuple[str, set[str]]:
    """A certification that failed on gpu-node-3's crash, whose node was then repaired; (parent, TrainJobs)."""
    scenario.install(sim.kubeconfig, namespace, submit=False)
    scenario.write_fault_plan(api, namespace, CRASH_ON_NODE_3)
    nccl = {"domain": "communication", "variant": "nccl-all-reduce", "options": {"nodesPerJob": 2}}
    certification = scenario.example_certification(namespace, categories=[nccl])
    scenario.apply_certification(api, certification)
    parent = scenario.submit(api, scenario.compile_workflow(sim.kubeconfig, certification))
    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S) == "Failed"
    assert scenario.wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=120)["status"][
        "result"
    ] == ("FAILED")
    scenario.write_fault_plan(api, namespace, REPAIRED)
    return parent, set(scenario.names(scenario.trainjobs(api, namespace)))


def _argo_retry(sim: SimCluster, api: k8s.ApiClient, namespace: str, workflow: str) -> None:
    """`argo retry`, once Argo's controller has finished with the Workflow (its `completed` label), as an
    operator would: retried while the controller still writes its end, the reset can be overwritten."""
    scenario.wait_for(
        f"Argo to mark {workflow} completed",
        lambda: (
            ((scenario.get_workflow(api, namespace, workflow) or {}).get("metadata", {}).get("labels") or {}).get(
                "workflows.argoproj.io/completed"
            )
            == "true"
        ),
        timeout_s=120,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )
    argo = binary_dirs().argo / "argo"
    retried = subprocess.run(
        [str(argo), "retry", workflow, "-n", namespace, "--kubeconfig", str(sim.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert retried.returncode == 0, retried.stdout + retried.stderr


def _wait_succeeded(api: k8s.ApiClient, namespace: str, workflow: str) -> None:
    scenario.wait_for(
        f"the retried Workflow {workflow} to succeed",
        lambda: scenario.workflow_phase(api, namespace, workflow) == "Succeeded",
        timeout_s=RUN_TIMEOUT_S,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )


def test_argo_retry_of_a_failed_certification_tests_the_failed_category_again(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    """The operator repaired the node and ran `argo retry` on the certification Workflow: the failed category
    runs again as a new category Workflow (new TrainJobs), passes, and the Certification follows it."""
    parent, first_trainjobs = _failed_run_then_repaired(sim, api, namespace)
    _argo_retry(sim, api, namespace, parent)
    _wait_succeeded(api, namespace, parent)

    children = scenario.names(scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category"))
    assert children == [f"{parent}-0", f"{parent}-0-r2"], children
    new_trainjobs = set(scenario.names(scenario.trainjobs(api, namespace))) - first_trainjobs
    assert len(new_trainjobs) == len(first_trainjobs) == 4, sorted(new_trainjobs)

    def passed() -> dict[str, Any] | None:
        status = scenario.get_certification(api, namespace, "gpu-cluster-cert").get("status") or {}
        return status if status.get("result") == "PASSED" else None

    status = scenario.wait_for(
        "the Certification to follow the new attempt",
        passed,
        timeout_s=120,
        describe=lambda: str(scenario.get_certification(api, namespace, "gpu-cluster-cert").get("status")),
    )
    assert status["categoryStatuses"][0]["workflowRef"]["name"] == f"{parent}-0-r2", status
