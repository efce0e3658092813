"""One reconcile: recompute a Certification's status from its Workflows and write it if it changed.

Idempotent by construction: the status is a function of the objects (and the previous status), so a
restarted watcher, a duplicate event or a periodic resync writes nothing new. Writes go to the status
subresource with the object's resourceVersion; a conflict re-reads and recomputes. Events are emitted only
with a status write that makes the transition, so each transition gets its Events once. With `--submit`, a
Certification with no Workflow of its own gets one compiled and created, owned by the Certification and with
a name derived from its UID, so a restart can never create a second set; a Workflow the Certification does
not own is never adopted. What compiling leaves out without failing (a spec-level threshold a category cannot
measure) is logged and recorded as a Warning Event on the Certification when its Workflow is created, as
`nvcre-compile` prints it: someone who applied the Certification with kubectl sees it in `kubectl describe`.

The status is computed once per reconcile: first what the Workflows say (which also names the result
ConfigMaps), then the ConfigMap facts are read and folded in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nvcre_argo.api.status import CertificationStatus
from nvcre_argo.catalog.loader import Catalog
from nvcre_argo.compiler import CompileOptions, certification_warnings, compile_certification
from nvcre_argo.controller.inputs import ConfigMapReader, read_counts
from nvcre_argo.controller.observability import Metrics
from nvcre_argo.errors import CompileError, InvalidDocumentError
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CERTIFICATIONS, WORKFLOWS, owned_by
from nvcre_argo.loading import LoadedCertification, parse_certification
from nvcre_argo.names import LABEL_ROLE, ROLE_PARENT, submitted_workflow_name
from nvcre_argo.watch.build_failure import (
    SubmitProblem,
    compile_problem,
    name_collision_problem,
    not_started_status,
)
from nvcre_argo.watch.events import Event, compile_warning_events, events_for_transition
from nvcre_argo.watch.status import compute_status, status_changed, view_workflows

log = logging.getLogger(__name__)
COMPONENT = "nvcre-argo-watcher"
CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class SubmitSettings:
    """`--submit`: compile and create the Workflows of Certifications applied with kubectl."""

    catalog: Catalog
    step_image: str
    # Compile for Argo's templateReferencing: Strict (`nvcre-compile --template-ref`).
    template_ref: bool = False
    # One pod runs each category's groups (`nvcre-compile --shared-runner`); False: a pod per group.
    shared_runner: bool = True


def relevant_workflows(
    certification: Mapping[str, Any], workflows: Sequence[Mapping[str, Any]], *, submit: bool
) -> list[Mapping[str, Any]]:
    """With `--submit`, only the Certification's own certification Workflow and its category Workflows
    count; otherwise every Workflow labelled with the Certification's name (submitted by argo or GitOps)."""
    if not submit:
        return list(workflows)
    uid = certification["metadata"].get("uid", "")
    parents = [item for item in workflows if owned_by(item, uid)]
    parent_uids = {item["metadata"].get("uid") for item in parents}
    children = [item for item in workflows if any(owned_by(item, parent) for parent in parent_uids if parent)]
    return parents + children


class Reconciler:
    def __init__(
        self,
        kube: KubeClient,
        *,
        metrics: Metrics,
        submit: SubmitSettings | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        identity: str = COMPONENT,
    ) -> None:
        self._kube = kube
        self._metrics = metrics
        self._submit = submit
        self._clock = clock
        self._identity = identity
        self._configmaps = ConfigMapReader(kube)
        self._written: dict[tuple[str, str], dict[str, Any]] = {}  # the status of our last write, by key

    def wrote(self, certification: Mapping[str, Any]) -> bool:
        """Whether the Certification is as our last status write left it (same status, spec generation observed),
        so its watch event is that write coming back and holds nothing to reconcile."""
        metadata = certification.get("metadata") or {}
        status = certification.get("status")
        return (
            isinstance(status, dict)
            and status == self._written.get((metadata.get("namespace", ""), metadata.get("name", "")))
            and metadata.get("generation") == status.get("observedGeneration")
        )

    def reconcile(self, namespace: str, name: str, workflows: Sequence[Mapping[str, Any]]) -> bool:
        """Bring one Certification's status up to date; True when a status was written."""
        with self._metrics.reconcile_timer():
            for _ in range(CONFLICT_RETRIES):
                certification = self._kube.get(CERTIFICATIONS, name, namespace)
                if certification is None:
                    self._metrics.forget(namespace, name)
                    self._written.pop((namespace, name), None)
                    self._configmaps.forget((namespace, name))
                    return False
                try:
                    return self._reconcile_once(certification, workflows)
                except ApiError as error:
                    if not error.conflict:
                        raise
                    log.info("status of %s/%s changed underneath; recomputing", namespace, name)
            raise ApiError(409, "Conflict", f"gave up writing the status of {namespace}/{name} after retries")

    def _reconcile_once(self, certification: dict[str, Any], workflows: Sequence[Mapping[str, Any]]) -> bool:
        previous = _previous_status(certification)
        now = self._clock()
        unfinished = previous is None or previous.result in (None, "RUNNING")
        if self._submit is not None and unfinished and not _has_own_parent(certification, workflows):
            problem = self._submit_workflow(certification)
            if problem is not None:
                return self._write(certification, previous, not_started_status(certification, problem, previous, now))
        own = relevant_workflows(certification, workflows, submit=self._submit is not None)
        view = view_workflows(certification, own, previous)
        metadata = certification["metadata"]
        counts = read_counts(self._configmaps, (metadata["namespace"], metadata["name"]), view.categories, own)
        status = compute_status(
            certification,
            own,
            previous,
            now,
            view=view,
            excluded_nodes=counts.excluded_nodes,
            failed_node_names=counts.failed_node_names,
            threshold_categories=counts.threshold_categories,
            unread_categories=counts.unread_categories,
            diagnose=counts.diagnose,
        )
        return self._write(certification, previous, status)

    def _write(
        self, certification: dict[str, Any], previous: CertificationStatus | None, status: CertificationStatus
    ) -> bool:
        metadata = certification["metadata"]
        self._metrics.observe(metadata["namespace"], metadata["name"], status)
        if not status_changed(previous, status):
            return False
        body = {
            "apiVersion": certification["apiVersion"],
            "kind": certification["kind"],
            "metadata": {
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "resourceVersion": metadata["resourceVersion"],
            },
            "spec": certification["spec"],
            "status": status.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        # Recorded before the write: its watch event can arrive before the answer to the write does.
        self._written[(metadata["namespace"], metadata["name"])] = body["status"]
        self._kube.replace(body, subresource="status")
        self._metrics.status_written()
        for event in events_for_transition(previous, status):
            self._emit(certification, event)
        return True

    def _emit(self, certification: dict[str, Any], event: Event) -> None:
        metadata = certification["metadata"]
        stamp = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self._kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"generateName": f"{metadata['name']}.", "namespace": metadata["namespace"]},
                    "involvedObject": {
                        "apiVersion": certification["apiVersion"],
                        "kind": certification["kind"],
                        "name": metadata["name"],
                        "namespace": metadata["namespace"],
                        "uid": metadata["uid"],
                    },
                    "type": event.type,
                    "reason": event.reason,
                    "message": event.message[:1024],
                    "source": {"component": COMPONENT},
                    "reportingComponent": COMPONENT,
                    "reportingInstance": self._identity,
                    "firstTimestamp": stamp,
                    "lastTimestamp": stamp,
                    "count": 1,
                }
            )
        except ApiError as error:  # an Event is worth a warning, not a failed reconcile
            log.warning("cannot record Event %s for %s: %s", event.reason, metadata["name"], error)

    def _warn(self, certification: dict[str, Any], loaded: LoadedCertification) -> None:
        """Log and record as Events what compiling left out, once: when the Workflow was just created."""
        assert self._submit is not None
        warnings = certification_warnings([loaded], catalog=self._submit.catalog)
        for warning in warnings:
            log.warning("%s", warning.render())
        for event in compile_warning_events(warnings):
            self._emit(certification, event)

    def _submit_workflow(self, certification: dict[str, Any]) -> SubmitProblem | None:
        """Compile and create the certification Workflow; why not, when it cannot be."""
        assert self._submit is not None
        metadata = certification["metadata"]
        try:
            loaded = LoadedCertification(
                f"{metadata['namespace']}/{metadata['name']}",
                parse_certification(_without_status(certification), metadata["name"]),
            )
            owner = {
                "apiVersion": certification["apiVersion"],
                "kind": certification["kind"],
                "name": metadata["name"],
                "uid": metadata["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
            compiled = compile_certification(
                loaded,
                catalog=self._submit.catalog,
                options=CompileOptions(
                    step_image=self._submit.step_image,
                    namespace=metadata["namespace"],
                    name=submitted_workflow_name(metadata["name"], metadata["uid"]),
                    owner_references=[owner],
                    template_ref=self._submit.template_ref,
                    shared_runner=self._submit.shared_runner,
                ),
            )
        except (CompileError, InvalidDocumentError) as error:
            return compile_problem(error.errors)
        try:
            self._kube.create(compiled.workflow)
            self._metrics.workflow_submitted()
            log.info(
                "created Workflow %s for Certification %s/%s",
                compiled.workflow["metadata"]["name"],
                metadata["namespace"],
                metadata["name"],
            )
        except ApiError as error:
            if not error.already_exists:
                raise
            name = compiled.workflow["metadata"]["name"]
            existing = self._kube.get(WORKFLOWS, name, metadata["namespace"]) or {}
            if not owned_by(existing, metadata["uid"]):
                return name_collision_problem(name)
        else:
            self._warn(certification, loaded)  # only with the creation, so a restart does not repeat them
        return None


def _previous_status(certification: Mapping[str, Any]) -> CertificationStatus | None:
    status = certification.get("status")
    return CertificationStatus.model_validate(status, by_alias=True) if status else None


def _without_status(certification: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in certification.items() if key != "status"}


def _has_own_parent(certification: Mapping[str, Any], workflows: Sequence[Mapping[str, Any]]) -> bool:
    uid = certification["metadata"].get("uid", "")
    return any(
        (item.get("metadata", {}).get("labels") or {}).get(LABEL_ROLE) == ROLE_PARENT and owned_by(item, uid)
        for item in workflows
    )
