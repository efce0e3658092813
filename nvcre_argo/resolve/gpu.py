"""GPU architectures and the defaults that depend on them (the reference's `gpu-defaults.yaml`).

The architecture comes from the GPU Operator's `nvidia.com/gpu.product` node label at run time, or from
`--gpu-arch` at compile time. Unknown architectures get the reference's fallback (4 GPUs, no NICs) and a
warning, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"

# Checked in order: the longer, more specific names first ("gb200" contains "b200", "l40s" contains "l40").
_ARCH_MARKERS = ("gb300", "gb200", "b300", "b200", "h200", "h100", "a100", "l40s", "l40", "rtxpro6000")
# Products whose names contain a known marker but are other architectures (GH200 is a Grace Hopper superchip
# with one GPU, not an 8-GPU H200 board): they are unknown, never guessed.
_NOT_ARCHITECTURES = ("gh200", "gb10")


@dataclass(frozen=True)
class GpuDefaults:
    gpus_per_node: int
    mlnx_per_node: int
    max_bytes: str
    mnnvl: bool


_DEFAULTS = {
    "h100": GpuDefaults(8, 8, "16G", False),
    "h200": GpuDefaults(8, 8, "16G", False),
    "a100": GpuDefaults(8, 8, "16G", False),
    "l40s": GpuDefaults(8, 8, "16G", False),
    "b200": GpuDefaults(8, 8, "16G", False),
    "b300": GpuDefaults(8, 8, "16G", False),
    "l40": GpuDefaults(8, 4, "16G", False),
    "gb200": GpuDefaults(4, 8, "32G", True),
    "gb300": GpuDefaults(4, 8, "32G", True),
    "rtxpro6000": GpuDefaults(8, 0, "16G", False),
}
UNKNOWN_DEFAULTS = GpuDefaults(4, 0, "16G", False)
KNOWN_ARCHITECTURES = tuple(sorted(_DEFAULTS))


def architecture_of(product: str) -> str | None:
    """The architecture key of a `nvidia.com/gpu.product` value (`NVIDIA-H100-80GB-HBM3` → `h100`)."""
    normalized = product.lower().replace("-", "").replace("_", "").replace(" ", "")
    if any(marker in normalized for marker in _NOT_ARCHITECTURES):
        return None
    return next((marker for marker in _ARCH_MARKERS if marker in normalized), None)


def defaults_for(architecture: str | None) -> GpuDefaults:
    return _DEFAULTS.get(architecture or "", UNKNOWN_DEFAULTS)


def is_known(architecture: str | None) -> bool:
    return architecture in _DEFAULTS
