"""Certification runs that several end-to-end modules read: run once per cluster, kept until it stops.

Why: the seed example on the default cluster takes minutes, and both `test_seed_example.py` (what a user reads
through the API and `nvcre-argo report`) and `test_argo_ui.py` (what an operator sees in the browser) need
exactly that finished run. Running it once for both saves one run per session. The run lives in a namespace
of its own that the session's `Clusters` deletes when it stops or replaces the cluster; tests only read it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from tests.harness.namespaces import namespace_for_test
from tests.sim import scenario
from tests.sim.cluster import SimCluster

RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class Run:
    """One finished certification run: where it ran and the Workflows Argo kept of it."""

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
    fault_plan: str | None = None,
    expect_phase: str,
) -> Run:
    """Run `certification` to its end as a user would (`install`, apply, `nvcre-compile | argo submit`), and
    check how the certification Workflow ended."""
    parent = scenario.start_certification(sim.kubeconfig, api, certification, fault_plan=fault_plan)
    phase = scenario.wait_workflow_done(api, namespace, parent, timeout_s=RUN_TIMEOUT_S)
    assert phase == expect_phase, scenario.workflow_tree(api, namespace)
    categories = {
        f"{labels['nvcre.nvidia.com/domain']}/{labels['nvcre.nvidia.com/variant']}": workflow
        for workflow in scenario.workflows(api, namespace, "nvcre.nvidia.com/role=category")
        for labels in [workflow["metadata"]["labels"]]
    }
    found = scenario.get_workflow(api, namespace, parent)
    assert found is not None
    return Run(namespace=namespace, parent=found, categories=categories)


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
