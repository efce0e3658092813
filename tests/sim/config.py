"""The sim kubelet's configuration: which nodes it plays and how it maps images to host programs.

Written as JSON by the harness (``tests/sim/cluster.py``) and read by the kubelet process, so the two agree
on one typed shape.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FAULT_PLAN_CONFIGMAP = "nvcre-sim-fault-plan"
FAULT_PLAN_KEY = "plan.yaml"


@dataclass(frozen=True)
class NodeSpec:
    """One fake node: its labels, taints and what it can hold."""

    name: str
    labels: dict[str, str]
    gpus: int = 8
    cpu: str = "128"
    memory: str = "1Ti"
    pods: int = 250
    taints: list[dict[str, str]] = field(default_factory=list)
    provider_id: str = ""


@dataclass(frozen=True)
class ImageSpec:
    """What a container image means here: host directories bound into its root, its PATH, its entry point, and
    the environment it sets (as a Dockerfile's ENV does; the pod's own env wins)."""

    binds: list[tuple[str, str]]
    path: str
    entrypoint: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class KubeletConfig:
    kubeconfig: str
    workdir: str
    apiserver_port: int
    log_port: int
    log_cert: str
    log_key: str
    nodes: list[NodeSpec]
    images: dict[str, ImageSpec]
    host_binds: list[tuple[str, str]]
    sandbox_python: str
    heartbeat_seconds: float = 10.0

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> KubeletConfig:
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        raw["nodes"] = [NodeSpec(**node) for node in raw["nodes"]]
        raw["images"] = {
            name: ImageSpec(
                binds=[(src, dst) for src, dst in spec["binds"]],
                path=spec["path"],
                entrypoint=spec["entrypoint"],
                env=spec.get("env", {}),
            )
            for name, spec in raw["images"].items()
        }
        raw["host_binds"] = [(src, dst) for src, dst in raw["host_binds"]]
        return cls(**raw)
