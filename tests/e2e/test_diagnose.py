"""Adaptive fault isolation (`testScale: diagnose`) run by Argo's real controller, round by round.

32 nodes in 4 NVLink cliques of 8 (`sim-cluster.0` .. `.3`), with two broken nodes and one broken link:

    gpu-node-3   crash (clique 0)      -> failed, WorkloadFailed
    gpu-node-21  crash (clique 2)      -> failed, WorkloadFailed
    sim-cluster.1 <-> sim-cluster.3    -> an infrastructure fault between those domains, no node blamed

The same pure planner that `plan-round` runs is played here against an oracle of the same faults, so the
test knows how many rounds and jobs the isolation must take; the run must match it exactly and name exactly
those nodes and that link, in the ConfigMaps, the Certification's status and `nvcre-argo report`. Every other
node is certified. The run is shared with the browser tests (`tests/e2e/finished_runs.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from nvcre_argo.plan.isolation import Candidate, plan_isolation_round
from nvcre_argo.results import DiagnoseRecord, read_diagnose
from tests.bench.isolation_sim import Run as IsolationRun
from tests.bench.isolation_sim import Scenario, run_planner
from tests.e2e.finished_runs import (
    DIAGNOSE_BROKEN_LINK,
    DIAGNOSE_FAULTY,
    DIAGNOSE_NODES,
    DIAGNOSE_PER_CLIQUE,
    Run,
)
from tests.sim import scenario


def expected_run() -> IsolationRun:
    """The rounds and jobs the planner needs on these faults (the simulator plays exactly this model)."""
    candidates = tuple(
        sorted(
            (
                Candidate(f"gpu-node-{i}", f"sim-cluster.{(i - 1) // DIAGNOSE_PER_CLIQUE}")
                for i in range(1, DIAGNOSE_NODES + 1)
            ),
            key=lambda candidate: candidate.node,
        )
    )
    faults = Scenario(
        candidates=candidates,
        node_faults=frozenset(DIAGNOSE_FAULTY),
        link_faults=frozenset({DIAGNOSE_BROKEN_LINK}),
    )
    return run_planner(plan_isolation_round, faults)


@pytest.fixture
def isolation_api(diagnose_run: Run) -> Iterator[k8s.ApiClient]:
    with diagnose_run.sim.api_client() as client:
        yield client


def diagnose_record(api: k8s.ApiClient, namespace: str, category_status: dict[str, object]) -> DiagnoseRecord:
    ref = category_status["failedNodesRef"]
    assert isinstance(ref, dict)
    configmap = k8s.CoreV1Api(api).read_namespaced_config_map(ref["name"], namespace)
    record = read_diagnose({"binaryData": configmap.binary_data or {}})
    assert record is not None, f"{ref['name']} has no isolation summary"
    return record


def test_diagnose_names_exactly_the_faulty_nodes_and_the_broken_link_in_the_predicted_rounds(
    diagnose_run: Run, isolation_api: k8s.ApiClient
) -> None:
    api, namespace = isolation_api, diagnose_run.namespace  # finished: Failed (see tests/e2e/finished_runs.py)
    predicted = expected_run()

    status = scenario.finished_certification_status(api, namespace, result="FAILED")
    (category,) = status["categoryStatuses"]
    tree = scenario.workflow_tree(api, namespace)
    nodes = scenario.category_nodes(api, namespace, category)
    assert {name: reason for name, (reason, _) in nodes.failed.items()} == dict.fromkeys(
        DIAGNOSE_FAULTY, "WorkloadFailed"
    ), tree
    healthy = {f"gpu-node-{i}" for i in range(1, DIAGNOSE_NODES + 1)} - set(DIAGNOSE_FAULTY)
    assert set(nodes.succeeded) == healthy

    record = diagnose_record(api, namespace, category)
    assert [fault["domain"] for fault in record["infrastructureFaults"]] == ["|".join(DIAGNOSE_BROKEN_LINK)], (
        json.dumps(record)
    )
    assert (record["rounds"], record["jobs"], record["nodeJobs"]) == (
        predicted.rounds,
        predicted.jobs,
        predicted.node_jobs,
    ), json.dumps(record["history"])
    assert record["untested"] == []
    assert scenario.unfinished_trainjobs(api, namespace) == []

    # What an operator reads: the Certification's status and `nvcre-argo report`.
    link = "link fault between domains sim-cluster.1 and sim-cluster.3"
    assert link in category["message"], json.dumps(category)
    summary = category["diagnose"]
    assert (summary["rounds"], summary["jobs"]) == (predicted.rounds, predicted.jobs)
    assert [fault["domain"] for fault in summary["infrastructureFaults"]] == ["|".join(DIAGNOSE_BROKEN_LINK)]
    report = scenario.run_cli(
        "report", "gpu-cluster-cert", "-n", namespace, kubeconfig=diagnose_run.sim.kubeconfig, check=False
    )
    assert f"Diagnose:  {predicted.rounds} rounds, {predicted.jobs} jobs" in report.stdout, report.stdout
    assert "link sim-cluster.1|sim-cluster.3 (inter-screening)" in report.stdout, report.stdout

    # In the Argo UI each round is a plan-round step and its groups `r<round>-g<i>`; the last plan-round ends it.
    (child,) = scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
    nodes = child["status"]["nodes"].values()
    plan_rounds = [node for node in nodes if node["type"] == "Pod" and node["templateName"] == "plan-round"]
    assert len(plan_rounds) == predicted.rounds + 1, tree
    groups = [node["displayName"] for node in nodes if scenario.is_group_node(node)]
    assert len(groups) == predicted.jobs, groups
    rounds = {name.split(":")[1].split("-")[0] for name in groups}
    assert rounds == {f"r{n}" for n in range(1, predicted.rounds + 1)}, groups
