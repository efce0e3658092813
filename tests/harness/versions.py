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
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_ENV = REPO_ROOT / "hack" / "testbin" / "versions.env"
TESTBIN_SCRIPT = REPO_ROOT / "hack" / "testbin.sh"
BUILD_COMMAND = "make testbin"


class HarnessSetupError(RuntimeError):
    """The environment lacks something the harness needs (binaries, Go, a module)."""


@dataclass(frozen=True)
class BinaryDirs:
    """Directories holding the built binaries (see ``hack/testbin.sh print-dir``)."""

    k8s: Path
    etcd: Path

    @property
    def kube_apiserver(self) -> Path:
        return self.k8s / "kube-apiserver"

    @property
    def etcd_binary(self) -> Path:
        return self.etcd / "etcd"

    def missing(self) -> list[Path]:
        """The binaries the control plane needs that are absent or not executable."""
        return [p for p in (self.etcd_binary, self.kube_apiserver) if not os.access(p, os.X_OK)]


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
    return BinaryDirs(k8s=Path(dirs["k8s"]), etcd=Path(dirs["etcd"]))
