"""The seed example on Argo Workflows v4.0 (the compiled Workflows must run on both Argo lines).

A cluster of its own (Argo's CRDs differ between the lines): the v3 cluster stops while it runs.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import Clusters
from tests.harness.namespaces import namespace_for_test
from tests.sim import scenario

RUN_TIMEOUT_S = 600
pytestmark = pytest.mark.argo_release("v4")


def test_the_seed_example_passes_on_argo_v4(clusters: Clusters, request: pytest.FixtureRequest) -> None:
    sim_v4 = clusters.get("v4")
    with sim_v4.api_client() as api, namespace_for_test(api, request.node.nodeid) as namespace:
        scenario.install(sim_v4.kubeconfig, namespace, submit=False)
        certification = scenario.example_certification(namespace)
        scenario.apply_certification(api, certification)
        parent = scenario.submit(api, scenario.compile_workflow(sim_v4.kubeconfig, certification))
        phase = scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S)
        assert phase == "Succeeded", scenario.workflow_tree(api, namespace)
        found = scenario.wait_certification_result(api, namespace, "gpu-cluster-cert", timeout_s=120)
        assert found["status"]["result"] == "PASSED", json.dumps(found["status"], indent=1)
