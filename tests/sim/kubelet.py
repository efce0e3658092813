"""The sim kubelet: one process that plays every fake GPU node of the simulated cluster.

It registers the nodes (GPU capacity, labels, taints, 127.0.0.1 addresses), keeps them alive with Leases
in ``kube-node-lease`` as a kubelet does, watches the pods the scheduler binds to them and runs each one
(``tests/sim/pods.py``): pods whose images map to local programs (Argo's executor, our step and watcher
image) as real processes, workload pods played from the fault plan of their namespace (ConfigMap
``nvcre-sim-fault-plan``, key ``plan.yaml``; none means every node is healthy). It serves container logs
for ``pods/log`` and finishes pod deletions as the kubelet does.

It also keeps the checkpoints workload pods save on their claims (``tests/sim/checkpoints.py``), in memory
for as long as it runs: the claims' content, which played pods have no files for.

Fault effects on nodes (a taint, a condition, NotReady) belong to the namespace whose workload caused them
and are undone when that namespace is deleted, so one test's broken node does not leak into the next.

Why not KWOK: KWOK plays pods from static stages and serves logs only from files in CRI format selected per
namespace or pod name; per-node faults that depend on a pod's group, per-pod logs and real processes for
Argo's pods would each need a second mechanism beside it. One kubelet that does all three is one harness.

Run as ``python -m tests.sim.kubelet CONFIG.json`` (the harness does); SIGTERM stops every container first.
"""

from __future__ import annotations

import collections
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from tests.sim import podspec
from tests.sim.apirelay import serve_api_relay
from tests.sim.checkpoints import CheckpointStore
from tests.sim.config import FAULT_PLAN_CONFIGMAP, FAULT_PLAN_KEY, KubeletConfig, NodeSpec
from tests.sim.logserver import serve_logs
from tests.sim.player import JOBSET_LABEL, BoundPod, play_workload
from tests.sim.pods import PodRunner, api_socket_path, now_rfc3339

log = logging.getLogger("sim-kubelet")

LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
# Lease renewals in flight at once (the API client's connection pool holds more).
HEARTBEAT_WORKERS = 8
# The API client's connection pool: the heartbeat's renewals, the pod watch and the pods' status writes.
CONNECTIONS = 32
# Every how many heartbeats the nodes' Ready condition is checked (a LIST of every node).
READY_CHECK_EVERY = 3
# A heartbeat request waits at most this long for the API server: one hung connection must not stop every node's
# heartbeat (the node lifecycle controller would then taint every node, the system node's step pods included).
HEARTBEAT_REQUEST_TIMEOUT_S = 10.0
WATCH_TIMEOUT_SECONDS = 300
SIM_MARK_ANNOTATION = "sim.nvcre.nvidia.com/marked-by"


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_manifest(spec: NodeSpec, log_port: int) -> dict[str, Any]:
    """The Node object a kubelet with this hardware would register."""
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **spec.labels,
    }
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods), "nvidia.com/gpu": str(spec.gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {"taints": list(spec.taints), **({"providerID": spec.provider_id} if spec.provider_id else {})},
        "status": node_status(resources, log_port, ready=True),
    }


def node_status(resources: Mapping[str, str], log_port: int, *, ready: bool) -> dict[str, Any]:
    now = now_rfc3339()

    def condition(kind: str, value: bool, reason: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": "True" if value else "False",
            "reason": reason,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": log_port}},
        "conditions": [
            condition("Ready", ready, "KubeletReady" if ready else "KubeletNotReady"),
            condition("MemoryPressure", False, "KubeletHasSufficientMemory"),
            condition("DiskPressure", False, "KubeletHasNoDiskPressure"),
            condition("PIDPressure", False, "KubeletHasSufficientPID"),
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "kubeletVersion": "v1.36.3-sim",
            "kubeProxyVersion": "",
            "containerRuntimeVersion": "sim://1",
            "osImage": "nvcre-argo simulated GPU node",
            "kernelVersion": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }


class SimKubelet:
    def __init__(self, config: KubeletConfig) -> None:
        self.config = config
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=config.kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.connection_pool_maxsize = CONNECTIONS
        self.api = k8s.ApiClient(configuration)
        self.core = k8s.CoreV1Api(self.api)
        self.coordination = k8s.CoordinationV1Api(self.api)
        self.nodes = {node.name: node for node in config.nodes}
        self.runners: dict[str, PodRunner] = {}
        self.by_name: dict[tuple[str, str], PodRunner] = {}
        self.lock = threading.Lock()
        self.down: set[str] = set()
        self.marks: dict[str, list[tuple[str, dict[str, Any]]]] = collections.defaultdict(list)
        self.attempts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.checkpoints = CheckpointStore()
        self.next_ip = 0
        self.stopping = threading.Event()
        self._finishing: set[str] = set()
        # The bound pods of every JobSet, from the pod watch: where a rank's peers are (`player.group_nodes`),
        # read here rather than listed from the API server by every waiting rank twice a second.
        self.jobset_pods: dict[tuple[str, str], dict[str, BoundPod]] = collections.defaultdict(dict)

    # ----------------------------------------------------------------------------------------- nodes

    def register_nodes(self) -> None:
        for spec in self.nodes.values():
            manifest = node_manifest(spec, self.config.log_port)
            try:
                self.core.create_node(manifest)
            except ApiException as error:
                if error.status != 409:
                    raise
                self.core.replace_node(spec.name, {**manifest, "metadata": {**manifest["metadata"]}})
            self._set_ready(spec.name, ready=True)

    def _resources(self, name: str) -> dict[str, str]:
        spec = self.nodes[name]
        return {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods), "nvidia.com/gpu": str(spec.gpus)}

    def _set_ready(self, name: str, *, ready: bool) -> None:
        status = node_status(self._resources(name), self.config.log_port, ready=ready)
        self.core.patch_node_status(name, {"status": status})

    def heartbeat_forever(self) -> None:
        """Renew every live node's Lease each `heartbeat_seconds`, as each node's kubelet would, and say Ready
        again where the node lifecycle controller wrote Unknown.

        The renewals run in parallel: one after another, a thousand of them on a loaded API server took longer
        than the controller's grace period, so nodes went Unknown (and then unreachable-tainted: the step pods'
        node evicted its pods) while this process was alive."""
        passes = 0
        with ThreadPoolExecutor(HEARTBEAT_WORKERS, thread_name_prefix="lease") as pool:
            while not self.stopping.is_set():
                began = time.monotonic()
                try:
                    list(pool.map(self._renew_lease, [name for name in self.nodes if name not in self.down]))
                    if passes % READY_CHECK_EVERY == 0:
                        self._report_ready_again()
                    self._restore_finished_marks()
                except Exception:  # a kubelet's heartbeat outlives any one failed request
                    log.exception("heartbeat pass failed; the next one runs as usual")
                took = time.monotonic() - began
                if took > self.config.heartbeat_seconds:
                    log.warning("renewing %d leases took %.1fs", len(self.nodes), took)
                passes += 1
                self.stopping.wait(max(0.0, self.config.heartbeat_seconds - took))

    def _report_ready_again(self) -> None:
        """Write Ready=True on live nodes whose Ready the node lifecycle controller set to Unknown (their Lease
        was late), as a kubelet's next status update does; only that condition, so a simulated fault's
        condition stays."""
        try:
            response = self.core.list_node(_preload_content=False, _request_timeout=HEARTBEAT_REQUEST_TIMEOUT_S)
            listed = json.loads(response.data)["items"]
        except (ApiException, OSError, ValueError) as error:
            log.warning("listing the nodes to check Ready: %s", error)
            return
        for node in listed:
            name = node["metadata"]["name"]
            ready = [item for item in node["status"].get("conditions") or [] if item["type"] == "Ready"]
            if name not in self.nodes or name in self.down or (ready and ready[0]["status"] == "True"):
                continue
            log.warning("node %s: Ready was %s; reporting it Ready again", name, ready[0]["status"] if ready else "-")
            conditions = node_status({}, self.config.log_port, ready=True)["conditions"]
            condition = next(item for item in conditions if item["type"] == "Ready")
            try:
                self.core.patch_node_status(name, {"status": {"conditions": [condition]}})
            except ApiException as error:
                log.warning("node %s: cannot report it Ready: %s", name, error.reason)

    def _renew_lease(self, name: str) -> None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _micro_now()},
        }
        try:
            self.coordination.patch_namespaced_lease(
                name, LEASE_NAMESPACE, {"spec": body["spec"]}, _request_timeout=HEARTBEAT_REQUEST_TIMEOUT_S
            )
        except ApiException as error:
            if error.status != 404:
                log.warning("lease of %s: %s", name, error.reason)
                return
            try:
                self.coordination.create_namespaced_lease(
                    LEASE_NAMESPACE, body, _request_timeout=HEARTBEAT_REQUEST_TIMEOUT_S
                )
            except ApiException as create_error:
                log.warning("cannot create the lease of %s: %s", name, create_error.reason)

    # ----------------------------------------------------------------------------------------- node marks

    def mark(self, node: str, namespace: str, change: Mapping[str, Any]) -> None:
        """Apply a workload's effect on its node: add a taint or condition, or stop being Ready."""
        log.info("node %s: %s (fault plan of %s)", node, dict(change), namespace)
        with self.lock:
            self.marks[namespace].append((node, dict(change)))
        if "taint" in change:
            current = self.core.read_node(node).spec.taints or []
            taints = [self.api.sanitize_for_serialization(taint) for taint in current] + [change["taint"]]
            self.core.patch_node(node, {"spec": {"taints": taints}})
        elif "condition" in change:
            now = now_rfc3339()
            item = {
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
                "reason": "SimulatedFault",
                **change["condition"],
            }
            self.core.patch_node_status(node, {"status": {"conditions": [item]}})
        elif change.get("cordon"):
            self.core.patch_node(node, {"spec": {"unschedulable": True}})
        elif change.get("not_ready"):
            self.down.add(node)
            self._set_ready(node, ready=False)

    def _restore_finished_marks(self) -> None:
        with self.lock:
            namespaces = list(self.marks)
        for namespace in namespaces:
            try:
                found = self.core.read_namespace(namespace)
                if found.status.phase != "Terminating":
                    continue
            except ApiException as error:
                if error.status != 404:
                    continue
            with self.lock:
                marks = self.marks.pop(namespace, [])
            for node, change in marks:
                try:
                    self._undo(node, change)
                except ApiException as error:  # a conflicting write: undo it on the next heartbeat
                    log.warning("node %s: cannot undo %s yet: %s", node, change, error.reason)
                    with self.lock:
                        self.marks[namespace].append((node, change))

    def _undo(self, node: str, change: Mapping[str, Any]) -> None:
        log.info("node %s: undoing %s", node, dict(change))
        if "taint" in change:
            current = [self.api.sanitize_for_serialization(t) for t in self.core.read_node(node).spec.taints or []]
            kept = [t for t in current if t.get("key") != change["taint"]["key"]]
            self.core.patch_node(node, {"spec": {"taints": kept or None}})
        elif change.get("cordon"):
            self.core.patch_node(node, {"spec": {"unschedulable": None}})
        elif "condition" in change or change.get("not_ready"):
            self.down.discard(node)
            self._set_ready(node, ready=True)  # rewrites every condition, dropping the simulated one
            self._renew_lease(node)

    # ----------------------------------------------------------------------------------------- pods

    def watch_pods_forever(self) -> None:
        resource_version = ""
        while not self.stopping.is_set():
            try:
                if not resource_version:
                    listing = self.core.list_pod_for_all_namespaces()
                    for pod in listing.items:
                        self.on_pod("ADDED", self.api.sanitize_for_serialization(pod))
                    resource_version = listing.metadata.resource_version
                stream = k8s_watch.Watch().stream(
                    self.core.list_pod_for_all_namespaces,
                    resource_version=resource_version,
                    timeout_seconds=WATCH_TIMEOUT_SECONDS,
                    allow_watch_bookmarks=True,
                )
                for event in stream:
                    obj = event["raw_object"]
                    resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.on_pod(event["type"], obj)
                    if self.stopping.is_set():
                        return
            except ApiException as error:
                if error.status == 410:
                    resource_version = ""
                else:
                    log.warning("pod watch: %s; retrying", error.reason)
                    time.sleep(1)
            except Exception:  # a dropped connection: resume from the last version seen
                log.exception("pod watch failed; retrying")
                time.sleep(1)

    def on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        spec, metadata = pod.get("spec", {}), pod["metadata"]
        if spec.get("nodeName") not in self.nodes:
            return
        self._index_bound(kind, pod)
        uid = metadata["uid"]
        runner = self.runners.get(uid)
        if kind == "DELETED":
            if runner is not None:
                runner.request_stop(0)
            return
        if metadata.get("deletionTimestamp"):
            if runner is not None:
                grace = metadata.get("deletionGracePeriodSeconds")
                runner.request_stop(None if grace is None else float(grace))
            self._finish_deletion(pod, runner)
            return
        if runner is None and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            self._start(pod)

    def _index_bound(self, kind: str, pod: Mapping[str, Any]) -> None:
        metadata = pod["metadata"]
        labels = metadata.get("labels") or {}
        jobset = labels.get(JOBSET_LABEL)
        if not jobset:
            return
        with self.lock:
            pods = self.jobset_pods[(metadata["namespace"], jobset)]
            if kind == "DELETED":
                pods.pop(metadata["name"], None)
                if not pods:
                    del self.jobset_pods[(metadata["namespace"], jobset)]
            else:
                pods[metadata["name"]] = BoundPod(node=pod["spec"]["nodeName"], labels=dict(labels))

    def bound_pods(self, namespace: str, jobset: str) -> list[BoundPod]:
        """The pods of a JobSet bound to a node, as the pod watch last saw them."""
        with self.lock:
            return list(self.jobset_pods.get((namespace, jobset), {}).values())

    def _start(self, pod: dict[str, Any]) -> None:
        with self.lock:
            ip = podspec.pod_ip(self.next_ip)
            self.next_ip += 1
        play: Callable[[PodRunner], None] | None = (
            None if podspec.runs_for_real(pod, self.config.images) else self._play
        )
        runner = PodRunner(pod=pod, config=self.config, core=self.core, pod_ip=ip, play=play)
        self.runners[runner.uid] = runner
        self.by_name[(runner.namespace, runner.name_)] = runner
        runner.start()

    def _play(self, runner: PodRunner) -> None:
        play_workload(runner, plan_text=self._fault_plan(runner.namespace), kubelet=self, checkpoints=self.checkpoints)

    def next_attempt(self, namespace: str, node: str) -> int:
        """How many workloads this node already ran for this namespace (for faults that pass on a retry);
        counts this one. MPI launchers do not count: they are not ranks."""
        with self.lock:
            attempt = self.attempts[(namespace, node)]
            self.attempts[(namespace, node)] += 1
            return attempt

    def attempts_so_far(self, namespace: str, node: str) -> int:
        with self.lock:
            return self.attempts[(namespace, node)]

    def _fault_plan(self, namespace: str) -> str:
        try:
            found = self.core.read_namespaced_config_map(FAULT_PLAN_CONFIGMAP, namespace)
        except ApiException as error:
            if error.status == 404:
                return ""
            raise
        return str((found.data or {}).get(FAULT_PLAN_KEY, ""))

    def _finish_deletion(self, pod: dict[str, Any], runner: PodRunner | None) -> None:
        """Remove the pod object (grace 0) once its containers have stopped, as the kubelet does."""
        uid = pod["metadata"]["uid"]

        def finish() -> None:
            if runner is not None:
                runner.done.wait()
            try:
                self.core.delete_namespaced_pod(
                    pod["metadata"]["name"],
                    pod["metadata"]["namespace"],
                    grace_period_seconds=0,
                    body=k8s.V1DeleteOptions(grace_period_seconds=0, preconditions=k8s.V1Preconditions(uid=uid)),
                )
            except ApiException as error:
                if error.status not in (404, 409):
                    log.warning("cannot finish deleting pod %s: %s", pod["metadata"]["name"], error.reason)

        if uid in self._finishing:
            return
        self._finishing.add(uid)
        threading.Thread(target=finish, name=f"delete-{uid}", daemon=True).start()

    # ----------------------------------------------------------------------------------------- logs

    def log_file(self, namespace: str, pod: str, container: str) -> tuple[Path, Callable[[], bool]] | None:
        runner = self.by_name.get((namespace, pod))
        if runner is None or runner.logs_refused:
            return None
        run = runner.container(container)
        if run is None:
            return None
        return run.log_path, lambda: not run.finished and not runner.done.is_set()

    # ----------------------------------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        """Stop every container now (SIGKILL): the cluster is going away with this process."""
        self.stopping.set()
        for runner in list(self.runners.values()):
            runner.request_stop(0)
        for runner in list(self.runners.values()):
            runner.done.wait(timeout=5)

    def run(self) -> None:
        self.register_nodes()
        serve_logs(self.config.log_port, self.config.log_cert, self.config.log_key, self.log_file)
        serve_api_relay(api_socket_path(self.config), self.config.apiserver_port)
        threading.Thread(target=self.heartbeat_forever, name="heartbeat", daemon=True).start()
        log.info("sim kubelet ready: %d nodes, logs on 127.0.0.1:%d", len(self.nodes), self.config.log_port)
        self.watch_pods_forever()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(message)s")
    kubelet = SimKubelet(KubeletConfig.read(Path(argv[1])))

    def on_term(signum: int, frame: object) -> None:
        del signum, frame
        kubelet.stop()
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    kubelet.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
