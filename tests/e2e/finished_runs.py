"""Certification runs that several end-to-end modules read: run once per cluster, kept until it stops.

Why: a run takes minutes, and each of these is read both through the API (what a user reads, and
`nvcre-argo report`) and in the browser (`test_argo_ui.py`, what an operator sees):
- the seed example on the default cluster's healthy nodes (`test_seed_example.py`);
- fault isolation (`testScale: diagnose`) on the larger cluster with two broken nodes and one broken link
  (`test_diagnose.py`);
- a per-node category whose groups one shared runner pod runs (`--shared-runner`), one node crashing
  (`test_shared_runner.py`).
Running each once for both saves one run per session. A run lives in a namespace of its own that the
session's `Clusters` deletes when it stops or replaces the cluster; tests only read it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from tests.harness.namespaces import namespace_for_test
from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 900

# The diagnose run: 32 nodes in 4 NVLink cliques of 8 (`sim-cluster.0` .. `.3`, the "isolation" cluster shape),
# two crashing nodes and one broken link between two cliques.
DIAGNOSE_NODES = 32
DIAGNOSE_PER_CLIQUE = 8
DIAGNOSE_FAULTY = ("gpu-node-21", "gpu-node-3")
DIAGNOSE_BROKEN_LINK = ("sim-cluster.1", "sim-cluster.3")
DIAGNOSE_FAULT_PLAN = {
    "defaults": {"durationSeconds": 2},
    "nodes": {node: {"fault": "crash", "exitCode": 1, "afterSeconds": 1} for node in DIAGNOSE_FAULTY},
    "links": [{"between": list(DIAGNOSE_BROKEN_LINK)}],
}
DIAGNOSE_CATEGORIES = [
    {
        "domain": "communication",
        "variant": "nccl-all-reduce",
        "options": {"testScale": "diagnose", "timeoutPerJob": "4m"},
    }
]


# The shared-runner run: dcgm-level1 per node on the default cluster's 8 nodes, at most 3 at once, compiled with
# `--shared-runner`; gpu-node-3 crashes.
SHARED_RUNNER_CRASHING_NODE = "gpu-node-3"
SHARED_RUNNER_MAX_CONCURRENT = 3
SHARED_RUNNER_FAULT_PLAN = {
    "defaults": {"durationSeconds": 4},
    "nodes": {SHARED_RUNNER_CRASHING_NODE: {"fault": "crash", "exitCode": 1, "afterSeconds": 1}},
}
SHARED_RUNNER_CATEGORIES = [
    {
        "domain": "diagnostics",
        "variant": "dcgm-level1",
        "options": {"maxConcurrent": SHARED_RUNNER_MAX_CONCURRENT, "timeoutPerJob": "5m"},
    }
]


@dataclass(frozen=True)
class Run:
    """One finished certification run: where it ran and the Workflows Argo kept of it."""

    sim: SimCluster  # the cluster it ran on
    namespace: str
    parent: dict[str, Any]  # the certification Workflow
    categories: dict[str, dict[str, Any]]  # "domain/variant" -> its category Workflow

    @property
    def parent_name(self) -> str:
        return str(self.parent["metadata"]["name"])

    def category_name(self, key: str) -> str:
        return str(self.categories[key]["metadata"]["name"])

    def workflow_path(self, name: str) -> str:
        return f"/workflows/{self.namespace}/{name}"


def finish_run(
    sim: SimCluster,
    api: k8s.ApiClient,
    namespace: str,
    certification: dict[str, Any],
    *,
    fault_plan: str | Mapping[str, Any] | None = None,
    expect_phase: str,
    compile_options: Sequence[str] = (),
) -> Run:
    """Run `certification` to its end as a user would (`install`, apply, `nvcre-compile [OPTIONS] | argo
    submit`), and check how the certification Workflow ended."""
    parent = scenario.start_certification(
        sim.kubeconfig, api, certification, fault_plan=fault_plan, compile_options=compile_options
    )
    phase = scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S)
    assert phase == expect_phase, scenario.workflow_tree(api, namespace)
    categories = {
        f"{labels['nvcre.nvidia.com/domain']}/{labels['nvcre.nvidia.com/variant']}": workflow
        for workflow in scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
        for labels in [workflow["metadata"]["labels"]]
    }
    found = scenario.get_workflow(api, namespace, parent)
    assert found is not None
    return Run(sim=sim, namespace=namespace, parent=found, categories=categories)


class SharedRuns:
    """The runs kept on one cluster, by name; `close` deletes their namespaces (before the cluster stops)."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.runs: dict[str, Run] = {}
        self._namespaces = contextlib.ExitStack()

    def get(self, name: str, start: Callable[[SimCluster, k8s.ApiClient, str], Run]) -> Run:
        """The finished run `name`, started (in a new namespace) on first use."""
        if name not in self.runs:
            api = self._namespaces.enter_context(self.sim.api_client())
            namespace = self._namespaces.enter_context(namespace_for_test(api, f"shared::{name}"))
            self.runs[name] = start(self.sim, api, namespace)
        return self.runs[name]

    def close(self) -> None:
        self.runs.clear()
        self._namespaces.close()


def seed_example(sim: SimCluster, api: k8s.ApiClient, namespace: str) -> Run:
    """The seed example (examples/gpu-cluster-cert.yaml) on the cluster's healthy nodes, run to Succeeded."""
    return finish_run(sim, api, namespace, scenario.example_certification(namespace), expect_phase="Succeeded")


def diagnose_example(sim: SimCluster, api: k8s.ApiClient, namespace: str) -> Run:
    """Fault isolation of the example's NCCL all-reduce on the isolation cluster, with the faults above: the
    certification Workflow fails (two nodes are faulty)."""
    certification = scenario.example_certification(namespace, categories=DIAGNOSE_CATEGORIES)
    return finish_run(sim, api, namespace, certification, fault_plan=DIAGNOSE_FAULT_PLAN, expect_phase="Failed")


def shared_runner_example(sim: SimCluster, api: k8s.ApiClient, namespace: str) -> Run:
    """The per-node category above, compiled with `--shared-runner`, with gpu-node-3 crashing: the certification
    Workflow fails."""
    certification = scenario.example_certification(namespace, categories=SHARED_RUNNER_CATEGORIES)
    return finish_run(
        sim,
        api,
        namespace,
        certification,
        fault_plan=SHARED_RUNNER_FAULT_PLAN,
        expect_phase="Failed",
        compile_options=["--shared-runner"],
    )
