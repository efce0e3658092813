"""Pinned component versions and where their files live.

``hack/testbin/versions.env`` is the single source of truth for every version the tests use; this module
parses it (shell ``KEY=value`` lines) instead of repeating any version in Python. It also locates the Go
module directories that hold the CRDs (via ``go mod download -json``, which answers from the module cache
when the module is already there) and the binary directories ``hack/testbin.sh`` builds into.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_ENV = REPO_ROOT / "hack" / "testbin" / "versions.env"
TESTBIN_SCRIPT = REPO_ROOT / "hack" / "testbin.sh"
BUILD_COMMAND = "make testbin"
ARGO_MAJORS = ("v3", "v4")


class HarnessSetupError(RuntimeError):
    """The environment lacks something the harness needs (binaries, Go, a module)."""


@dataclass(frozen=True)
class BinaryDirs:
    """Directories holding the built binaries (see ``hack/testbin.sh print-dir``).

    ``argo`` is the Argo v3 directory (which also holds ``argolint``), ``argo_v4`` the Argo v4 one.
    """

    k8s: Path
    etcd: Path
    argo: Path
    argo_v4: Path
    trainer: Path
    jobset: Path

    @property
    def kube_apiserver(self) -> Path:
        return self.k8s / "kube-apiserver"

    @property
    def kube_controller_manager(self) -> Path:
        return self.k8s / "kube-controller-manager"

    @property
    def kube_scheduler(self) -> Path:
        return self.k8s / "kube-scheduler"

    @property
    def etcd_binary(self) -> Path:
        return self.etcd / "etcd"

    @property
    def argolint(self) -> Path:
        return self.argo / "argolint"

    @property
    def trainer_controller_manager(self) -> Path:
        return self.trainer / "trainer-controller-manager"

    @property
    def jobset_binary(self) -> Path:
        return self.jobset / "jobset"

    def argo_dir(self, major: str) -> Path:
        """The directory of Argo ``major`` (``"v3"`` or ``"v4"``): workflow-controller and argoexec."""
        if major == "v3":
            return self.argo
        if major == "v4":
            return self.argo_v4
        raise ValueError(f"unknown Argo major version {major!r}; expected one of {ARGO_MAJORS}")

    def workflow_controller(self, major: str) -> Path:
        return self.argo_dir(major) / "workflow-controller"

    def argoexec(self, major: str) -> Path:
        return self.argo_dir(major) / "argoexec"

    def missing(self) -> list[Path]:
        """The binaries the control plane needs that are absent or not executable."""
        return _not_executable((self.etcd_binary, self.kube_apiserver))

    def missing_for_simulation(self, argo_major: str | None = None) -> list[Path]:
        """The binaries the simulated cluster needs that are absent or not executable: the control plane,
        kube-controller-manager, kube-scheduler, Trainer, JobSet, and Argo's workflow-controller and argoexec
        (for ``argo_major`` only, or for both majors when it is ``None``)."""
        majors = ARGO_MAJORS if argo_major is None else (argo_major,)
        argo = [path for major in majors for path in (self.workflow_controller(major), self.argoexec(major))]
        controllers = [self.kube_controller_manager, self.kube_scheduler, self.trainer_controller_manager]
        return [*self.missing(), *_not_executable([*controllers, self.jobset_binary, *argo])]


def _not_executable(paths: Sequence[Path]) -> list[Path]:
    return [p for p in paths if not os.access(p, os.X_OK)]


def parse_env_file(text: str) -> dict[str, str]:
    """Parse shell ``KEY=value`` lines, ignoring blank lines and ``#`` comments."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"not a KEY=value line in versions.env: {raw!r}")
        parts = shlex.split(value, comments=True)
        values[key] = parts[0] if parts else ""
    return values


def load_versions(path: Path = VERSIONS_ENV) -> dict[str, str]:
    """The pinned versions, keyed as in ``versions.env`` (e.g. ``K8S_VERSION``)."""
    return parse_env_file(path.read_text(encoding="utf-8"))


def go_env() -> dict[str, str]:
    """The environment ``hack/testbin.sh`` uses for Go: local toolchain, writable module cache."""
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-modcacherw"}


def module_dir(module: str, version: str) -> Path:
    """The module cache directory of ``module@version`` (downloaded if needed)."""
    try:
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd="/tmp",
            env=go_env(),
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    except FileNotFoundError as exc:
        raise HarnessSetupError(f"go is not installed; run `{BUILD_COMMAND}` on a machine with Go") from exc
    info = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0 or "Dir" not in info:
        detail = info.get("Error") or proc.stderr.strip()
        raise HarnessSetupError(f"go mod download {module}@{version} failed: {detail}")
    return Path(info["Dir"])


def binary_dirs() -> BinaryDirs:
    """Ask ``hack/testbin.sh print-dir`` where the binaries for the pinned versions live."""
    proc = subprocess.run(
        ["bash", str(TESTBIN_SCRIPT), "print-dir"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    dirs = parse_env_file(proc.stdout)
    return BinaryDirs(
        k8s=Path(dirs["k8s"]),
        etcd=Path(dirs["etcd"]),
        argo=Path(dirs["argo"]),
        argo_v4=Path(dirs["argo_v4"]),
        trainer=Path(dirs["trainer"]),
        jobset=Path(dirs["jobset"]),
    )
