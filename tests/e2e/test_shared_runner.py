"""One shared runner pod runs all of a category's groups (`nvcre-compile --shared-runner`), under Argo's real
controller, with every group still a node of its own.

The shared-runner run (`finished_runs.py`): dcgm-level1 per node on the 8 nodes, at most 3 at once, gpu-node-3
crashes. What must hold:
- the verdict is the one a step pod per group gives: exactly gpu-node-3 fails (WorkloadFailed), the 7 others
  are certified;
- the category Workflow runs four pods, whatever its number of groups: plan, run-groups, record, cleanup;
- each of the 8 groups is a suspend node that the runner completed: the crashed group Failed with the
  message a group's own step pod would show, and its outputs; the others Succeeded;
- the runner holds `maxConcurrent` itself (no Argo semaphore on the group nodes): 3 TrainJobs at once at
  most, and 3 at some point; no group node keeps the message it showed while it waited for a slot.
"""

from __future__ import annotations

import json

from nvcre_argo import contract
from tests.e2e.finished_runs import SHARED_RUNNER_CRASHING_NODE, SHARED_RUNNER_MAX_CONCURRENT, Run
from tests.sim import scenario

DCGM = "diagnostics/dcgm-level1"


def test_the_shared_runner_gives_the_verdict_a_pod_per_group_gives(shared_runner_run: Run) -> None:
    run = shared_runner_run
    with run.sim.api_client() as api:
        status = scenario.finished_certification_status(api, run.namespace, result="FAILED")
        (dcgm,) = status["categoryStatuses"]
        nodes = scenario.category_nodes(api, run.namespace, dcgm)
    failed = {name: reason for name, (reason, _) in nodes.failed.items()}
    assert failed == {SHARED_RUNNER_CRASHING_NODE: "WorkloadFailed"}, json.dumps(status, indent=1)
    assert nodes.succeeded == [f"gpu-node-{index}" for index in (1, 2, 4, 5, 6, 7, 8)]


def test_one_runner_pod_runs_every_group_and_each_group_is_a_node_it_completes(shared_runner_run: Run) -> None:
    child = shared_runner_run.categories[DCGM]
    assert child["spec"]["entrypoint"] == contract.shared_runner_entrypoint(contract.TEMPLATE_CATEGORY)
    graph = list(child["status"]["nodes"].values())
    pods = sorted(node["templateName"] for node in graph if node["type"] == "Pod")
    assert pods == ["cleanup", "plan", "record", "run-groups"], pods

    groups = [node for node in graph if node.get("templateName") == contract.TEMPLATE_GROUP]
    assert len(groups) == 8
    assert {node["type"] for node in groups} == {"Suspend"}
    assert all(node.get("finishedAt") for node in groups)
    failed = [node for node in groups if node["phase"] != "Succeeded"]
    assert len(failed) == 1, [(node["displayName"], node["phase"]) for node in groups]
    (crashed,) = failed
    assert crashed["phase"] == "Failed"
    expected = f"1 node(s) failed: {SHARED_RUNNER_CRASHING_NODE} (WorkloadFailed)"
    assert crashed["message"].startswith(expected), crashed["message"]
    outputs = {item["name"]: item.get("value") for item in crashed["outputs"]["parameters"]}
    assert outputs[contract.OUTPUT_FAILED_NODE_COUNT] == "1"

    (runner,) = [node for node in graph if node["type"] == "Pod" and node.get("templateName") == "run-groups"]
    assert runner["phase"] == "Failed"
    assert "7/8 group(s) passed" in runner["message"], runner["message"]


def test_the_runner_runs_max_concurrent_groups_at_once(shared_runner_run: Run) -> None:
    with shared_runner_run.sim.api_client() as api:
        trainjobs = scenario.trainjobs(api, shared_runner_run.namespace)
        assert scenario.unfinished_trainjobs(api, shared_runner_run.namespace) == []
    assert len(trainjobs) == 8
    assert scenario.most_trainjobs_at_once(trainjobs) == SHARED_RUNNER_MAX_CONCURRENT

    graph = shared_runner_run.categories[DCGM]["status"]["nodes"].values()
    groups = [node for node in graph if node.get("templateName") == contract.TEMPLATE_GROUP]
    assert not any(node.get("message") for node in groups if node["phase"] == "Succeeded"), "a waiting message left"
