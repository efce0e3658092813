"""The platform record: which platform and arms the plan applied, as annotations on both node ConfigMaps.

Why annotations on the result ConfigMaps: the plan's own ConfigMap goes with its Workflow, these outlive it,
so `nvcre-argo report` can still say which fabric settings the measurements were taken with; and as
annotations rather than data keys, the reference's layout of the ConfigMaps stays as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

PLATFORM_ANNOTATION: Final = "nvcre.nvidia.com/platform"
PLATFORM_ARMS_ANNOTATION: Final = "nvcre.nvidia.com/platform-arms"
GPU_ARCHITECTURE_ANNOTATION: Final = "nvcre.nvidia.com/gpu-architecture"


@dataclass(frozen=True)
class PlatformRecord:
    """What the plan found and applied, carried by both result ConfigMaps as annotations (see the module
    docstring for why)."""

    platform: str | None
    arms: tuple[str, ...]
    gpu_architecture: str | None

    def annotations(self) -> dict[str, str]:
        found = {
            PLATFORM_ANNOTATION: self.platform,
            PLATFORM_ARMS_ANNOTATION: ",".join(self.arms) if self.platform else None,
            GPU_ARCHITECTURE_ANNOTATION: self.gpu_architecture,
        }
        return {key: value for key, value in found.items() if value is not None}


def read_platform(configmap: Mapping[str, Any]) -> PlatformRecord | None:
    """The platform record of a result ConfigMap; None when it carries none (written before it existed)."""
    annotations = (configmap.get("metadata") or {}).get("annotations") or {}
    if PLATFORM_ANNOTATION not in annotations and GPU_ARCHITECTURE_ANNOTATION not in annotations:
        return None
    arms = str(annotations.get(PLATFORM_ARMS_ANNOTATION) or "")
    return PlatformRecord(
        platform=annotations.get(PLATFORM_ANNOTATION),
        arms=tuple(name for name in arms.split(",") if name),
        gpu_architecture=annotations.get(GPU_ARCHITECTURE_ANNOTATION),
    )
