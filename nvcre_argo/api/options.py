"""`CategoryOptions`: the workload options settable globally (`spec.<field>`) and per category.

Every option is `None` when unset, meaning "inherit": defaults live in the resolver and the catalog, never
here, so "unset" and "set to the default" stay distinguishable (a per-category value wins over the global one
only when it is set). Constraints, patterns and messages are the reference API's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from nvcre_argo.api.base import SpecModel
from nvcre_argo.api.labels import (
    LABEL_VALUE_MAX_LENGTH,
    LABEL_VALUE_PATTERN,
    MAX_WORKLOAD_LABELS,
    WORKLOAD_LABEL_RULES,
)
from nvcre_argo.api.rules import RULE_ERROR, ValueRule, cel_schema, check_rules, enforced
from nvcre_argo.quantity import parse_quantity

INT32_MAX = 2**31 - 1
QUANTITY_MAX_LENGTH = 32

# The CRD generator marks integers bounded by INT32_MAX as `format: int32`, as kubebuilder does for int32.
Int32 = Annotated[int, Field(le=INT32_MAX)]
DURATION_PATTERN = r"^([0-9]+(h|m|s|ms))+$"
Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN)]
THRESHOLD_KEYS = ("busBandwidthGBps", "algBandwidthGBps", "goodputRatio", "avgTFLOPsPerGPU", "avgStepTimeSec")


def _quantity_rule(name: str) -> ValueRule:
    return ValueRule(
        name=f"{name}-non-negative-quantity",
        cel="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('0')) >= 0",
        message=f"{name} must be a non-negative quantity",
        holds=lambda value: (
            isinstance(value, int | str) and (parsed := parse_quantity(value)) is not None and parsed >= 0
        ),
    )


def _at_most_32_characters(value: int | str) -> int | str:
    # The JSON schema's maxLength applies to the string form only, as on the API server.
    if isinstance(value, str) and len(value) > QUANTITY_MAX_LENGTH:
        raise PydanticCustomError(
            "string_too_long",
            "String should have at most {max_length} characters",
            {"max_length": QUANTITY_MAX_LENGTH},
        )
    return value


QUANTITY_RULES = (_quantity_rule("cpu"), _quantity_rule("memory"))


def _quantity_annotations(rule: ValueRule) -> tuple[Any, ...]:
    """Kubernetes' int-or-string shape for the CRD, plus the non-negative quantity rule in both places."""
    schema = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "maxLength": QUANTITY_MAX_LENGTH,
        **cel_schema(rule),
    }
    return (
        WithJsonSchema(schema),
        AfterValidator(_at_most_32_characters),
        AfterValidator(lambda value: check_rules(value, (rule,))),
    )


CpuQuantity = Annotated[int | str, *_quantity_annotations(QUANTITY_RULES[0])]
MemoryQuantity = Annotated[int | str, *_quantity_annotations(QUANTITY_RULES[1])]


class ResourceValues(SpecModel):
    """CPU and memory for one side (limits or requests); each value falls back to the default on its own."""

    cpu: CpuQuantity | None = Field(default=None, description='CPU quantity, e.g. "64" or 6.')
    memory: MemoryQuantity | None = Field(default=None, description="Memory quantity, e.g. 500Gi.")


def _not_above(resources: Mapping[str, Any], name: str) -> bool:
    """requests.<name> <= limits.<name>, over the JSON form (what the API server's CEL rule sees)."""
    request = (resources.get("requests") or {}).get(name)
    limit = (resources.get("limits") or {}).get(name)
    if not isinstance(request, int | str) or not isinstance(limit, int | str):
        return True
    request_value, limit_value = parse_quantity(request), parse_quantity(limit)
    if request_value is None or limit_value is None:
        return True  # reported by the quantity rule instead
    return request_value <= limit_value


def _request_rule(name: str) -> ValueRule:
    request, limit = f"self.requests.{name}", f"self.limits.{name}"
    return ValueRule(
        name=f"{name}-request-within-limit",
        cel=(
            f"!has(self.requests) || !has(self.limits) || !has({request}) || !has({limit}) || "
            f"!isQuantity(string({request})) || !isQuantity(string({limit})) || "
            f"quantity(string({request})).compareTo(quantity(string({limit}))) <= 0"
        ),
        message=f"requests.{name} must not exceed limits.{name}",
        holds=lambda resources: _not_above(resources, name),
    )


RESOURCE_RULES = (_request_rule("cpu"), _request_rule("memory"))


class CategoryResources(SpecModel):
    """CPU/memory of the training containers; GPUs come from gpusPerNode. Non-training entries ignore it."""

    model_config = SpecModel.model_config | {"json_schema_extra": cel_schema(*RESOURCE_RULES)}

    limits: ResourceValues | None = Field(default=None, description="Limits (default cpu 128, memory 800Gi).")
    requests: ResourceValues | None = Field(default=None, description="Requests (default cpu 64, memory 500Gi).")

    @model_validator(mode="after")
    def _requests_within_limits(self) -> CategoryResources:
        data = self.model_dump(by_alias=True, exclude_none=True)
        violations: list[tuple[str, list[str]]] = [
            (rule.message, []) for rule in RESOURCE_RULES if not rule.holds(data)
        ]
        if violations:
            raise PydanticCustomError(RULE_ERROR, violations[0][0], {"violations": violations})
        return self


LabelValue = Annotated[str, StringConstraints(max_length=LABEL_VALUE_MAX_LENGTH, pattern=LABEL_VALUE_PATTERN)]
WorkloadLabels = Annotated[
    dict[str, LabelValue], Field(max_length=MAX_WORKLOAD_LABELS), *enforced(*WORKLOAD_LABEL_RULES)
]


class WorkloadMetadata(SpecModel):
    """Labels for the generated workload object (the TrainJob), not for pods."""

    labels: WorkloadLabels | None = Field(
        default=None,
        description=(
            "Labels on each generated TrainJob (e.g. kueue.x-k8s.io/queue-name). Merged per key: global, then "
            "per category, then the gang-scheduler queue label, which may only be inserted or repeated."
        ),
    )


class LocalObjectReference(SpecModel):
    name: str = Field(default="", description="Name of the referent (a Secret in the same namespace).")


NIC_RESOURCE_PATTERN = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[a-zA-Z0-9]([-A-Za-z0-9_.]{0,61}[a-zA-Z0-9])?$"
)


def _nic_domain_allowed(name: str) -> bool:
    domain = name.split("/", 1)[0]
    return not any(domain == reserved or domain.endswith("." + reserved) for reserved in ("kubernetes.io", "k8s.io"))


NIC_DOMAIN_RULE = ValueRule(
    name="nic-resource-name-domain",
    cel=(
        "!(self.split('/')[0] == 'kubernetes.io' || self.split('/')[0].endsWith('.kubernetes.io') || "
        "self.split('/')[0] == 'k8s.io' || self.split('/')[0].endsWith('.k8s.io'))"
    ),
    message="nicResourceName must not use the reserved kubernetes.io or k8s.io domains",
    holds=_nic_domain_allowed,
)
NicResourceName = Annotated[
    str, StringConstraints(max_length=253, pattern=NIC_RESOURCE_PATTERN), *enforced(NIC_DOMAIN_RULE)
]
SOURCE_REPO_PATTERN = r"^(https|ssh)://[A-Za-z0-9._~:/@%+-]+$"


class CategoryOptions(SpecModel):
    """Options of one category; the same fields are inlined at spec level as global defaults."""

    nodes_per_job: Int32 | None = Field(default=None, ge=1, description="Nodes per job (group size); unset = auto.")
    enable_checkpoint: bool | None = Field(default=None, description="Training only: checkpoint to a PVC.")
    max_steps: Int32 | None = Field(default=None, ge=-1, description="Training steps (default 50).")
    exit_duration_mins: Int32 | None = Field(default=None, ge=1, description="Training wall-clock cap (default 30).")
    startup_stall_timeout_seconds: Int32 | None = Field(
        default=None, ge=1, description="Budget for the first training step (catalog default 1200)."
    )
    gpus_per_node: Int32 | None = Field(
        default=None,
        ge=1,
        description="GPUs per node; unset = from the GPU architecture (8, or 4 on GB200/GB300).",
    )
    mlnx_per_node: Int32 | None = Field(
        default=None,
        ge=0,
        description="RDMA NICs per node; 0 opts out of the NIC request. Unset = from the GPU.",
    )
    nic_resource_name: NicResourceName | None = Field(
        default=None,
        description="Extended resource name of the RDMA NICs, e.g. rdma/ib or nvidia.com/mlnxnics.",
    )
    resources: CategoryResources | None = Field(default=None, description="CPU/memory of training containers.")
    enable_mnnvl: bool | None = Field(
        default=None,
        alias="enableMNNVL",
        description="Multi-Node NVLink (NCCL_MNNVL_ENABLE); default on GB200/GB300.",
    )
    image: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = Field(
        default=None, description="Replaces the primary container image of the category's workload."
    )
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None, description="Pull secrets for the workload images."
    )
    storage_class_name: str | None = Field(default=None, description="StorageClass for the checkpoint PVC.")
    save_interval: Int32 | None = Field(default=None, ge=1, description="Checkpoint every N steps (default 250).")
    save_retain_interval: Int32 | None = Field(default=None, ge=1, description="Keep checkpoints at multiples of N.")
    save_top_k: Int32 | None = Field(default=None, ge=1, description="NeMo 4 save_top_k (default 1).")
    storage_size: Annotated[str, StringConstraints(pattern=r"^([0-9]+(\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei)?$")] | None = (
        Field(default=None, description="Checkpoint PVC size (default 10Ti).")
    )
    max_restarts: Int32 | None = Field(default=None, ge=0, description="Checkpoint restarts (catalog default 3).")
    repeat_count: Int32 | None = Field(default=None, ge=1, description="Run every group N times (default 1).")
    test_scale: Literal["intra-node", "intra-rack", "diagnose", "full-scale"] | None = Field(
        default=None, description="Communication entries: how nodes are grouped (default full-scale)."
    )
    max_bytes: Annotated[str, StringConstraints(pattern=r"^[0-9]+(K|M|G|T)?$")] | None = Field(
        default=None, description="nccl-tests -e (default 16G; 32G on GB200/GB300)."
    )
    num_iterations: Int32 | None = Field(default=None, ge=1, description="nccl-tests -n (default 100).")
    num_cycles: Int32 | None = Field(default=None, ge=1, description="nccl-tests -N (default 10).")
    thresholds: dict[str, str] | None = Field(
        default=None,
        description=(
            "Pass/fail criteria: key -> CEL expression over `value` returning bool, e.g. busBandwidthGBps: "
            f"'value >= 300'. Keys: {', '.join(THRESHOLD_KEYS)}."
        ),
    )
    max_concurrent: Int32 | None = Field(default=None, ge=0, description="Groups running at once; 0 = unlimited.")
    min_group_size: Int32 | None = Field(default=None, ge=1, description="Diagnose bisection stop size (default 2).")
    timeout_per_job: Duration | None = Field(default=None, description="Max time per job, e.g. 1h (Go duration).")
    measurement_timeout: Duration | None = Field(default=None, description="Wait for measurements (default 5m).")
    source_repo: Annotated[str, StringConstraints(max_length=2048, pattern=SOURCE_REPO_PATTERN)] | None = Field(
        default=None,
        description="Git mirror to clone the workload source from when it is not in the image.",
    )
    workload_metadata: WorkloadMetadata | None = Field(default=None, description="Labels on the TrainJob.")
    placement: Literal["Pinned", "Unpinned"] | None = Field(
        default=None, description="Pinned (default): groups pinned to nodes; Unpinned: the scheduler chooses."
    )
    rdma_device_access: Literal["hostPath", "devicePlugin"] | None = Field(
        default=None, description="How RDMA devices reach the workload."
    )


OPTION_FIELDS: tuple[str, ...] = tuple(CategoryOptions.model_fields)
