"""The certification Workflow's hold on its category Workflows: start each once, follow it, stop it with us.

A category step of the certification Workflow runs `nvcre-argo step category`: it creates the category's
Workflow under a deterministic name (`<parent>-<index>`) unless it exists, then follows it to its end. So a
step that Argo retries, or whose pod was evicted, finds the Workflow it already started and waits for it
again, instead of starting a second run on the same GPUs or letting the next category start early.

Stop means stop. Argo's `stop`, `terminate`, a deadline or a deletion of the certification Workflow does not
reach the Workflows it created (owner references only act on deletion). The step therefore watches its
parent too: once the parent is shutting down, deleted or gone, it sets `spec.shutdown: Stop` on the category
Workflow, whose own exit handler then deletes its unfinished TrainJobs and frees the GPUs. A parent-level
exit handler (`nvcre-argo step stop-children`) does the same for every unfinished category Workflow, for a
step pod that was killed before it could. A step pod stopped for any other reason (eviction, a drained node)
leaves the category Workflow running: the retried step picks it up. The step also stops a category Workflow
whose shared runner ended for good with groups left waiting (`group_nodes.stranded_groups`): nothing would end
them before the Workflow's deadline.

One category at a time, even when a step is lost for good. A category step whose pod the kubelet stopped and
whose end Argo read first (`Failed`, exit code 143) is not retried (`render.category_template.step_retry`):
the certification goes on to the next category while the lost step's category Workflow still runs. So a
category step first waits for its parent's other category Workflows still running (`running_siblings`), and
only then starts its own: two categories never share the GPUs.

`argo retry` re-tests. A step that reported its category's outcome marks the category Workflow
(`nvcre.nvidia.com/reported`); when Argo runs the step again after that (a retry of the certification
Workflow), the reported Workflow is history, and the step starts the next attempt, `<parent>-<index>-r2`,
`-r3`, ... An unreported one (the step's pod was lost before it could report) is followed, never restarted.

Deciding is pure (`stop_reason`, `is_finished`, `CategoryOutcome`); the loop only reads and patches.
"""

from __future__ import annotations

import base64
import binascii
import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CONFIGMAPS, WORKFLOWS, owned_by
from nvcre_argo.names import (
    LABEL_CATEGORY_INDEX,
    LABEL_CERTIFICATION,
    LABEL_ROLE,
    ROLE_CATEGORY,
    dns_label,
    failed_nodes_configmap,
)
from nvcre_argo.results import FAILED_NODES_KEY, ResultsError, decode_failed_nodes
from nvcre_argo.steps.group_nodes import stranded_groups

FINISHED_PHASES = frozenset({"Succeeded", "Failed", "Error"})
SHUTDOWN_STOP = "Stop"
# Set on a category Workflow once its step reported the outcome: a later run of the step starts a new attempt.
REPORTED_ANNOTATION = "nvcre.nvidia.com/reported"
# How many failed nodes a step's message names; the rest are counted.
MESSAGE_NODE_LIMIT = 5


class ChildConflictError(Exception):
    """A Workflow of the category's name exists and was not created by this certification Workflow."""


@dataclass(frozen=True)
class Parent:
    """The certification Workflow a category step runs in."""

    name: str
    uid: str
    namespace: str

    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class CategoryOutcome:
    """What a category step reports: its category Workflow, how it ended, and whom it blamed."""

    key: str
    workflow: str
    phase: str
    failed_nodes: tuple[str, ...] = ()
    stopped: str | None = None  # why the step stopped the category Workflow, if it did

    @property
    def passed(self) -> bool:
        return self.phase == "Succeeded" and self.stopped is None

    @property
    def verdict(self) -> str:
        if self.stopped:
            return "Stopped"
        return "Passed" if self.passed else "Failed"

    def summary(self) -> str:
        """One line for the Argo UI: which category, its Workflow, and the failed nodes (bounded)."""
        if self.stopped:
            return f"{self.key}: stopped Workflow {self.workflow} because {self.stopped}"
        if self.passed:
            return f"{self.key}: passed (Workflow {self.workflow})"
        count = len(self.failed_nodes)
        if not count:
            return f"{self.key}: {self.phase} with no node blamed (Workflow {self.workflow})"
        named = ", ".join(self.failed_nodes[:MESSAGE_NODE_LIMIT])
        more = f" and {count - MESSAGE_NODE_LIMIT} more" if count > MESSAGE_NODE_LIMIT else ""
        return f"{self.key}: {count} node(s) failed: {named}{more} (Workflow {self.workflow})"


def is_finished(workflow: Mapping[str, Any]) -> bool:
    return (workflow.get("status") or {}).get("phase") in FINISHED_PHASES


def stop_reason(parent: Mapping[str, Any] | None) -> str | None:
    """Why the category Workflows must stop with their parent, or None while the parent runs on."""
    if parent is None:
        return "the certification Workflow is gone"
    metadata = parent.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return "the certification Workflow is being deleted"
    shutdown = (parent.get("spec") or {}).get("shutdown")
    if shutdown:
        return f"the certification Workflow was shut down ({shutdown})"
    if is_finished(parent):
        return f"the certification Workflow ended ({parent['status']['phase']})"
    return None


def child_manifest(template: Mapping[str, Any], parent: Parent) -> dict[str, Any]:
    """The category Workflow to create: the compiled manifest, in the parent's namespace, owned by it."""
    manifest = copy.deepcopy(dict(template))
    metadata = manifest.setdefault("metadata", {})
    metadata["namespace"] = parent.namespace
    metadata["ownerReferences"] = [parent.owner_reference()]
    return manifest


def attempt_manifest(manifest: Mapping[str, Any], attempt: int) -> dict[str, Any]:
    """The manifest of the category's `attempt`-th Workflow: the first keeps the compiled name, later ones
    end in `-r<attempt>` (shortened with a hash if the name would pass 63 characters)."""
    if attempt == 1:
        return dict(manifest)
    renamed = copy.deepcopy(dict(manifest))
    renamed["metadata"]["name"] = dns_label(f"{manifest['metadata']['name']}-r{attempt}")
    return renamed


def is_reported(workflow: Mapping[str, Any]) -> bool:
    return REPORTED_ANNOTATION in ((workflow.get("metadata") or {}).get("annotations") or {})


def current_attempt(kube: KubeClient, manifest: dict[str, Any], parent: Parent) -> tuple[dict[str, Any], bool]:
    """The attempt to follow: the first not yet reported (created if absent); (workflow, created now)."""
    attempt = 1
    while True:
        child, created = ensure_child(kube, attempt_manifest(manifest, attempt), parent)
        if created or not (is_finished(child) and is_reported(child)):
            return child, created
        attempt += 1


def mark_reported(kube: KubeClient, child: Mapping[str, Any], outcome: CategoryOutcome) -> None:
    """Record on the category Workflow that its outcome was reported (best effort: it may be gone)."""
    patch = {"metadata": {"annotations": {REPORTED_ANNOTATION: outcome.verdict}}}
    try:
        kube.merge_patch(WORKFLOWS, child["metadata"]["name"], patch, child["metadata"]["namespace"])
    except ApiError as error:
        if not error.not_found:
            raise


def ensure_child(kube: KubeClient, manifest: dict[str, Any], parent: Parent) -> tuple[dict[str, Any], bool]:
    """The category Workflow, created unless this parent already created it; (workflow, created now)."""
    name = manifest["metadata"]["name"]
    try:
        return kube.create(manifest), True
    except ApiError as error:
        if not error.already_exists:
            raise
    existing = kube.get(WORKFLOWS, name, parent.namespace)
    if existing is None:  # deleted between the two calls: start it now
        return kube.create(manifest), True
    if not owned_by(existing, parent.uid):
        raise ChildConflictError(
            f"Workflow {parent.namespace}/{name} exists and was not created by Workflow {parent.name}; "
            "refusing to follow or stop it"
        )
    return existing, False


def stop_child(kube: KubeClient, name: str, namespace: str) -> bool:
    """Set `spec.shutdown: Stop` on a category Workflow (its exit handler deletes its TrainJobs); False when
    it is already gone."""
    try:
        kube.merge_patch(WORKFLOWS, name, {"spec": {"shutdown": SHUTDOWN_STOP}}, namespace)
    except ApiError as error:
        if error.not_found:
            return False
        raise
    return True


def failed_node_names(kube: KubeClient, namespace: str, child: Mapping[str, Any]) -> tuple[str, ...]:
    """The nodes the category's record step wrote to its failed-nodes ConfigMap (empty when none or unread)."""
    configmap = kube.get(CONFIGMAPS, failed_nodes_configmap(child["metadata"]["uid"]), namespace)
    data = ((configmap or {}).get("binaryData") or {}).get(FAILED_NODES_KEY)
    if not data:
        return ()
    try:
        return tuple(sorted({node.name for node in decode_failed_nodes(base64.b64decode(data))}))
    except (binascii.Error, ResultsError):
        return ()


def running_siblings(workflows: list[dict[str, Any]], manifest: Mapping[str, Any], parent: Parent) -> list[str]:
    """The names (sorted) of the parent's category Workflows among `workflows` that still run, other than the
    attempts of `manifest`'s own category (by category index): those a new category must wait for."""
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    own_index = labels.get(LABEL_CATEGORY_INDEX)
    return sorted(
        workflow["metadata"]["name"]
        for workflow in workflows
        if owned_by(workflow, parent.uid)
        and not is_finished(workflow)
        and ((workflow["metadata"].get("labels") or {}).get(LABEL_CATEGORY_INDEX)) != own_index
    )


def _category_selector(manifest: Mapping[str, Any]) -> str:
    certification = ((manifest.get("metadata") or {}).get("labels") or {}).get(LABEL_CERTIFICATION, "")
    return f"{LABEL_CERTIFICATION}={certification},{LABEL_ROLE}={ROLE_CATEGORY}"


@dataclass(frozen=True)
class FollowSettings:
    poll_seconds: float = 5.0
    sleep: Callable[[float], None] = time.sleep


def wait_for_running_siblings(
    kube: KubeClient,
    manifest: Mapping[str, Any],
    parent: Parent,
    *,
    settings: FollowSettings,
    report: Callable[[str], None],
) -> str | None:
    """Wait until none of the parent's other category Workflows runs (`running_siblings`); why the parent
    stopped meanwhile, or None."""
    selector = _category_selector(manifest)
    waiting_for: list[str] = []
    while running := running_siblings(
        kube.list(WORKFLOWS, parent.namespace, label_selector=selector)[0], manifest, parent
    ):
        if running != waiting_for:
            report(f"waiting for category Workflow(s) still running to end first: {', '.join(running)}")
            waiting_for = running
        reason = stop_reason(kube.get(WORKFLOWS, parent.name, parent.namespace))
        if reason:
            return reason
        settings.sleep(settings.poll_seconds)
    return None


def follow_child(
    kube: KubeClient,
    template: Mapping[str, Any],
    parent: Parent,
    *,
    key: str,
    settings: FollowSettings | None = None,
    report: Callable[[str], None] = print,
) -> CategoryOutcome:
    """Start the category Workflow once, when no other category of the parent still runs, and wait for its end,
    stopping it when the parent stops, or when its groups were stranded (`stranded_groups`): then it waits for
    the stopped Workflow's end (its exit handler deletes its TrainJobs), so the next category does not start
    beside them."""
    settings = settings or FollowSettings()
    manifest = child_manifest(template, parent)
    reason = wait_for_running_siblings(kube, manifest, parent, settings=settings, report=report)
    if reason:
        return CategoryOutcome(key, manifest["metadata"]["name"], "Pending", stopped=reason)
    child, created = current_attempt(kube, manifest, parent)
    name = child["metadata"]["name"]
    report(f"{'created' if created else 'following the existing'} category Workflow {name}")
    stranded: str | None = None
    while True:
        if is_finished(child):
            phase = child["status"]["phase"]
            outcome = CategoryOutcome(
                key, name, phase, failed_node_names(kube, parent.namespace, child), stopped=stranded
            )
            mark_reported(kube, child, outcome)
            return outcome
        reason = stop_if_parent_stopping(kube, parent, name)
        if reason:
            phase = (child.get("status") or {}).get("phase") or "Pending"
            outcome = CategoryOutcome(key, name, phase, stopped=reason)
            mark_reported(kube, child, outcome)
            return outcome
        if stranded is None and (stranded := stranded_groups(child)):
            report(f"stopping category Workflow {name}: {stranded}")
            stop_child(kube, name, parent.namespace)
        settings.sleep(settings.poll_seconds)
        found = kube.get(WORKFLOWS, name, parent.namespace)
        if found is None:
            return CategoryOutcome(key, name, "Error", stopped=f"category Workflow {name} was deleted")
        child = found


def stop_if_parent_stopping(kube: KubeClient, parent: Parent, child_name: str) -> str | None:
    """Stop the category Workflow only when the parent is stopping (checked on every poll, and on SIGTERM,
    which an eviction sends too); why, or None."""
    reason = stop_reason(kube.get(WORKFLOWS, parent.name, parent.namespace))
    if reason:
        stop_child(kube, child_name, parent.namespace)
    return reason


def stop_children(
    kube: KubeClient, parent: Parent, certification: str, *, report: Callable[[str], None] = print
) -> list[str]:
    """The parent's exit handler: stop every unfinished category Workflow it created; their names."""
    selector = f"{LABEL_CERTIFICATION}={certification},{LABEL_ROLE}={ROLE_CATEGORY}"
    stopped = []
    workflows, _ = kube.list(WORKFLOWS, parent.namespace, label_selector=selector)
    for workflow in workflows:
        name = workflow["metadata"]["name"]
        if owned_by(workflow, parent.uid) and not is_finished(workflow) and stop_child(kube, name, parent.namespace):
            stopped.append(name)
            report(f"stopped unfinished category Workflow {name}")
    if not stopped:
        report("no unfinished category Workflow")
    return sorted(stopped)
