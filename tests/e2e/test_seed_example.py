"""The seed example, run by Argo's real controller on eight healthy simulated GPU nodes.

Submitted as ``argo submit`` would (the compiled Workflow created through the API), with the watcher
installed by ``nvcre-argo install`` running as a real pod (the run is shared with `test_argo_ui.py`, see
`tests/e2e/finished_runs.py`); asserted on what a user sees: Workflow phases,
the Certification's status, the result ConfigMaps and ``nvcre-argo report``.
"""

from __future__ import annotations

import json

from kubernetes import client as k8s

from tests.e2e.finished_runs import Run
from tests.sim import scenario
from tests.sim.cluster import SimCluster

GPU_NODES = [f"gpu-node-{index}" for index in range(1, 9)]


def test_the_seed_example_passes_on_healthy_nodes_with_its_measurements_reported(
    seed_example_run: Run, sim: SimCluster, api: k8s.ApiClient
) -> None:
    namespace = seed_example_run.namespace  # finished: Succeeded (see tests/e2e/finished_runs.py)
    children = scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    assert sorted((c["metadata"]["labels"]["nvcre.nvidia.com/variant"], c["status"]["phase"]) for c in children) == [
        ("nccl-all-reduce", "Succeeded"),
        ("nemotron5-8b", "Succeeded"),
    ]

    # Argo's own pods really ran the steps: the plan step's log, read through the API as `argo logs` does.
    (nccl_workflow,) = [
        c["metadata"]["name"]
        for c in children
        if c["metadata"]["labels"]["nvcre.nvidia.com/variant"] == "nccl-all-reduce"
    ]
    plan_log = scenario.step_log(api, namespace, nccl_workflow, "plan")
    assert "communication/nccl-all-reduce: 8 node(s), 0 excluded, 1 group(s)" in plan_log, plan_log

    found = scenario.wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=120)
    status = found["status"]
    assert status["result"] == "PASSED", json.dumps(status, indent=1)
    assert status["passed"] == "2/2"
    for category in status["categoryStatuses"]:
        nodes = scenario.category_nodes(api, namespace, category)
        assert nodes.failed == {}, category
        assert nodes.succeeded == GPU_NODES, category

    report = json.loads(
        scenario.run_cli("report", "gpu-cluster-cert", "-n", namespace, "-o", "json", kubeconfig=sim.kubeconfig).stdout
    )
    assert report["result"] == "PASSED"
    figures = {category["variant"]: category.get("figures", {}) for category in report["categories"]}
    # The simulator's healthy defaults (tests/sim/faults.py): what the product measured from the real-format logs.
    assert figures["nccl-all-reduce"]["busBandwidthGBps"] > 0, report
    assert figures["nemotron5-8b"]["avgStepTimeSec"] > 0, report
    assert scenario.unfinished_trainjobs(api, namespace) == []
    assert scenario.running_workload_pods(api, namespace) == []
