"""Fixtures for the integration tests: one real control plane per pytest process, one namespace per test.

The control plane (etcd + kube-apiserver from ``make testbin``) is session-scoped because it takes seconds to
start and megabytes of CRDs to fill; tests stay independent by working in their own namespace. Under xdist
each worker process starts its own control plane. Missing binaries FAIL the run with the command that builds
them; skipping would let CI pass while testing nothing.

Every test collected under this directory is marked ``k8s`` so ``-m "not k8s"`` deselects them all.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.connect import connect
from tests.harness.controlplane import Cluster, ControlPlaneError, start_cluster
from tests.harness.crds import CrdInstallError, crd_files
from tests.harness.namespaces import namespace_for_test
from tests.harness.versions import BUILD_COMMAND, BinaryDirs, HarnessSetupError, binary_dirs
from tests.integration.steps_support import NodeSet

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration with ``k8s`` (this hook sees the whole session's items)."""
    del config
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.k8s)


def required_binaries() -> BinaryDirs:
    """The binary directories, or a test failure naming the build command."""
    try:
        dirs = binary_dirs()
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        pytest.fail(f"cannot locate the control-plane binaries ({exc}); build them with `{BUILD_COMMAND}`")
    missing = dirs.missing()
    if missing:
        pytest.fail(
            f"control-plane binaries missing: {', '.join(map(str, missing))}. Build them with `{BUILD_COMMAND}`."
        )
    return dirs


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Cluster]:
    """A running etcd + kube-apiserver with every CRD installed and Established."""
    binaries = required_binaries()
    failure: str | None = None
    try:
        cluster = start_cluster(binaries, crd_files())
    except HarnessSetupError as exc:
        failure = f"{exc}; `{BUILD_COMMAND}` downloads the CRD modules"
    except (ControlPlaneError, CrdInstallError) as exc:
        failure = str(exc)
    if failure is not None:  # failed outside the except block, so the report is the message, not two tracebacks
        pytest.fail(failure)
    try:
        yield cluster
    finally:
        cluster.plane.stop()


@pytest.fixture(scope="module")
def kube(control_plane: Cluster) -> KubeClient:
    """The product's own client (what `connect` builds) for the test cluster."""
    return connect(str(control_plane.kubeconfig))


@pytest.fixture
def namespace(control_plane: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards.

    No kube-controller-manager runs, so a deleted namespace stays ``Terminating`` with its objects; the
    unique name keeps tests apart regardless.
    """
    with control_plane.api_client() as api, namespace_for_test(api, request.node.nodeid) as name:
        yield name


@pytest.fixture
def nodes(kube: KubeClient, namespace: str) -> Iterator[NodeSet]:
    """Nodes a test creates (they are cluster-scoped, so the namespace does not take them): deleted after it."""
    node_set = NodeSet(kube, namespace)
    try:
        yield node_set
    finally:
        node_set.delete_all()
