"""Fixtures for the end-to-end tests: one simulated GPU cluster per session, one namespace per test.

The cluster (tests/sim/cluster.py) takes about a minute to start, so it is shared; tests stay independent
by working in their own namespace (their own watcher, Workflows, fault plan and results). Deleting the
namespace after a test also undoes what its faults did to nodes (the sim kubelet watches for that).
Missing binaries FAIL the run with the command that builds them: a skipped end-to-end test proves nothing.

Every test collected under this directory is marked ``e2e`` (run by ``make e2e``; ``make unit`` skips them).
Set ``NVCRE_SIM_KEEP=1`` to keep the cluster's work directory (every component's log) after the session.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from tests.e2e.finished_runs import Run, SharedRuns, diagnose_example, seed_example, shared_runner_example
from tests.harness.controlplane import ControlPlaneError
from tests.harness.namespaces import namespace_for_test
from tests.harness.versions import BUILD_COMMAND, HarnessSetupError
from tests.sim.cluster import ArgoRelease, SimCluster, gpu_nodes

HERE = Path(__file__).resolve().parent
NODE_COUNT = 8
# Cluster shapes by name: the default serves most tests; fault isolation needs more nodes in more cliques.
SHAPES = {"default": (NODE_COUNT, 4), "isolation": (32, 8), "strict": (NODE_COUNT, 4)}  # (GPU nodes, per clique)
# Shapes whose Argo controller runs with extra configuration: "strict" is a hardened controller that runs only
# Workflows referencing a WorkflowTemplate, with nothing but Argo's allowed overrides.
ARGO_CONFIG = {"strict": {"workflowRestrictions": "templateReferencing: Strict\n"}}
ISOLATION_FIXTURE = "isolation_sim"
STRICT_FIXTURE = "strict_sim"
SHARED_RUN_FIXTURES = {"seed_example_run", "diagnose_run", "shared_runner_run"}
# Argo's controller operates on a Workflow again 1 s after one of its pods changed, as in Argo's own end-to-end
# tests, instead of its default 10 s: these tests check behaviour, not the overhead a user's controller adds
# (the benchmarks keep the default), and each step would otherwise wait for it once or twice.
ARGO_REQUEUE_S = 1.0
CLUSTER_MARKER = "argo_release"  # `pytest.mark.argo_release("v4")`: the module runs on another Argo line


def _interrupt(signum: int, frame: object) -> None:
    del signum, frame
    raise KeyboardInterrupt("SIGTERM")


def pytest_configure(config: pytest.Config) -> None:
    """A SIGTERM (a CI time limit, ``timeout``) ends the run like Ctrl-C, so the session fixtures still stop
    the simulated cluster: its components run in their own sessions and would outlive a plain exit."""
    del config
    signal.signal(signal.SIGTERM, _interrupt)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
    # Tests on the default cluster first, then on Argo v4, then on the strict and the larger cluster: the
    # session starts each cluster once, and the runs shared between modules are made once. Within a cluster the
    # modules reading a shared run come first and together, while the run's step pods (kept ten
    # minutes by podGC) still have their logs.
    sharing = {item.path for item in items if SHARED_RUN_FIXTURES & set(getattr(item, "fixturenames", ()))}
    items.sort(key=lambda item: (_cluster_order(item), item.path not in sharing))


def _cluster_order(item: pytest.Item) -> int:
    fixtures = getattr(item, "fixturenames", ())
    if ISOLATION_FIXTURE in fixtures:
        return 3
    if STRICT_FIXTURE in fixtures:
        return 2
    marker = item.get_closest_marker(CLUSTER_MARKER)
    return 1 if marker is not None and marker.args == ("v4",) else 0


def start_sim(argo: ArgoRelease, shape: str = "default") -> SimCluster:
    """A started simulated cluster of that shape, or a test failure that says what is missing."""
    failure = None
    count, per_clique = SHAPES[shape]
    try:
        keep = bool(os.environ.get("NVCRE_SIM_KEEP"))
        nodes = gpu_nodes(count, per_clique=per_clique)
        return SimCluster(
            nodes=nodes,
            argo=argo,
            keep_workdir=keep,
            argo_config=ARGO_CONFIG.get(shape),
            argo_requeue_seconds=ARGO_REQUEUE_S,
        ).start()
    except HarnessSetupError as exc:
        failure = f"{exc}; `{BUILD_COMMAND}` builds and downloads what the simulated cluster needs"
    except ControlPlaneError as exc:
        failure = str(exc)
    pytest.fail(failure)


class Clusters:
    """At most one simulated cluster at a time: two would share two cores, and Argo's controller serves
    its health endpoint on a fixed port. A test asking for another Argo line or cluster shape stops the
    running cluster."""

    def __init__(self) -> None:
        self.current: SimCluster | None = None
        self.current_shape = ""
        self.shared: SharedRuns | None = None

    def get(self, major: str, shape: str = "default") -> SimCluster:
        if self.current is not None and (self.current.argo.major, self.current_shape) == (major, shape):
            return self.current
        self.stop()
        self.current = start_sim(ArgoRelease(major), shape)
        self.current_shape = shape
        self.shared = SharedRuns(self.current)
        return self.current

    def shared_run(
        self, name: str, start: Callable[[SimCluster, k8s.ApiClient, str], Run], shape: str = "default"
    ) -> Run:
        """A finished run several modules read (`tests/e2e/finished_runs.py`), on a v3 cluster of `shape`."""
        self.get("v3", shape)
        assert self.shared is not None
        return self.shared.get(name, start)

    def stop(self) -> None:
        if self.shared is not None:
            self.shared.close()
            self.shared = None
        if self.current is not None:
            self.current.stop()
            self.current = None


@pytest.fixture(scope="session")
def clusters() -> Iterator[Clusters]:
    running = Clusters()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def seed_example_run(clusters: Clusters) -> Run:
    """The seed example on the default cluster's healthy nodes, finished; run once for every module reading it."""
    return clusters.shared_run("seed-example", seed_example)


@pytest.fixture
def diagnose_run(clusters: Clusters, isolation_sim: SimCluster) -> Run:
    """Fault isolation on the isolation cluster with two broken nodes and a broken link, finished; run once for
    every module reading it (it asks for `isolation_sim` so that its tests are ordered with that cluster's)."""
    del isolation_sim
    return clusters.shared_run("diagnose", diagnose_example, shape="isolation")


@pytest.fixture
def shared_runner_run(clusters: Clusters) -> Run:
    """A per-node category run by one shared runner pod on the default cluster, one node crashing, finished; run
    once for every module reading it."""
    return clusters.shared_run("shared-runner", shared_runner_example)


@pytest.fixture
def sim(clusters: Clusters) -> SimCluster:
    """The session's simulated cluster with Argo v3.7 (started on first use)."""
    return clusters.get("v3")


@pytest.fixture
def isolation_sim(clusters: Clusters) -> SimCluster:
    """A larger simulated cluster (32 GPU nodes in 4 cliques of 8) with Argo v3.7, for fault isolation."""
    return clusters.get("v3", "isolation")


@pytest.fixture
def strict_sim(clusters: Clusters) -> SimCluster:
    """The default cluster, its Argo v3.7 controller under `templateReferencing: Strict`."""
    return clusters.get("v3", "strict")


@pytest.fixture
def api(sim: SimCluster) -> Iterator[k8s.ApiClient]:
    with sim.api_client() as client:
        yield client


@pytest.fixture
def namespace(api: k8s.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    with namespace_for_test(api, request.node.nodeid) as name:
        yield name
