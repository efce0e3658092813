"""The record step: gather every group's result into the reference's failed/succeeded-node ConfigMaps.

Within a category a node appears once per reason in `failed-nodes-<id>`; `succeeded-nodes-<id>` holds the
nodes of groups whose every iteration passed. A group that blamed all its nodes alike (a hang, a stall, a
slow or low-bandwidth job: nothing says which node caused it) is settled by confirmation
(`steps.confirming`): each of its nodes is blamed or cleared by a test with known-healthy partners, where
one could be run. A node whose group failed for another node's sake (a groupmate's rank failed first, or a
health-check hit stopped the whole group) is in neither list: it was not tested to the end, so it is not
certified, and nothing blames it either. A group with no result (its run step never finished) counts as a
failed workload on all its nodes: nothing is silently dropped. A group that did not pass with no node to
blame (its measurement could not be read) fails the category without failing a node. Each ConfigMap is
written in one request, and its name is published (as the step's outputs) only after it exists.

The two result ConfigMaps outlive the Workflows: a Certification's status points at them long after Argo's
TTL, `argo delete` or a deleted certification Workflow removed the Workflows. So they are owned by the
Certification when the certification Workflow was started for one (the watcher's `--submit`), and otherwise
by nothing, found by their labels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import CONFIGMAPS, WORKFLOWS
from nvcre_argo.names import LABEL_RECORD, LABEL_WORKFLOW, failed_nodes_configmap, succeeded_nodes_configmap
from nvcre_argo.plan.model import Plan
from nvcre_argo.results import (
    RECORD_GROUP_RESULT,
    WORKLOAD_FAILED,
    DiagnoseRecord,
    FailedNode,
    GroupResultRecord,
    PlatformRecord,
    failed_nodes_configmap_manifest,
    read_group_result,
    succeeded_nodes_configmap_manifest,
)
from nvcre_argo.steps.confirming import confirmed_failures
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.diagnosing import diagnose_outcome
from nvcre_argo.steps.planning import load_plan


@dataclass(frozen=True)
class RecordOutcome:
    failed_nodes_ref: str
    succeeded_nodes_ref: str
    failed: list[FailedNode]
    succeeded: list[str]
    # Why the category did not pass beyond its failed nodes: groups that did not pass with no node to blame
    # (e.g. an unreadable measurement), faults between domains, nodes a diagnose run left untested.
    findings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failed and not self.findings

    def summary(self) -> str:
        """One line for a failed category: who failed and why, or which groups could not pass."""
        parts = []
        if self.failed:
            names = sorted({node.name for node in self.failed})
            parts.append(f"{len(names)} node(s) failed: {', '.join(names)}")
        parts += self.findings
        return "; ".join(parts) or "passed"


CERTIFICATION_KIND = "Certification"


def _owners_of_kind(obj: dict[str, Any] | None, kind: str) -> list[dict[str, Any]]:
    return [
        owner for owner in ((obj or {}).get("metadata") or {}).get("ownerReferences") or [] if owner["kind"] == kind
    ]


def result_owners(kube: KubeClient, context: StepContext) -> list[dict[str, Any]]:
    """The Certification this run was started for, as the results' owner; none when started by hand."""
    workflow = kube.get(WORKFLOWS, context.workflow_name, context.namespace)
    for parent_ref in _owners_of_kind(workflow, "Workflow"):
        parent = kube.get(WORKFLOWS, parent_ref["name"], context.namespace)
        for owner in _owners_of_kind(parent, CERTIFICATION_KIND):
            return [{key: owner[key] for key in ("apiVersion", "kind", "name", "uid")}]
    return []


def read_group_results(kube: KubeClient, context: StepContext) -> dict[str, GroupResultRecord]:
    """Every group result this Workflow's run steps left, by group name (one list request)."""
    selector = f"{LABEL_WORKFLOW}={context.workflow_name},{LABEL_RECORD}={RECORD_GROUP_RESULT}"
    configmaps, _ = kube.list(CONFIGMAPS, context.namespace, label_selector=selector)
    return {result["group"]: result for result in (read_group_result(cm) for cm in configmaps)}


def record_step(kube: KubeClient, context: StepContext, *, report: Callable[[str], None] = print) -> RecordOutcome:
    plan = load_plan(kube, context)
    results = read_group_results(kube, context)
    if plan.isolation is not None:
        diagnosed = diagnose_outcome(plan, results)
        for line in diagnosed.findings:
            report(line)
        return _write_records(
            kube,
            context,
            plan,
            failed=diagnosed.failed,
            succeeded=diagnosed.succeeded,
            findings=diagnosed.findings,
            diagnose=diagnosed.record,
            report=report,
        )
    confirmed = confirmed_failures(plan, results)
    for line in confirmed.lines:
        report(line)
    failed: list[FailedNode] = list(confirmed.failed)
    passed_nodes: set[str] = set(confirmed.passed)
    unpassed: list[tuple[str, str]] = []
    for group in plan.groups:
        if group.round is not None:
            continue  # a confirmation job: `confirmed` holds what it found
        result = results.get(group.name)
        if result is None or not result["iterations"]:
            message = f"no result was recorded for group {group.name} (its run step did not finish)"
            failed += [FailedNode(node, WORKLOAD_FAILED, message) for node in group.nodes]
            continue
        for iteration in result["iterations"]:
            failed += [
                FailedNode(item["name"], item["reason"], item["message"])
                for item in iteration["failed_nodes"]
                if item["name"] not in confirmed.decided
            ]
        if all(iteration["succeeded"] for iteration in result["iterations"]):
            passed_nodes |= set(result["nodes"])
        elif not any(iteration["failed_nodes"] for iteration in result["iterations"]):
            reason = next(it["message"] for it in result["iterations"] if not it["succeeded"])
            unpassed.append((group.name, reason))
    for name, reason in unpassed:
        report(f"group {name} did not pass, no node blamed (its nodes are not certified): {reason}")
    unpassed_names = ", ".join(name for name, _ in unpassed)
    findings = [f"group(s) {unpassed_names} did not pass with no node to blame"] if unpassed else []
    succeeded = sorted(passed_nodes - {node.name for node in failed})
    return _write_records(kube, context, plan, failed=failed, succeeded=succeeded, findings=findings, report=report)


def _write_records(
    kube: KubeClient,
    context: StepContext,
    plan: Plan,
    *,
    failed: list[FailedNode],
    succeeded: list[str],
    findings: list[str],
    report: Callable[[str], None],
    diagnose: DiagnoseRecord | None = None,
) -> RecordOutcome:
    """Write both result ConfigMaps (each in one request), then say what they hold."""
    failed_name = failed_nodes_configmap(context.workflow_uid)
    succeeded_name = succeeded_nodes_configmap(context.workflow_uid)
    common: dict[str, Any] = {
        "namespace": context.namespace,
        "owner_references": result_owners(kube, context),
        "labels": context.labels(),
        "annotations": PlatformRecord(
            platform=plan.platform.name if plan.platform else None,
            arms=plan.platform.arms if plan.platform else (),
            gpu_architecture=plan.architecture,
        ).annotations(),
    }
    kube.create_or_replace(failed_nodes_configmap_manifest(failed_name, nodes=failed, diagnose=diagnose, **common))
    kube.create_or_replace(succeeded_nodes_configmap_manifest(succeeded_name, names=succeeded, **common))
    outcome = RecordOutcome(failed_name, succeeded_name, failed, succeeded, findings)
    failed_names = {node.name for node in failed}
    verdict = "PASSED" if outcome.passed else "FAILED"
    report(
        f"{context.category.domain}/{context.category.variant}: {verdict}: {len(succeeded)} node(s) passed, "
        f"{len(failed_names)} failed, {len(plan.excluded)} excluded; ConfigMaps {failed_name}, {succeeded_name}"
    )
    for node in failed:
        report(f"failed {node.name}: {node.reason}: {node.message.splitlines()[0] if node.message else ''}")
    return outcome
