"""`CertificationSpec`: which nodes, which categories, which gang scheduler, plus the global options.

The spec inlines every `CategoryOptions` field (as the reference's Go type does), so a Certification written
for the reference system loads here unchanged.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from nvcre_argo.api.base import SpecModel
from nvcre_argo.api.labels import QUEUE_LABEL_KEY_PREFIX_RULE, QUEUE_LABEL_KEY_RESERVED_RULE
from nvcre_argo.api.options import CategoryOptions
from nvcre_argo.api.rules import ValueRule, enforced

MAX_CATEGORIES = 64
DEFAULT_QUEUE = "default-queue"
DEFAULT_QUEUE_LABEL_KEY = "kai.scheduler/queue"
QUEUE_PATTERN = r"^$|^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$"
QUEUE_LABEL_KEY_PATTERN = (
    r"^$|^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
)


class NodeSelectorRequirement(SpecModel):
    """A label requirement, as in a Pod's node affinity."""

    key: str = Field(description="The label key the selector applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(description="How the key relates to values.")
    values: list[str] | None = Field(default=None, description="Values for In and NotIn.")


class TaintSelector(SpecModel):
    """Select nodes carrying a taint; matching tolerations are added to the workload pods."""

    key: Annotated[str, StringConstraints(min_length=1)] = Field(description="Taint key.")
    value: str | None = Field(default=None, description="Taint value; empty matches any value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] | None = Field(
        default=None, description="Taint effect; empty matches any effect."
    )


class TargetSpec(SpecModel):
    """Which nodes are candidates: a node must satisfy every filter that is set (AND)."""

    node_selector: dict[str, str] | None = Field(default=None, description="Label equality selection.")
    match_expressions: list[NodeSelectorRequirement] | None = Field(
        default=None, description="Label requirements, ANDed with nodeSelector."
    )
    node_names: list[str] | None = Field(default=None, description="An explicit list of node names.")
    taint_selectors: list[TaintSelector] | None = Field(
        default=None, description="Nodes must carry every listed taint; tolerations are injected."
    )


QueueLabelKey = Annotated[
    str,
    StringConstraints(max_length=317, pattern=QUEUE_LABEL_KEY_PATTERN),
    *enforced(QUEUE_LABEL_KEY_PREFIX_RULE, QUEUE_LABEL_KEY_RESERVED_RULE),
]


class GangSchedulerSpec(SpecModel):
    """Opt every category's pods into one gang scheduler and queue (KAI, Run:ai, or any other)."""

    scheduler_name: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="schedulerName for every pod template of every category's TrainingRuntime."
    )
    queue: Annotated[str, StringConstraints(max_length=63, pattern=QUEUE_PATTERN)] | None = Field(
        default=None, description=f"Queue label value (default {DEFAULT_QUEUE})."
    )
    queue_label_key: QueueLabelKey | None = Field(
        default=None,
        description=f"Label key the scheduler reads the queue from (default {DEFAULT_QUEUE_LABEL_KEY}).",
    )


class CertificationCategory(SpecModel):
    """One catalog entry to run, with optional per-category options that win over the global ones."""

    domain: str = Field(description="Catalog domain, e.g. communication, diagnostics, training.")
    variant: str = Field(description="Catalog variant, e.g. nccl-all-reduce, dcgm-level4, nemotron5-8b.")
    options: CategoryOptions | None = Field(default=None, description="Per-category overrides of the options.")


# A transition rule: it compares with the stored object, which only the API server has. Offline every document
# is a creation, where the rule holds, so its Python twin always holds.
SPEC_IMMUTABLE_RULE = ValueRule(
    name="spec-immutable",
    cel="self == oldSelf",
    message="spec is immutable after creation",
    holds=lambda _: True,
)


class CertificationSpec(CategoryOptions):
    """The desired certification; immutable after creation (delete and recreate to change it)."""

    target: TargetSpec = Field(description="Which nodes to certify (every filter that is set must match).")
    gang_scheduler: GangSchedulerSpec | None = Field(default=None, description="Gang scheduler for every category.")
    categories: list[CertificationCategory] = Field(
        min_length=1, max_length=MAX_CATEGORIES, description="The categories to run, one after another."
    )
