"""The shape of one catalog entry (`entries/<domain>/<variant>.yaml`), validated strictly.

An entry is data, not code, so platform teams can add or override one with `--catalog DIR` and no rebuild. It
gives a Kubeflow `TrainingRuntime` spec and the `trainer` block of the `TrainJob`, with `%{name}`
placeholders for values the resolver computes (GPU count, message sizes, node count ...), and the defaults and
measurement that go with them. User-supplied strings (image, sourceRepo) are never placeholders: the renderer
sets them structurally (image fields, environment variables), so nothing a user writes reaches a shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from nvcre_argo.cel import CelError, compile_expression

Measurement = Literal["nccl-bandwidth", "megatron-goodput", "exit-code"]
MEASURED_THRESHOLD_KEYS: Mapping[Measurement, tuple[str, ...]] = MappingProxyType(
    {
        "nccl-bandwidth": ("busBandwidthGBps", "algBandwidthGBps"),
        "megatron-goodput": ("goodputRatio", "avgTFLOPsPerGPU", "avgStepTimeSec"),
        "exit-code": (),
    }
)
"""The threshold keys each kind of measurement gives a value for (what `measure/` parses out of the logs): a
threshold on any other key could never pass, so the resolver never hands one to a category."""
Grouping = Literal["all-nodes", "per-node"]
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class _EntryModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Parallelism(_EntryModel):
    """Tensor/pipeline parallelism for training entries, by GPU architecture key (`default` when unknown)."""

    tensor: dict[str, int] = Field(default_factory=lambda: {"default": 1})
    pipeline: dict[str, int] = Field(default_factory=lambda: {"default": 1})


class EntryDefaults(_EntryModel):
    """Defaults that belong to this entry rather than to the API (the API's live in the resolver)."""

    timeout_per_job: Annotated[str, StringConstraints(pattern=r"^([0-9]+(h|m|s|ms))+$")] = Field(
        default="1h", alias="timeoutPerJob"
    )
    # How long one job of this entry normally runs once it has started (the tool's own documented run time),
    # for `nvcre-argo plan`'s GPU-hours estimate next to the timeoutPerJob bound. Only a hint for people: the
    # run never reads it, so it is left out of the serialised entry the compiled Workflows carry, and changing
    # it changes no compiled byte.
    nominal_duration: Annotated[str, StringConstraints(pattern=r"^([0-9]+(h|m|s|ms))+$")] | None = Field(
        default=None, alias="nominalDuration", exclude=True
    )
    min_gpus: int = Field(default=1, ge=1, alias="minGPUs")
    max_steps: int | None = Field(default=None, alias="maxSteps")
    startup_stall_timeout_seconds: int | None = Field(default=None, alias="startupStallTimeoutSeconds")
    max_restarts: int | None = Field(default=None, alias="maxRestarts")
    parallelism: Parallelism | None = None


class CatalogEntry(_EntryModel):
    """One runnable category."""

    domain: Annotated[str, StringConstraints(pattern=DNS_LABEL)]
    variant: Annotated[str, StringConstraints(pattern=DNS_LABEL)]
    description: str
    measurement: Measurement
    nccl_test: str | None = Field(default=None, alias="ncclTest", description="nccl-tests binary stem, e.g. all_reduce")
    grouping: Grouping = Field(description="all-nodes: one group of every node (chunked by nodesPerJob); per-node.")
    training: bool = Field(default=False, description="Training containers get the CPU/memory resources option.")
    gpu_replicated_jobs: list[str] = Field(
        alias="gpuReplicatedJobs", description="replicatedJobs whose primary container requests the node's GPUs."
    )
    pinned_replicated_jobs: list[str] = Field(
        alias="pinnedReplicatedJobs", description="replicatedJobs pinned to the group's nodes."
    )
    defaults: EntryDefaults = Field(default_factory=EntryDefaults)
    labels: dict[str, str] = Field(default_factory=dict, description="Catalog labels on the TrainJob (step 1).")
    runtime: dict[str, Any] = Field(description="TrainingRuntime spec, with %{placeholders}.")
    trainer: dict[str, Any] = Field(description="TrainJob spec.trainer, with %{placeholders}.")
    health_expression: str | None = Field(
        default=None,
        alias="healthExpression",
        min_length=1,
        max_length=2048,
        description="CEL over each group Node as `node`, true = unhealthy, checked while the workload runs "
        "(the reference's nodeHealthMonitor.cel.expression); unset: `node.spec.unschedulable == true`.",
    )

    @field_validator("health_expression")
    @classmethod
    def _health_expression_compiles(cls, expression: str | None) -> str | None:
        """Refused when the catalog loads, not hours later when the first group's run step compiles it."""
        if expression is not None:
            try:
                compile_expression(expression)
            except CelError as error:
                raise ValueError(f"not a CEL expression: {error}") from None
        return expression

    @model_validator(mode="after")
    def _nccl_entries_name_their_test(self) -> CatalogEntry:
        if self.measurement == "nccl-bandwidth" and not self.nccl_test:
            raise ValueError("ncclTest is required when measurement is nccl-bandwidth")
        return self

    @property
    def key(self) -> str:
        return f"{self.domain}/{self.variant}"

    @property
    def threshold_keys(self) -> tuple[str, ...]:
        """The threshold keys this entry's measurement can check."""
        return MEASURED_THRESHOLD_KEYS[self.measurement]
