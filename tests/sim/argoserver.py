"""Argo's server with its UI, for one namespace of the simulated cluster: the dashboard an operator opens.

``make testbin`` builds ``argo`` from the pinned Argo v3 module with the UI embedded and the server bound to
127.0.0.1 (hack/testbin.sh, build_argo_cli). Started as Argo's install runs it: in the controller's namespace,
reading the controller's ConfigMap there (the server refuses to start without it, and UI links and columns are
configured in it), with ``--namespaced --managed-namespace NS`` so the UI shows the one namespace of a test;
``--auth-mode=server`` (the server's own kubeconfig, no login page) and ``--secure=false`` (plain HTTP on
loopback, so the browser needs no certificate). Used by the browser tests (one server per test namespace) and
by ``make demo``.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.harness.controlplane import Component, ControlPlaneError, free_port, log_tail, spawn
from tests.harness.versions import BUILD_COMMAND, HarnessSetupError, binary_dirs
from tests.sim.cluster import ARGO_NAMESPACE

START_TIMEOUT_S = 60.0
POLL_S = 0.3


def argo_binary() -> Path:
    """The ``argo`` binary with the UI, or a setup error naming the command that builds it."""
    binary = binary_dirs().argo / "argo"
    if not binary.is_file():
        raise HarnessSetupError(f"missing {binary} (argo server with its UI); `{BUILD_COMMAND}` builds it")
    return binary


def argo_ui_built() -> bool:
    """Whether ``make testbin`` has built the server with its UI (``make demo`` only offers it then)."""
    try:
        argo_binary()
    except HarnessSetupError:
        return False
    return True


class ArgoServer:
    """``argo server`` for ``namespace`` on a free loopback port; :meth:`start` waits until it answers.

    ``config_namespace`` holds the controller's ``workflow-controller-configmap`` (the simulated cluster's Argo
    namespace by default)."""

    def __init__(
        self,
        *,
        kubeconfig: Path,
        namespace: str,
        workdir: Path,
        env: dict[str, str] | None = None,
        config_namespace: str = ARGO_NAMESPACE,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.config_namespace = config_namespace
        self.workdir = workdir
        self.env = env or {}
        self.port = 0
        self._component: Component | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        argv = [
            str(argo_binary()), "server", "--auth-mode=server", "--secure=false", "--namespaced",
            f"--managed-namespace={self.namespace}", f"--namespace={self.config_namespace}",
            f"--kubeconfig={self.kubeconfig}", f"--port={self.port}", "--loglevel=info",
        ]  # fmt: skip
        self._component = spawn("argo-server", argv, self.workdir / "argo-server.log", self.env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self._component.exited():
                failure = self._component.failure("exited before it served its API")
                self.stop()
                raise failure
            if time.monotonic() > deadline:
                tail = log_tail(self._component.log_path, 20)
                self.stop()
                raise ControlPlaneError(f"argo server did not answer on {self.url} in {START_TIMEOUT_S:.0f} s\n{tail}")
            time.sleep(POLL_S)
        return self

    def version(self) -> str:
        """The version the server reports (what the UI shows and compares against its "new version" key)."""
        return str(json.loads(self._get("/api/v1/version"))["version"])

    def stop(self) -> None:
        """Stop the server (its whole process group); idempotent."""
        if self._component is not None:
            self._component.stop()
            self._component = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _get(self, path: str) -> str:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url + path, timeout=5) as response:
            return str(response.read().decode("utf-8"))

    def _answers(self) -> bool:
        try:
            self._get("/api/v1/version")
        except OSError:
            return False
        return True
