"""Helpers for the watcher tests: play Argo, run Watchers in threads, wait for a Certification's status.

No Argo controller runs against the test control plane, so the tests do what it would: create the parent
Workflow `argo submit` would create (the compiled one), create each category Workflow from the manifest in the
parent's `category-<i>` resource template (as Argo's resource step does, with `setOwnerReference`), and write
each Workflow's `status` (phase, message, nodes with the `record` step's output parameters). Whether that
write goes to a status subresource depends on the installed Argo CRD, which is read, not assumed.

Each Watcher runs in its own thread with its own Metrics and stop Event, so a test can stop one, change the
cluster and start another (a restart), or run two side by side (leader election).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from nvcre_argo.catalog.loader import Catalog
from nvcre_argo.compiler import CompileOptions, compile_certification
from nvcre_argo.contract import OUTPUT_FAILED_NODES_REF, OUTPUT_SUCCEEDED_NODES_REF
from nvcre_argo.controller.leader import LeaderElector, LeaseSettings
from nvcre_argo.controller.loop import LoopSettings, Watcher
from nvcre_argo.controller.observability import Metrics
from nvcre_argo.controller.reconciler import Reconciler, SubmitSettings
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import CERTIFICATIONS, CRDS, EVENTS, WORKFLOWS
from nvcre_argo.loading import LoadedCertification, parse_certification
from nvcre_argo.names import LABEL_CERTIFICATION, LABEL_ROLE, ROLE_PARENT
from nvcre_argo.render.certification_workflow import embedded_category_workflow
from nvcre_argo.yamlio import load_yaml_documents

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
STEP_IMAGE = "nvcre-argo:test"
ARGO_API_VERSION = "argoproj.io/v1alpha1"
STARTED = "2026-01-01T00:00:00Z"
FINISHED = "2026-01-01T00:10:00Z"
TERMINAL_PHASES = ("Succeeded", "Failed", "Error")
WAIT_SECONDS = 20.0


# --- waiting -----------------------------------------------------------------------------------------------------


def wait_for(description: str, probe: Callable[[], T | None], *, timeout: float = WAIT_SECONDS) -> T:
    """Poll `probe` every 50 ms until it answers something truthy; fail naming what was awaited otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {description}")
        time.sleep(0.05)


def certification(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    found = kube.get(CERTIFICATIONS, name, namespace)
    assert found is not None, f"Certification {namespace}/{name} does not exist"
    return found


def wait_status(
    kube: KubeClient,
    namespace: str,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    description: str,
    *,
    timeout: float = WAIT_SECONDS,
) -> dict[str, Any]:
    """The Certification once its status satisfies `predicate`; the failure shows the last status seen."""
    seen: list[dict[str, Any]] = []

    def probe() -> dict[str, Any] | None:
        current = certification(kube, namespace, name)
        seen[:] = [current.get("status") or {}]
        return current if predicate(current.get("status") or {}) else None

    try:
        return wait_for(f"{name}: {description}", probe, timeout=timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}; last status: {seen[0] if seen else None}") from None


def category_phases(status: Mapping[str, Any]) -> list[str]:
    return [item.get("status", "") for item in status.get("categoryStatuses") or []]


def true_conditions(status: Mapping[str, Any]) -> list[str]:
    return [item["type"] for item in status.get("conditions") or [] if item.get("status") == "True"]


def condition(status: Mapping[str, Any], kind: str) -> dict[str, Any]:
    found = [item for item in status.get("conditions") or [] if item.get("type") == kind]
    assert len(found) == 1, f"expected one {kind} condition, got {status.get('conditions')}"
    return dict(found[0])


# --- the Certification and what Argo would create for it --------------------------------------------------------


def certification_manifest(namespace: str, name: str, *, variants: Sequence[str] | None = None) -> dict[str, Any]:
    """The example Certification (communication/nccl-all-reduce, then training/nemotron5-8b) in `namespace`;
    `variants` replaces the first categories' variants (to name one the catalog does not have)."""
    document = copy.deepcopy(next(iter(load_yaml_documents(EXAMPLE.read_text(encoding="utf-8")))))
    document["metadata"] = {"name": name, "namespace": namespace}
    for category, variant in zip(document["spec"]["categories"], variants or (), strict=False):
        category["variant"] = variant
    return dict(document)


def compile_parent(
    certification_object: Mapping[str, Any],
    *,
    catalog: Catalog,
    name: str,
    owner_references: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The parent Workflow `nvcre-compile` produces for the Certification, named as `argo submit` would."""
    metadata = certification_object["metadata"]
    document = {key: value for key, value in certification_object.items() if key != "status"}
    loaded = LoadedCertification(metadata["name"], parse_certification(document, metadata["name"]))
    options = CompileOptions(
        step_image=STEP_IMAGE, namespace=metadata["namespace"], name=name, owner_references=owner_references
    )
    return compile_certification(loaded, catalog=catalog, options=options).workflow


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def category_manifest(parent: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The category Workflow the step `category-<index>` creates: the embedded manifest with the workflow
    variables substituted, in the parent's namespace and owned by it (as `nvcre-argo step category` does)."""
    (template,) = [item for item in parent["spec"]["templates"] if item["name"] == f"category-{index}"]
    metadata = parent["metadata"]
    embedded = embedded_category_workflow(template)
    assert embedded is not None, f"category-{index} starts no category Workflow"
    text = json.dumps(embedded)
    for variable, value in (
        ("workflow.name", metadata["name"]),
        ("workflow.namespace", metadata["namespace"]),
        ("workflow.uid", metadata["uid"]),
    ):
        text = text.replace("{{" + variable + "}}", value)
    assert "{{" not in text, f"unsubstituted Argo variable in the category-{index} manifest"
    manifest: dict[str, Any] = json.loads(text)
    manifest["metadata"]["namespace"] = metadata["namespace"]
    manifest["metadata"]["ownerReferences"] = [owner_reference(parent)]
    return manifest


@dataclass(frozen=True)
class Step:
    """One node of a Workflow's status as Argo writes it."""

    name: str
    template: str
    phase: str
    message: str = ""
    outputs: Mapping[str, str] = field(default_factory=dict)


def workflow_nodes(workflow: str, phase: str, steps: Sequence[Step], root_template: str) -> dict[str, Any]:
    """`status.nodes`: the root Steps node, then one Pod node per step, keyed by node id as Argo keys them."""
    root: dict[str, Any] = {
        "id": workflow,
        "name": workflow,
        "displayName": workflow,
        "type": "Steps",
        "templateName": root_template,
        "templateScope": f"local/{workflow}",
        "phase": phase,
        "startedAt": STARTED,
        "children": [],
    }
    if phase in TERMINAL_PHASES:
        root["finishedAt"] = FINISHED
    nodes = {workflow: root}
    for number, step in enumerate(steps):
        node_id = f"{workflow}-{1000000000 + number}"
        node: dict[str, Any] = {
            "id": node_id,
            "name": f"{workflow}[{number}].{step.name}",
            "displayName": step.name,
            "type": "Pod",
            "templateName": step.template,
            "templateScope": f"local/{workflow}",
            "phase": step.phase,
            "boundaryID": workflow,
            "startedAt": STARTED,
        }
        if step.phase in TERMINAL_PHASES:
            node["finishedAt"] = FINISHED
        if step.message:
            node["message"] = step.message
        if step.outputs:
            node["outputs"] = {"parameters": [{"name": key, "value": value} for key, value in step.outputs.items()]}
        nodes[node_id] = node
        root["children"].append(node_id)
    return nodes


def record_step(*, failed: str | None = None, succeeded: str | None = None) -> Step:
    """The category Workflow's `record` node with the ConfigMap names it output."""
    outputs = {OUTPUT_FAILED_NODES_REF: failed or "", OUTPUT_SUCCEEDED_NODES_REF: succeeded or ""}
    return Step("record", "record", "Succeeded", outputs=outputs)


class Argo:
    """Writes Workflows and their status the way the Argo controller does."""

    def __init__(self, kube: KubeClient, namespace: str, catalog: Catalog) -> None:
        self.kube = kube
        self.namespace = namespace
        self.catalog = catalog
        crd = kube.get(CRDS, "workflows.argoproj.io")
        assert crd is not None, "the Argo Workflow CRD is not installed"
        served = [version for version in crd["spec"]["versions"] if version["name"] == "v1alpha1"]
        self.status_subresource = "status" in (served[0].get("subresources") or {})

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.kube.create(manifest)

    def get(self, name: str) -> dict[str, Any]:
        found = self.kube.get(WORKFLOWS, name, self.namespace)
        assert found is not None, f"Workflow {name} does not exist"
        return found

    def set_status(
        self,
        name: str,
        phase: str,
        *,
        message: str = "",
        steps: Sequence[Step] = (),
        root_template: str = "category",
    ) -> dict[str, Any]:
        status: dict[str, Any] = {"phase": phase, "startedAt": STARTED, "progress": "0/1"}
        if phase in TERMINAL_PHASES:
            status["finishedAt"] = FINISHED
            status["progress"] = "1/1"
        if message:
            status["message"] = message
        status["nodes"] = workflow_nodes(name, phase, steps, root_template)
        subresource = "status" if self.status_subresource else None
        return self.kube.merge_patch(WORKFLOWS, name, {"status": status}, self.namespace, subresource=subresource)

    def submit(self, certification_object: Mapping[str, Any], phase: str = "Running") -> dict[str, Any]:
        """What `argo submit` of the compiled Certification leaves: the parent Workflow, then Argo running it."""
        name = f"{certification_object['metadata']['name']}-x7k2p"
        self.create(compile_parent(certification_object, catalog=self.catalog, name=name))
        if phase:
            self.set_status(name, phase, root_template="certification")
        return self.get(name)

    def create_category(self, parent: Mapping[str, Any], index: int, phase: str = "Running") -> dict[str, Any]:
        created = self.create(category_manifest(parent, index))
        if phase:
            self.set_status(created["metadata"]["name"], phase, steps=[Step("plan", "plan", "Running")])
        return self.get(created["metadata"]["name"])


def own_parents(kube: KubeClient, namespace: str, certification_object: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Parent Workflows (role=certification) owned by the Certification."""
    uid = certification_object["metadata"]["uid"]
    selector = f"{LABEL_CERTIFICATION}={certification_object['metadata']['name']},{LABEL_ROLE}={ROLE_PARENT}"
    items, _ = kube.list(WORKFLOWS, namespace, label_selector=selector)
    return [
        item
        for item in items
        if any(owner.get("uid") == uid for owner in item["metadata"].get("ownerReferences") or [])
    ]


def events_about(kube: KubeClient, namespace: str, uid: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the core/v1 Events about the object with `uid`, oldest first."""
    items, _ = kube.list(EVENTS, namespace)
    mine = [item for item in items if item.get("involvedObject", {}).get("uid") == uid]
    mine.sort(key=lambda item: (item.get("firstTimestamp") or "", item["metadata"].get("resourceVersion", "")))
    return [(item["type"], item["reason"], item["message"]) for item in mine]


# --- watchers ----------------------------------------------------------------------------------------------------


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    """A metric's current value, 0 when the series does not exist."""
    return metrics.registry.get_sample_value(name, labels) or 0.0


def status_writes(metrics: Metrics) -> float:
    return sample(metrics, "nvcre_status_writes_total")


def reconciles(metrics: Metrics) -> float:
    return sample(metrics, "nvcre_reconcile_total", outcome="ok")


@dataclass
class RunningWatcher:
    watcher: Watcher
    reconciler: Reconciler
    metrics: Metrics
    stop_event: threading.Event
    thread: threading.Thread

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), "the watcher did not stop within 15 s of its stop Event"

    def wait_synced(self) -> None:
        assert self.watcher.synced.wait(WAIT_SECONDS), "the watcher never finished its first lists"

    def settle(self, rounds: int = 2) -> None:
        """Wait until at least `rounds` more reconciles have happened (resyncs included)."""
        target = reconciles(self.metrics) + rounds
        wait_for(f"{rounds} more reconciles", lambda: reconciles(self.metrics) >= target)


def start_watcher(
    kube: KubeClient,
    namespace: str,
    *,
    submit: SubmitSettings | None = None,
    resync_seconds: float = 1.0,
    identity: str = "watcher-test",
) -> RunningWatcher:
    """A Watcher of `namespace` in a daemon thread, as `nvcre-argo watch -n NAMESPACE` runs it."""
    metrics = Metrics()
    stop = threading.Event()
    reconciler = Reconciler(kube, metrics=metrics, submit=submit, identity=identity)
    settings = LoopSettings(
        namespace, watch_timeout_seconds=10, resync_seconds=resync_seconds, error_backoff_seconds=0.2
    )
    watcher = Watcher(kube, reconciler, settings=settings, metrics=metrics, stop=stop)
    thread = threading.Thread(target=watcher.run, name=f"watcher-{identity}", daemon=True)
    thread.start()
    return RunningWatcher(watcher, reconciler, metrics, stop, thread)


@dataclass
class Replica:
    """One watcher replica with `--leader-elect`: wait for the Lease, then watch (as `nvcre-argo watch` does)."""

    identity: str
    elector: LeaderElector
    watcher: Watcher
    metrics: Metrics
    stop_event: threading.Event
    threads: list[threading.Thread]
    lost: threading.Event

    @property
    def leading(self) -> bool:
        return self.elector.leading.is_set()

    def stop(self) -> None:
        """Stop renewing (without releasing the Lease) and stop watching: a crashed or partitioned leader."""
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=15)
            assert not thread.is_alive(), f"replica {self.identity}: {thread.name} did not stop"


def start_replica(kube: KubeClient, namespace: str, lease: LeaseSettings) -> Replica:
    metrics = Metrics()
    stop = threading.Event()
    lost = threading.Event()
    reconciler = Reconciler(kube, metrics=metrics, identity=lease.identity)
    settings = LoopSettings(namespace, watch_timeout_seconds=10, resync_seconds=1.0, error_backoff_seconds=0.2)
    watcher = Watcher(kube, reconciler, settings=settings, metrics=metrics, stop=stop)
    elector = LeaderElector(kube, lease)

    def on_lost() -> None:
        lost.set()
        stop.set()

    def main() -> None:
        while not stop.is_set() and not elector.leading.wait(0.1):
            pass
        if not stop.is_set():
            watcher.run()

    threads = [
        threading.Thread(target=elector.run, args=(stop, on_lost), name=f"elector-{lease.identity}", daemon=True),
        threading.Thread(target=main, name=f"replica-{lease.identity}", daemon=True),
    ]
    for thread in threads:
        thread.start()
    return Replica(lease.identity, elector, watcher, metrics, stop, threads, lost)


@dataclass
class Watchers:
    """Every watcher and replica a test started, stopped at teardown."""

    kube: KubeClient
    namespace: str
    started: list[RunningWatcher | Replica] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def start(self, *, client: KubeClient | None = None, **kwargs: Any) -> RunningWatcher:
        """A watcher of this namespace; `client` replaces the KubeClient it lists, watches and writes with."""
        kwargs.setdefault("identity", f"watcher-{next(self._ids)}")
        running = start_watcher(client or self.kube, self.namespace, **kwargs)
        self.started.append(running)
        return running

    def replica(self, lease: LeaseSettings) -> Replica:
        replica = start_replica(self.kube, self.namespace, lease)
        self.started.append(replica)
        return replica

    def stop_all(self) -> None:
        for item in self.started:
            item.stop_event.set()
        for item in self.started:
            item.stop()
