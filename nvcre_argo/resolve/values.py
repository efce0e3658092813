"""The run-time half of resolution: values that depend on the nodes' GPU architecture and the group size.

The plan step calls this with the architecture it found on the nodes; the compiler calls it when the user
passes `--gpu-arch`. An option the user set always wins over the architecture's default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.resolve.gpu import defaults_for

DEFAULT_NUM_ITERATIONS = 100
DEFAULT_NUM_CYCLES = 10
DEFAULT_MAX_STEPS = 50
DEFAULT_EXIT_DURATION_MINS = 30
DEFAULT_SAVE_INTERVAL = 250
DEFAULT_SAVE_RETAIN_INTERVAL = 1000
DEFAULT_MPIRUN = "/usr/local/mpi/bin/mpirun"
DEFAULT_NCCL_BINARY = "/usr/local/bin/{test}_perf_mpi"


@dataclass(frozen=True)
class GpuValues:
    """What the GPU architecture decides, after the user's explicit options."""

    architecture: str | None
    gpus_per_node: int
    mlnx_per_node: int
    max_bytes: str
    mnnvl: bool
    tensor_parallel: int
    pipeline_parallel: int
    # What the platform's arms change in the catalog's placeholders (`mpirun`, `ncclBinary`) and which of
    # their environment variables an MPI launcher forwards to the ranks (see `nvcre_argo.plan.platform`).
    placeholder_overrides: tuple[tuple[str, str], ...] = ()
    forwarded_env: tuple[str, ...] = ()


def gpu_values(category: ResolvedCategory, architecture: str | None) -> GpuValues:
    options, defaults = category.options, defaults_for(architecture)
    parallelism = category.entry.defaults.parallelism
    tensor = pipeline = 1
    if parallelism is not None:
        tensor = parallelism.tensor.get(architecture or "", parallelism.tensor.get("default", 1))
        pipeline = parallelism.pipeline.get(architecture or "", parallelism.pipeline.get("default", 1))
    return GpuValues(
        architecture=architecture,
        gpus_per_node=options.gpus_per_node if options.gpus_per_node is not None else defaults.gpus_per_node,
        mlnx_per_node=options.mlnx_per_node if options.mlnx_per_node is not None else defaults.mlnx_per_node,
        max_bytes=options.max_bytes or defaults.max_bytes,
        mnnvl=category.enable_mnnvl if category.enable_mnnvl is not None else defaults.mnnvl,
        tensor_parallel=tensor,
        pipeline_parallel=pipeline,
    )


def placeholder_values(category: ResolvedCategory, gpu: GpuValues, num_nodes: int) -> dict[str, Any]:
    """Every `%{name}` a catalog template may use, for one group of `num_nodes` nodes."""
    options = category.options
    nccl = category.entry.nccl_test
    overrides = dict(gpu.placeholder_overrides)
    return {
        "gpusPerNode": gpu.gpus_per_node,
        "totalGpus": gpu.gpus_per_node * num_nodes,
        "maxBytes": gpu.max_bytes,
        "numIterations": options.num_iterations or DEFAULT_NUM_ITERATIONS,
        "numCycles": options.num_cycles or DEFAULT_NUM_CYCLES,
        "mnnvl": 1 if gpu.mnnvl else 0,
        "ncclBinary": overrides.get("ncclBinary", DEFAULT_NCCL_BINARY).replace("{test}", nccl) if nccl else "",
        "mpirun": overrides.get("mpirun", DEFAULT_MPIRUN),
        "timeoutSeconds": duration_seconds(category.timeout_per_job),
        "maxSteps": _first(options.max_steps, category.entry.defaults.max_steps, DEFAULT_MAX_STEPS),
        "exitDurationMins": _first(options.exit_duration_mins, DEFAULT_EXIT_DURATION_MINS),
        "saveInterval": _first(options.save_interval, DEFAULT_SAVE_INTERVAL),
        "saveRetainInterval": _first(options.save_retain_interval, DEFAULT_SAVE_RETAIN_INTERVAL),
        "enableCheckpoint": "true" if category.checkpoint is not None else "false",
        "tensorParallel": gpu.tensor_parallel,
        "pipelineParallel": gpu.pipeline_parallel,
    }


def _first(*values: int | None) -> int:
    return next(value for value in values if value is not None)
