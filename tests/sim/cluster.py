"""The simulated GPU cluster: a real control plane and real controllers around fake GPU nodes.

Started once per test session (or by ``make demo``) and torn down with no process left behind:

    etcd + kube-apiserver (tests/harness/controlplane.py, ServiceAccount admission on)
    kube-controller-manager   Jobs, garbage collection, service accounts, node lifecycle, namespaces
    kube-scheduler            two profiles: default-scheduler and kai-scheduler (a stand-in for KAI's
                              queue-aware scheduler; it binds pods but has no gang semantics)
    JobSet, Kubeflow Trainer  their controllers and webhooks (webhooks are required: JobSet v0.12 panics
                              on a JobSet its defaulting webhook did not see)
    Argo workflow-controller  v3.7 or v4.0, out of cluster, watching every namespace
    sim kubelet               the fake GPU nodes; Argo's pods run as real processes, workloads are
                              played from a fault plan (tests/sim/kubelet.py)

No storage provisioner runs: a test that needs claims (checkpoints on shared storage) makes static volumes
with :meth:`SimCluster.create_shared_storage`, which the controller-manager's binder binds.

Every server binds 127.0.0.1; every node and pod address is in 127.0.0.0/8. One PKI (the control plane's CA
and its 127.0.0.1 serving pair) also serves the webhooks and the kubelet's log endpoint.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import fcntl
import os
import shutil
import socket
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import nvcre_argo
from tests.harness.controlplane import (
    Component,
    ControlPlane,
    ControlPlaneError,
    free_port,
    log_tail,
    spawn,
    stderr_progress,
)
from tests.harness.crds import crd_files, install_crds
from tests.harness.versions import REPO_ROOT, BinaryDirs, binary_dirs, load_versions, module_dir
from tests.sim.config import ImageSpec, KubeletConfig, NodeSpec
from tests.sim.listeners import Listener, group_members, listeners
from tests.sim.storage import DEFAULT_CAPACITY, SHARED_STORAGE_CLASS, create_shared_storage

ARGO_NAMESPACE = "argo"
STEP_IMAGE_PREFIX = "nvcre-argo:"
START_TIMEOUT_S = 180.0
# Per node, on top of START_TIMEOUT_S, for the nodes to be registered, Ready and untainted.
NODE_START_S = 0.1
# Taints the API server and the node lifecycle controller put on a node that is not (yet) Ready.
NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
# One simulated cluster per machine at a time (see SimCluster._hold_machine_lock).
MACHINE_LOCK = Path.home() / ".cache" / "nvcre-argo" / "sim-cluster.lock"
POLL_S = 0.5
HOST_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc")
JOBSET_WEBHOOKS = "config/components/webhook"
TRAINER_WEBHOOKS = "manifests/base/webhook/manifests.yaml"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ArgoRelease:
    """Which Argo Workflows the cluster runs: the v3.7 or the v4.0 line (both pinned in versions.env)."""

    major: str  # "v3" | "v4"

    def version(self, pinned: dict[str, str]) -> str:
        return pinned[f"ARGO_{self.major.upper()}_VERSION"]

    def module(self, pinned: dict[str, str]) -> str:
        return pinned[f"ARGO_{self.major.upper()}_MODULE"]

    def executor_image(self, pinned: dict[str, str]) -> str:
        return f"argoexec:{self.version(pinned)}"


def system_nodes(count: int, *, prefix: str = "system-node") -> list[NodeSpec]:
    """``count`` nodes without GPUs, where the orchestration (step) pods run: compiled Workflows keep their step
    pods off the nodes under test, as on a real cluster with a system node pool."""
    return [
        NodeSpec(
            name=f"{prefix}-{index}",
            labels={"node-role.kubernetes.io/system": ""},
            gpus=0,
            provider_id=f"sim://{prefix}-{index}",
        )
        for index in range(1, count + 1)
    ]


def _venv_bind() -> list[tuple[str, str]]:
    """The virtualenv the step image runs `nvcre-argo` from, bound at its own path when it is not inside the
    repository already (a git worktree using another checkout's venv), so the step pods find it."""
    venv = Path(sys.prefix).resolve()
    return [] if venv.is_relative_to(REPO_ROOT.resolve()) else [(str(venv), str(venv))]


def gpu_nodes(count: int, *, per_clique: int = 4, gpus: int = 8, prefix: str = "gpu-node") -> list[NodeSpec]:
    """``count`` DGX-like nodes with the labels GPU Feature Discovery would set, in NVLink cliques."""
    nodes = []
    for index in range(1, count + 1):
        clique = (index - 1) // per_clique
        nodes.append(
            NodeSpec(
                name=f"{prefix}-{index}",
                labels={
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "nvidia.com/gpu.count": str(gpus),
                    "nvidia.com/gpu.family": "hopper",
                    "nvidia.com/gpu.clique": f"sim-cluster.{clique}",
                    "topology.kubernetes.io/zone": "sim-zone-a",
                    "sim.nvcre.nvidia.com/rack": f"rack-{clique}",
                },
                gpus=gpus,
                provider_id=f"sim://{prefix}-{index}",
            )
        )
    return nodes


def _controller_kubeconfig(plane: ControlPlane, path: Path, namespace: str) -> Path:
    """The admin kubeconfig with a default namespace (Argo's controller reads its ConfigMap from there)."""
    config = yaml.safe_load(plane.kubeconfig.read_text(encoding="utf-8"))
    config["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    path.chmod(0o600)
    return path


# From this many nodes on, the cluster is started as large clusters are tuned (`controller_manager_qps`,
# `node_heartbeat`); below it every component keeps its defaults.
LARGE_CLUSTER_NODES = 600
# From this many nodes on, the sim kubelet's Lease passes outlast even the large clusters' grace (`node_heartbeat`).
HUGE_CLUSTER_NODES = 2000


def controller_manager_qps(node_count: int) -> tuple[int, int]:
    """The kube-controller-manager's API client rate (QPS, burst): its defaults (20, 30) for a small cluster,
    then one request a second per 20 nodes, as large clusters raise it. All its controllers share one client here
    (no per-controller service accounts), and at 4,096 nodes the node lifecycle controller, taking the
    `not-ready` taint the API server put on each new node off again, got about 5 nodes a second out of it: the
    system node, where every step pod runs, stayed unschedulable for minutes."""
    if node_count < LARGE_CLUSTER_NODES:
        return 20, 30
    qps = node_count // 20
    return qps, 2 * qps


def scheduler_qps(node_count: int) -> tuple[int, int]:
    """The kube-scheduler's API client rate (QPS, burst): its defaults (50, 100), raised like the controller
    manager's on a large cluster. It binds every pod with a request of its own: at its default 50 a second, a
    wave of 512 eight-node groups took 82 s just to be bound, and a group's first rank ran long before its last
    was placed."""
    qps = max(50, controller_manager_qps(node_count)[0])
    return qps, 2 * qps


class NodeHeartbeat(NamedTuple):
    renew_seconds: float  # how often the sim kubelet renews every node's Lease
    grace_seconds: int | None  # the node lifecycle controller's grace period for a late one; None: its default, 50 s


def node_heartbeat(node_count: int) -> NodeHeartbeat:
    """How often the sim kubelet renews the nodes' Leases, and how long a late one is forgiven.

    One process plays every node's kubelet here. At 4,096 nodes, renewing each Lease every 10 s as a kubelet
    does took that process 50-63 s a pass once 512 workloads ran (on 2 cores, with the API server), nodes
    went unreachable and 60 s workloads timed out: a large simulated cluster renews every 30 s and is given
    120 s before a node counts as lost. From `HUGE_CLUSTER_NODES` on that was still too short: with the API
    server above a core, passes took 40-90 s and up to 140 s, nodes (the system node among them) went
    unreachable three times in an 80-minute run, and each time the step pods were evicted 300 s later. There
    the Leases are renewed every 60 s, halving their share of the API server's load, and a node counts as
    lost after 300 s. A node a fault takes down is then noticed later too."""
    if node_count < LARGE_CLUSTER_NODES:
        return NodeHeartbeat(10.0, None)
    if node_count < HUGE_CLUSTER_NODES:
        return NodeHeartbeat(30.0, 120)
    return NodeHeartbeat(60.0, 300)


def schedulable(node: Any) -> bool:
    """Whether a Node (client object) is Ready and carries none of the not-ready taints."""
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    return ready and not any(taint.key in NOT_READY_TAINTS for taint in node.spec.taints or [])


def _wait(what: str, check: Callable[[], bool], components: Sequence[Component], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        for component in components:
            if component.exited():
                raise component.failure(f"exited while waiting for {what}")
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {c.name}:\n{log_tail(c.log_path, 15)}" for c in components)
            raise ControlPlaneError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{tails}")
        time.sleep(POLL_S)


def _tls_listening(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as raw, context.wrap_socket(raw):
            return True
    except OSError:
        return False


def _webhooks(manifests: list[dict[str, Any]], *, prefix: str, port: int, ca_bundle: str) -> Iterator[dict[str, Any]]:
    """Upstream webhook configurations pointed at a controller on 127.0.0.1 (``clientConfig.url``)."""
    for manifest in manifests:
        manifest["metadata"]["name"] = f"{prefix}-{manifest['metadata']['name']}"
        for hook in manifest["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        yield manifest


def _json_patch_replace(manifest: dict[str, Any], patches: list[dict[str, Any]]) -> None:
    """Apply kustomize's ``op: replace`` patches (the only kind the upstream webhook patches use)."""
    for patch in patches:
        if patch["op"] != "replace":
            raise ValueError(f"unexpected patch op {patch['op']!r}")
        *parents, last = patch["path"].strip("/").split("/")
        target: Any = manifest
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[int(last) if isinstance(target, list) else last] = patch["value"]


class SimCluster:
    """Start with :meth:`start` (or ``with``); everything stops, reaped, in :meth:`stop`."""

    def __init__(
        self,
        *,
        nodes: Sequence[NodeSpec],
        argo: ArgoRelease = ArgoRelease("v3"),
        binaries: BinaryDirs | None = None,
        progress: Progress = stderr_progress,
        keep_workdir: bool = False,
        system_node_count: int = 1,
        argo_config: Mapping[str, str] | None = None,
        audit: bool = False,  # an audit log of service accounts' requests (`plane.audit_log`), for benchmarks
        argo_requeue_seconds: float | None = None,
    ) -> None:
        self.gpu_node_count = len(nodes)
        self.nodes = list(nodes) + system_nodes(system_node_count)
        self.heartbeat = node_heartbeat(len(self.nodes))
        self.argo = argo
        # Extra keys of Argo's controller ConfigMap, e.g. `workflowRestrictions` for a hardened controller.
        self.argo_config = dict(argo_config or {})
        # How long Argo's controller waits before it operates on a Workflow again after one of its pods changed
        # (`DEFAULT_REQUEUE_TIME`); None keeps Argo's default, 10 s, which is what a user's cluster runs and what
        # the benchmarks measure. Each step of a Workflow waits for it once or twice, so tests that only check
        # behaviour take Argo's own test setting, 1 s.
        self.argo_requeue_seconds = argo_requeue_seconds
        self.binaries = binaries or binary_dirs()
        self.progress = progress
        self.pinned = load_versions()
        self.workdir = Path(tempfile.mkdtemp(prefix="nvcre-sim-"))
        self.plane = ControlPlane(
            self.binaries, self.workdir / "control-plane", progress=progress, service_accounts=True, audit=audit
        )
        self.components: dict[str, Component] = {}
        self.keep_workdir = keep_workdir
        self.timings: dict[str, float] = {}
        self._lock_file: IO[str] | None = None

    # ----------------------------------------------------------------------------------------- access

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def api_client(self) -> k8s.ApiClient:
        return self.plane.api_client()

    @property
    def executor_image(self) -> str:
        return self.argo.executor_image(self.pinned)

    # ----------------------------------------------------------------------------------------- lifecycle

    def start(self) -> SimCluster:
        missing = self.binaries.missing_for_simulation(self.argo.major)
        if missing:
            raise ControlPlaneError(f"missing binaries {', '.join(map(str, missing))}; build them with `make testbin`")
        atexit.register(self.stop)
        try:
            self._timed("the machine's simulated-cluster lock", self._hold_machine_lock)
            self._timed("control plane", self._start_control_plane)
            self._timed("kube-controller-manager and kube-scheduler", self._start_kube_controllers)
            self._timed("sim kubelet", self._start_kubelet)
            self._timed("JobSet", self._start_jobset)
            self._timed("Trainer", self._start_trainer)
            self._timed(f"Argo {self.argo.version(self.pinned)}", self._start_argo)
        except BaseException:
            self.keep_workdir = True
            self.stop()
            raise
        total = sum(self.timings.values())
        self.progress(
            f"simulated cluster ready in {total:.1f} s ({self.gpu_node_count} GPU nodes; logs in {self.workdir})"
        )
        return self

    def _timed(self, what: str, start: Callable[[], None]) -> None:
        began = time.monotonic()
        start()
        self.timings[what] = time.monotonic() - began
        self.progress(f"{what}: ready in {self.timings[what]:.1f} s")

    def _hold_machine_lock(self) -> None:
        """Wait until no other simulated cluster runs on this machine, then hold the lock until :meth:`stop`.

        Argo's controller serves its health endpoint on a fixed port and two clusters would share two cores,
        so a second test process (a demo next to a test run) queues here instead of failing halfway up."""
        MACHINE_LOCK.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = MACHINE_LOCK.open("a")
        fcntl.flock(self._lock_file, fcntl.LOCK_EX)

    def stop(self) -> None:
        """Stop every component (reverse start order) and the control plane; idempotent."""
        atexit.unregister(self.stop)
        for name in reversed(list(self.components)):
            self.components.pop(name).stop()
        self.plane.stop()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def listeners(self) -> list[Listener]:
        """Every TCP listener of the cluster's processes (and their children), as ``ss -ltnp`` would list."""
        pgids = [component.pid for component in self.components.values()] + list(self.plane.pids.values())
        return listeners(group_members(pgids))

    def create_shared_storage(
        self, *, volumes: int, capacity: str = DEFAULT_CAPACITY, storage_class: str = SHARED_STORAGE_CLASS
    ) -> list[str]:
        """A StorageClass without a provisioner and `volumes` static ReadWriteMany PersistentVolumes of
        `capacity` each, so a claim of that class is bound at once by the controller-manager (the cluster has
        no provisioner; see tests/sim/storage.py). Each volume serves one claim; the volumes' names."""
        with self.api_client() as api:
            return create_shared_storage(api, volumes=volumes, capacity=capacity, storage_class=storage_class)

    def restart_argo(self) -> None:
        """Kill Argo's controller (SIGKILL, no goodbye) and start a new one: a controller crash mid-run."""
        component = self.components.pop("workflow-controller")
        os.killpg(component.pid, 9)
        component.process.wait()
        component.log_file.close()
        self._start_argo()

    # ----------------------------------------------------------------------------------------- components

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Component:
        component = spawn(name, argv, self.workdir / f"{name}.log", env)
        self.components[name] = component
        return component

    def _start_control_plane(self) -> None:
        self.plane.start()
        with self.api_client() as api:
            install_crds(api, crd_files(argo_major=self.argo.major))

    def _start_kube_controllers(self) -> None:
        kubeconfig, pki = str(self.kubeconfig), self.plane.pki
        qps, burst = controller_manager_qps(len(self.nodes))
        scheduler_rate = scheduler_qps(len(self.nodes))
        grace = self.heartbeat.grace_seconds
        auth = [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
        ]
        kcm = self._spawn("kube-controller-manager", [
            str(self.binaries.k8s / "kube-controller-manager"), *auth, "--leader-elect=false",
            f"--secure-port={free_port()}", f"--service-account-private-key-file={pki.sa_private_key}",
            f"--root-ca-file={pki.ca_cert}", "--controllers=*", "--use-service-account-credentials=false",
            f"--kube-api-qps={qps}", f"--kube-api-burst={burst}",
            *([f"--node-monitor-grace-period={grace}s"] if grace is not None else []),
        ])  # fmt: skip
        scheduler_config = self.workdir / "scheduler.yaml"
        scheduler_config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig, "qps": scheduler_rate[0], "burst": scheduler_rate[1]},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": "default-scheduler"}, {"schedulerName": "kai-scheduler"}],
        }), encoding="utf-8")  # fmt: skip
        scheduler = self._spawn("kube-scheduler", [
            str(self.binaries.k8s / "kube-scheduler"), f"--config={scheduler_config}", *auth[1:],
            f"--secure-port={free_port()}",
        ])  # fmt: skip
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            _wait("the default service account", lambda: _exists(lambda: core.read_namespaced_service_account(
                "default", "default")), [kcm, scheduler], START_TIMEOUT_S)  # fmt: skip
            core.create_namespace({"metadata": {"name": ARGO_NAMESPACE}})

    def _start_kubelet(self) -> None:
        pki = self.plane.pki
        step_image = f"{STEP_IMAGE_PREFIX}{_package_version()}"
        venv_bin = str(Path(sys.executable).parent)
        config = KubeletConfig(
            kubeconfig=str(self.kubeconfig),
            workdir=str(self.workdir / "kubelet"),
            apiserver_port=self.plane.port,
            log_port=free_port(),
            log_cert=str(pki.serving_cert),
            log_key=str(pki.serving_key),
            nodes=self.nodes,
            images={
                self.executor_image: ImageSpec(
                    binds=[(str(self.binaries.argo_dir(self.argo.major)), "/argo-bin")],
                    path="/argo-bin:/usr/bin:/bin",
                    entrypoint=["argoexec"],
                ),
                step_image: ImageSpec(
                    binds=[(str(REPO_ROOT), str(REPO_ROOT)), (sys.base_prefix, sys.base_prefix), *_venv_bind()],
                    path=f"{venv_bin}:/usr/bin:/bin",
                    entrypoint=["nvcre-argo"],
                    # The step image holds the code under test: the venv's editable install points at the checkout
                    # it was installed from, which need not be this one (a git worktree sharing the venv).
                    env={"PYTHONPATH": str(REPO_ROOT)},
                ),
            },
            host_binds=[(path, path) for path in HOST_SYSTEM_DIRS if Path(path).exists()],
            sandbox_python=sys.executable,
            heartbeat_seconds=self.heartbeat.renew_seconds,
        )
        Path(config.workdir).mkdir(parents=True)
        config_path = config.write(self.workdir / "kubelet.json")
        kubelet = self._spawn("sim-kubelet", [sys.executable, "-m", "tests.sim.kubelet", str(config_path)],
                              env={"PYTHONPATH": str(REPO_ROOT)})  # fmt: skip
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            names = {node.name for node in self.nodes}

            def all_schedulable() -> bool:
                return names <= {node.metadata.name for node in core.list_node().items if schedulable(node)}

            # Ready is not enough: a new node keeps the API server's `not-ready` taint until the node lifecycle
            # controller takes it off, and a pod created before then waits (on a real cluster the nodes are
            # long past that when a certification starts).
            timeout = START_TIMEOUT_S + NODE_START_S * len(names)
            watched = [kubelet, self.components["kube-controller-manager"]]
            _wait(f"{len(names)} nodes Ready and untainted", all_schedulable, watched, timeout)

    def _serving_pair(self, name: str) -> Path:
        directory = self.workdir / name / "certs"
        directory.mkdir(parents=True)
        shutil.copy(self.plane.pki.serving_cert, directory / "tls.crt")
        shutil.copy(self.plane.pki.serving_key, directory / "tls.key")
        return directory

    def _ca_bundle(self) -> str:
        return base64.b64encode(self.plane.pki.ca_cert.read_bytes()).decode()

    def _register_webhooks(self, manifests: Iterator[dict[str, Any]]) -> None:
        with self.api_client() as api:
            admission = k8s.AdmissionregistrationV1Api(api)
            for manifest in manifests:
                if manifest["kind"] == "MutatingWebhookConfiguration":
                    admission.create_mutating_webhook_configuration(manifest)
                else:
                    admission.create_validating_webhook_configuration(manifest)

    def _start_jobset(self) -> None:
        port, health = free_port(), free_port()
        certs = self._serving_pair("jobset")
        config = self.workdir / "jobset" / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        }), encoding="utf-8")  # fmt: skip
        component = self._spawn("jobset", [
            str(self.binaries.jobset / "jobset"), f"--kubeconfig={self.kubeconfig}", f"--config={config}",
            "--metrics-bind-address=0", f"--health-probe-bind-address=127.0.0.1:{health}",
        ])  # fmt: skip
        _wait("JobSet's webhook", lambda: _tls_listening(port), [component], START_TIMEOUT_S)
        base = module_dir(self.pinned["JOBSET_MODULE"], self.pinned["JOBSET_VERSION"]) / JOBSET_WEBHOOKS
        manifests = list(yaml.safe_load_all((base / "manifests.yaml").read_text(encoding="utf-8")))
        manifests = [m for m in manifests if m]
        for manifest, patch in zip(manifests, ("mutating-patch.yaml", "validating-patch.yaml"), strict=True):
            _json_patch_replace(manifest, yaml.safe_load((base / "patches" / patch).read_text(encoding="utf-8")))
        self._register_webhooks(_webhooks(manifests, prefix="jobset", port=port, ca_bundle=self._ca_bundle()))

    def _start_trainer(self) -> None:
        port, health = free_port(), free_port()
        certs = self._serving_pair("trainer")
        tmp = certs.parent / "tmp" / "k8s-webhook-server"
        tmp.mkdir(parents=True)
        shutil.copytree(certs, tmp / "serving-certs")
        config = self.workdir / "trainer" / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": port},
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
        }), encoding="utf-8")  # fmt: skip
        component = self._spawn("trainer", [
            str(self.binaries.trainer / "trainer-controller-manager"), f"--kubeconfig={self.kubeconfig}",
            f"--config={config}", "--feature-gates=TrainJobStatus=false",
        ], env={"TMPDIR": str(certs.parent / "tmp")})  # fmt: skip
        _wait("Trainer's webhook", lambda: _tls_listening(port), [component], START_TIMEOUT_S)
        path = module_dir(self.pinned["TRAINER_MODULE"], self.pinned["TRAINER_VERSION"]) / TRAINER_WEBHOOKS
        manifests = [m for m in yaml.safe_load_all(path.read_text(encoding="utf-8")) if m]
        self._register_webhooks(_webhooks(manifests, prefix="trainer", port=port, ca_bundle=self._ca_bundle()))

    def _start_argo(self) -> None:
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            with contextlib.suppress(ApiException):
                core.create_namespaced_config_map(ARGO_NAMESPACE, {
                    "metadata": {"name": "workflow-controller-configmap"},
                    "data": {
                        "metricsConfig": "enabled: false\n", "telemetryConfig": "enabled: false\n", **self.argo_config,
                    },
                })  # fmt: skip
        kubeconfig = _controller_kubeconfig(self.plane, self.workdir / "argo-kubeconfig", ARGO_NAMESPACE)
        component = self._spawn("workflow-controller", [
            str(self.binaries.argo_dir(self.argo.major) / "workflow-controller"), f"--kubeconfig={kubeconfig}",
            f"--namespace={ARGO_NAMESPACE}", f"--executor-image={self.executor_image}",
            "--configmap=workflow-controller-configmap", "--loglevel=info",
        ], env={"LEADER_ELECTION_DISABLE": "true", **self._argo_requeue_env()})  # fmt: skip
        _wait("Argo's controller", lambda: _http_ok("http://127.0.0.1:6060/healthz"), [component], START_TIMEOUT_S)

    def _argo_requeue_env(self) -> dict[str, str]:
        if self.argo_requeue_seconds is None:
            return {}
        return {"DEFAULT_REQUEUE_TIME": f"{self.argo_requeue_seconds:g}s"}


def _exists(read: Callable[[], object]) -> bool:
    try:
        read()
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def _http_ok(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _package_version() -> str:
    return nvcre_argo.__version__
