"""`CertificationStatus`: what the watcher writes, computed from the Argo Workflows.

Beyond the reference's conditions and per-category statuses it carries `observedGeneration`, a one-word
`result`, node counts and `passed` ("2/3"), so `kubectl get certifications` answers "is this pool certified?"
without any CLI. A `testScale: diagnose` category also carries its isolation summary (`diagnose`): faults no
failed-node list can name (a broken link between two domains) and nodes left untested. Tolerant of unknown
fields: a newer watcher may have written more.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from nvcre_argo.api.base import ServerModel

CategoryPhase = Literal["Pending", "InProgress", "Succeeded", "Failed"]
Result = Literal["PASSED", "FAILED", "INCOMPLETE", "RUNNING"]
# How much of a diagnose category's isolation summary the status lists: the Certification is read by every
# `kubectl get`, so a run that leaves thousands of nodes untested must not make it thousands of entries long.
DIAGNOSE_MAX_FAULTS = 20
DIAGNOSE_MAX_GROUP_NAMES = 32
DIAGNOSE_MAX_UNTESTED = 50


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


class InfrastructureFault(ServerModel):
    """A fault a diagnose category found that no single node explains (a link, a switch trunk, a cable)."""

    domain: str = Field(description='The topology domain, or "<a>|<b>" for the link between domains a and b.')
    group_a: list[str] = Field(
        description=f"Nodes on one side of the fault (at most the first {DIAGNOSE_MAX_GROUP_NAMES} names)."
    )
    group_b: list[str] = Field(
        description=f"Nodes on the other side of the fault (at most the first {DIAGNOSE_MAX_GROUP_NAMES} names)."
    )
    stage: str = Field(description="The isolation stage that found it, e.g. inter-screening.")


class UntestedNode(ServerModel):
    """A node a diagnose category could not settle either way: neither certified nor failed."""

    node: str = Field(description="Node name.")
    reason: str = Field(description="Why it was left untested.")


class DiagnoseSummary(ServerModel):
    """How a `testScale: diagnose` category's isolation went and what it found beyond failed nodes.

    Lists are cut short so the status stays small (the counts are whole); the failed-nodes ConfigMap's
    `diagnose.json.gz` holds every entry and each round's groups."""

    rounds: int = Field(ge=0, description="Isolation rounds run.")
    jobs: int = Field(ge=0, description="Jobs (node groups) run over all rounds.")
    node_jobs: int = Field(ge=0, description="Sum of the jobs' node counts: the cost of the isolation.")
    infrastructure_fault_count: int = Field(default=0, ge=0, description="Infrastructure faults found.")
    infrastructure_faults: list[InfrastructureFault] = Field(
        default_factory=list, description=f"The infrastructure faults (at most the first {DIAGNOSE_MAX_FAULTS})."
    )
    untested_node_count: int = Field(default=0, ge=0, description="Nodes left untested.")
    untested_nodes: list[UntestedNode] = Field(
        default_factory=list,
        description=f"The untested nodes with the reason (at most the first {DIAGNOSE_MAX_UNTESTED}).",
    )


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
    diagnose: DiagnoseSummary | None = Field(
        default=None, description="testScale diagnose only: the isolation summary (rounds, faults, untested nodes)."
    )


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
