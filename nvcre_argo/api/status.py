"""`CertificationStatus`: what the watcher writes, computed from the Argo Workflows.

Beyond the reference's conditions and per-category statuses it carries `observedGeneration`, a one-word
`result`, node counts and `passed` ("2/3"), so `kubectl get certifications` answers "is this pool certified?"
without any CLI. Tolerant of unknown fields: a newer watcher may have written more.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from nvcre_argo.api.base import ServerModel

CategoryPhase = Literal["Pending", "InProgress", "Succeeded", "Failed"]
Result = Literal["PASSED", "FAILED", "INCOMPLETE", "RUNNING"]


class Condition(ServerModel):
    """A metav1.Condition."""

    type: str = Field(description="Condition type: InProgress, Succeeded, Failed or ValidationFailed.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(default=None, ge=0, description="Generation the condition is for.")
    last_transition_time: str = Field(description="When the status last changed (RFC 3339).")
    reason: str = Field(description="CamelCase reason, e.g. AllWorkflowsSucceeded.")
    message: str = Field(default="", description="Human-readable detail.")


class WorkflowReference(ServerModel):
    name: str = Field(description="Argo Workflow name.")
    namespace: str | None = Field(default=None, description="Argo Workflow namespace.")


class TypedLocalObjectReference(ServerModel):
    """A reference to an object in the same namespace (here: a ConfigMap of node names)."""

    api_group: str | None = Field(default=None, description="API group of the referent; empty for core.")
    kind: str = Field(description="Kind of the referent, ConfigMap.")
    name: str = Field(description="Name of the referent.")


class CategoryStatus(ServerModel):
    """The state of one category, in spec order."""

    domain: str = Field(description="Catalog domain.")
    variant: str = Field(description="Catalog variant.")
    status: CategoryPhase = Field(description="Pending, InProgress, Succeeded or Failed.")
    workflow_ref: WorkflowReference | None = Field(default=None, description="The category's Argo Workflow.")
    failed_nodes_ref: TypedLocalObjectReference | None = Field(
        default=None, description="ConfigMap with failed-nodes.json.gz (name, reason, message per node)."
    )
    succeeded_nodes_ref: TypedLocalObjectReference | None = Field(
        default=None, description="ConfigMap with succeeded-nodes.csv.gz."
    )
    message: str | None = Field(default=None, description="Why the category is in this state.")


class CertificationStatus(ServerModel):
    """Observed state, written only by the watcher through the status subresource."""

    observed_generation: int | None = Field(default=None, ge=0, description="Spec generation this status is for.")
    result: Result | None = Field(default=None, description="PASSED, FAILED, INCOMPLETE or RUNNING.")
    passed: str | None = Field(default=None, description='Categories passed out of all, e.g. "2/3".')
    failed_nodes: int | None = Field(default=None, ge=0, description="Distinct nodes that failed in any category.")
    excluded_nodes: int | None = Field(
        default=None,
        ge=0,
        description="Distinct target nodes left out of a run (cordoned, minority GPU, capacity).",
    )
    conditions: list[Condition] | None = Field(
        default=None, description="InProgress/Succeeded/Failed, ValidationFailed."
    )
    category_statuses: list[CategoryStatus] | None = Field(default=None, description="One entry per category.")
