"""How the product behaves in operation on the simulated cluster: kubectl apply, a controller crash.

- A Certification applied with ``kubectl apply`` is compiled and submitted by the watcher (installed by
  ``nvcre-argo install``, running as a real pod) and its status follows the run to PASSED.
  Deleting the Workflows afterwards (``argo delete``) keeps the results ``nvcre-argo report`` reads.
- Argo's workflow-controller killed (SIGKILL) mid-run and started again: the certification still completes,
  and each group's TrainJob was created exactly once.
"""

from __future__ import annotations

import json
import time

from kubernetes import client as k8s

from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 600
DIAGNOSTICS_ONLY = [{"domain": "diagnostics", "variant": "dcgm-level1"}]


def test_a_certification_applied_with_kubectl_is_run_by_the_watcher_to_passed(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    scenario.install(sim.kubeconfig, namespace, submit=True)
    certification = scenario.example_certification(namespace, categories=DIAGNOSTICS_ONLY)
    scenario.apply_certification(api, certification)

    found = scenario.wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=RUN_TIMEOUT_S)
    status = found["status"]
    assert status["result"] == "PASSED", json.dumps(status, indent=1)
    (category,) = status["categoryStatuses"]
    assert category["status"] == "Succeeded"
    # The status follows the categories; the certification Workflow ends a moment later with its verdict step.
    (parent,) = scenario.names(scenario.workflows(api, namespace, "nvcre.nvidia.com/role=certification"))
    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=120) == "Succeeded"
    assert len(scenario.category_nodes(api, namespace, category).succeeded) == 8

    # `argo delete` of the certification Workflow (the garbage collector takes its category Workflow): the
    # results the Certification points at are owned by the Certification, so the report still lists every node.
    k8s.CustomObjectsApi(api).delete_namespaced_custom_object(
        *scenario.ARGO, namespace, "workflows", parent, propagation_policy="Background"
    )
    scenario.wait_for(
        "the Workflows to be deleted",
        lambda: not scenario.workflows(api, namespace),
        timeout_s=120,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )
    report = json.loads(
        scenario.run_cli("report", "gpu-cluster-cert", "-n", namespace, "-o", "json", kubeconfig=sim.kubeconfig).stdout
    )
    (reported,) = report["categories"]
    assert reported["nodesPassed"] == 8, report
    assert reported["missingResults"] == []
    owners = k8s.CoreV1Api(api).read_namespaced_config_map(category["succeededNodesRef"]["name"], namespace)
    assert [owner.kind for owner in owners.metadata.owner_references] == ["Certification"]


def test_the_certification_completes_when_argos_controller_is_killed_mid_run(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    scenario.install(sim.kubeconfig, namespace, submit=False)
    scenario.write_fault_plan(api, namespace, "defaults: {durationSeconds: 20}\n")
    certification = scenario.example_certification(namespace, categories=DIAGNOSTICS_ONLY)
    scenario.apply_certification(api, certification)
    parent = scenario.submit(api, scenario.compile_workflow(sim.kubeconfig, certification))

    scenario.wait_for(
        "the first TrainJob",
        lambda: scenario.trainjobs(api, namespace),
        timeout_s=RUN_TIMEOUT_S,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )
    sim.restart_argo()
    time.sleep(1)

    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S) == "Succeeded", (
        scenario.workflow_tree(api, namespace)
    )
    found = scenario.wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=120)
    assert found["status"]["result"] == "PASSED", json.dumps(found["status"], indent=1)
    assert scenario.unfinished_trainjobs(api, namespace) == []
    assert scenario.running_workload_pods(api, namespace) == []
