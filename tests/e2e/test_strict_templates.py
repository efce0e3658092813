"""The seed example under a hardened Argo: the controller runs with `templateReferencing: Strict`.

Such a controller refuses any Workflow that does not reference a WorkflowTemplate, and any that sets a spec
field outside Argo's allowed overrides. Compiled with `nvcre-compile --template-ref`, the certification
Workflow references the installed `nvcre-certification` template and its category Workflows carry only
arguments, so the whole certification runs; `maxConcurrent` (no longer `spec.parallelism`, which such a
controller refuses) still holds, through the group semaphore the plan step sizes. The default shape is
refused by the same controller, which shows the restriction is really on.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from kubernetes import client as k8s

from nvcre_argo import contract
from nvcre_argo.names import LABEL_CATEGORY_INDEX
from tests.harness.namespaces import namespace_for_test
from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 600
GPU_NODES = [f"gpu-node-{index}" for index in range(1, 9)]
MAX_CONCURRENT = 2
REFUSED = "workflows must use workflowTemplateRef to be executed when the controller is in reference mode"


def _time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def test_the_seed_example_passes_under_strict_template_referencing_with_max_concurrent_honoured(
    strict_sim: SimCluster, request: Any
) -> None:
    with strict_sim.api_client() as api, namespace_for_test(api, request.node.nodeid) as namespace:
        _run(strict_sim, api, namespace)


def _run(sim: SimCluster, api: k8s.ApiClient, namespace: str) -> None:
    scenario.install(sim.kubeconfig, namespace, submit=False)
    certification = scenario.example_certification(namespace)
    # Four groups of two nodes, at most two at once: the semaphore has something to hold back.
    certification["spec"]["categories"][0]["options"] = {"nodesPerJob": 2, "maxConcurrent": MAX_CONCURRENT}

    # The default shape is refused outright by this controller (checked, and deleted, before the Certification
    # exists, so the watcher never reports on it).
    refused = scenario.submit(
        api, scenario.compile_workflow(sim.kubeconfig, certification, options=["--name", "gpu-cluster-cert-default"])
    )
    assert scenario.wait_workflow_done(api, namespace, refused, timeout_s=60) == "Error"
    assert REFUSED in (scenario.get_workflow(api, namespace, refused) or {})["status"]["message"]
    k8s.CustomObjectsApi(api).delete_namespaced_custom_object(*scenario.ARGO, namespace, "workflows", refused)
    scenario.apply_certification(api, certification)

    workflow = scenario.compile_workflow(sim.kubeconfig, certification, options=["--template-ref"])
    assert workflow["spec"]["workflowTemplateRef"] == {"name": contract.CERTIFICATION_TEMPLATE}
    parent = scenario.submit(api, workflow)

    assert scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S) == "Succeeded", (
        scenario.workflow_tree(api, namespace)
    )
    children = sorted(
        scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category"),
        key=lambda child: int(child["metadata"]["labels"]["nvcre.nvidia.com/category-index"]),
    )
    assert [(c["metadata"]["name"], c["status"]["phase"]) for c in children] == [
        (f"{parent}-0", "Succeeded"),
        (f"{parent}-1", "Succeeded"),
    ]
    # Spec order, one after the other: the second category started after the first ended.
    assert _time(children[1]["status"]["startedAt"]) >= _time(children[0]["status"]["finishedAt"])
    for child in children:
        assert "podSpecPatch" not in child["spec"], child["spec"]
        assert "parallelism" not in child["spec"], child["spec"]

    nccl = children[0]
    groups = [node for node in nccl["status"]["nodes"].values() if scenario.is_group_node(node)]
    assert len(groups) == 4, scenario.workflow_tree(api, namespace)
    trainjobs = [
        item
        for item in scenario.trainjobs(api, namespace)
        if item["metadata"]["labels"].get(LABEL_CATEGORY_INDEX) == nccl["metadata"]["labels"][LABEL_CATEGORY_INDEX]
    ]
    assert len(trainjobs) == 4, scenario.names(trainjobs)
    assert scenario.most_trainjobs_at_once(trainjobs) <= MAX_CONCURRENT, scenario.names(trainjobs)
    plan_log = scenario.step_log(api, namespace, nccl["metadata"]["name"], "plan")
    assert "4 group(s)" in plan_log, plan_log
    assert f"at most {MAX_CONCURRENT} group(s) at once" in plan_log, plan_log

    found = scenario.wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=120)
    status = found["status"]
    assert status["result"] == "PASSED", json.dumps(status, indent=1)
    assert status["passed"] == "2/2"
    for category in status["categoryStatuses"]:
        assert category["workflowRef"]["name"].startswith(parent), category
        nodes = scenario.category_nodes(api, namespace, category)
        assert nodes.failed == {}, category
        assert nodes.succeeded == GPU_NODES, category
    assert scenario.unfinished_trainjobs(api, namespace) == []
