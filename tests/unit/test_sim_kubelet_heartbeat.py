"""The sim kubelet's heartbeat survives a failed request: one connection dropped while renewing a Lease, or a
node mark that cannot be undone yet, must not stop every node's heartbeat for the rest of the session (the
node lifecycle controller would taint every node unreachable, the system node where the step pods run
included)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from tests.sim.config import KubeletConfig, NodeSpec
from tests.sim.kubelet import SimKubelet

PASSES_WANTED = 3


def _kubelet(tmp_path: Path) -> SimKubelet:
    """A sim kubelet whose API server is never reached (every request of these tests is replaced)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": "unused"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }),
        encoding="utf-8",
    )  # fmt: skip
    config = KubeletConfig(
        kubeconfig=str(kubeconfig),
        workdir=str(tmp_path),
        apiserver_port=1,
        log_port=1,
        log_cert="",
        log_key="",
        nodes=[NodeSpec(name="gpu-node-1", labels={}), NodeSpec(name="gpu-node-2", labels={})],
        images={},
        host_binds=[],
        sandbox_python="",
        heartbeat_seconds=0.01,
    )
    return SimKubelet(config)


def _run_passes(kubelet: SimKubelet, passes: list[int]) -> None:
    """Run the heartbeat until it made PASSES_WANTED passes (or 10 s went by), then stop it."""
    thread = threading.Thread(target=kubelet.heartbeat_forever, daemon=True)
    thread.start()
    for _ in range(1000):
        if len(passes) >= PASSES_WANTED:
            break
        kubelet.stopping.wait(0.01)
    kubelet.stopping.set()
    thread.join(timeout=10)


def test_a_dropped_connection_while_renewing_a_lease_does_not_stop_the_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubelet = _kubelet(tmp_path)
    renewed: list[str] = []
    passes: list[int] = []

    def renew(name: str) -> None:
        renewed.append(name)
        if len(renewed) == 1:
            raise ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))

    monkeypatch.setattr(kubelet, "_renew_lease", renew)
    monkeypatch.setattr(kubelet, "_report_ready_again", lambda: None)
    monkeypatch.setattr(kubelet, "_restore_finished_marks", lambda: passes.append(1))
    _run_passes(kubelet, passes)

    # The first pass failed on its first renewal; the heartbeat went on renewing both nodes' Leases.
    assert renewed.count("gpu-node-1") >= 2, renewed
    assert renewed.count("gpu-node-2") >= 2, renewed


def test_a_node_mark_that_cannot_be_undone_yet_is_undone_on_a_later_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubelet = _kubelet(tmp_path)
    kubelet.marks["finished-test"].append(("gpu-node-1", {"cordon": True}))
    undone: list[tuple[str, dict[str, Any]]] = []
    attempts: list[int] = []
    passes: list[int] = []

    def undo(node: str, change: dict[str, Any]) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise ApiException(status=409, reason="Conflict")
        undone.append((node, change))

    def renew(name: str) -> None:
        if name == "gpu-node-1":
            passes.append(1)

    monkeypatch.setattr(kubelet.core, "read_namespace", lambda name: (_ for _ in ()).throw(ApiException(status=404)))
    monkeypatch.setattr(kubelet, "_undo", undo)
    monkeypatch.setattr(kubelet, "_renew_lease", renew)
    monkeypatch.setattr(kubelet, "_report_ready_again", lambda: None)
    _run_passes(kubelet, passes)

    assert undone == [("gpu-node-1", {"cordon": True})]
    assert kubelet.marks == {}
