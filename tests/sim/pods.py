"""One pod on a simulated node, from binding to deletion, reported to the API server as a kubelet does.

Two kinds of pods, one lifecycle:
- **Argo's pods really run**: each container is a local process (``tests/sim/sandbox.py``: own mount
  namespace, the pod's volumes, user and read-only root), init containers one after another, then the others
  together. This is the point of the rig: Argo trusts its ``wait`` container and ``argoexec``, so a pod that
  only changed phase would make Argo believe steps that never ran.
- **Workload pods are played** from the fault plan (``tests/sim/workload.py`` decides; this module executes):
  logs in the real tools' formats, exit codes, hangs, node health signals.

Both report status the way the kubelet does (phase, conditions, init and container statuses with exit codes
and termination messages), honour ``activeDeadlineSeconds`` and the deletion grace period, and finish a
deletion by removing the object with grace 0 once every container has stopped.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.sim import podspec
from tests.sim.config import ImageSpec, KubeletConfig
from tests.sim.volumes import materialise

log = logging.getLogger(__name__)

SANDBOX = Path(__file__).resolve().parent / "sandbox.py"
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_MESSAGE_MAX = 4096
FALLBACK_LOG_LINES = 80
EXIT_SIGTERM, EXIT_SIGKILL = 143, 137
EXIT_CONFIG_ERROR = 128
POLL_SECONDS = 0.2
RESTART_BACKOFF_S, RESTART_BACKOFF_MAX_S = 10.0, 300.0
MOUNT_RETRY_SECONDS = 0.5


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeMarker(Protocol):
    """What a workload script may do to its node (a health signal, a NotReady kubelet)."""

    def mark(self, node: str, namespace: str, change: Mapping[str, Any]) -> None: ...


@dataclass
class ContainerRun:
    """One container's state as this kubelet knows it."""

    spec: dict[str, Any]
    log_path: Path
    state: dict[str, Any] = field(default_factory=lambda: podspec.waiting("PodInitializing"))
    process: subprocess.Popen[bytes] | None = None
    started_at: str = ""
    ready: bool = False
    restart_count: int = 0
    last_state: dict[str, Any] = field(default_factory=dict)
    restart_at: float | None = None
    # The process group the kubelet signals: the container's own (see `_container_group`).
    group: int = 0

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def finished(self) -> bool:
        return "terminated" in self.state

    @property
    def exit_code(self) -> int | None:
        terminated = self.state.get("terminated")
        return None if terminated is None else int(terminated["exitCode"])


class PodRunner(threading.Thread):
    """Runs one pod to its end in a thread; :meth:`request_stop` starts a graceful stop (pod deletion)."""

    def __init__(
        self,
        *,
        pod: dict[str, Any],
        config: KubeletConfig,
        core: k8s.CoreV1Api,
        pod_ip: str,
        play: Callable[[PodRunner], None] | None,
    ) -> None:
        metadata = pod["metadata"]
        super().__init__(name=f"pod-{metadata['namespace']}/{metadata['name']}", daemon=True)
        self.pod = pod
        self.config = config
        self.core = core
        self.pod_ip = pod_ip
        self._play = play
        self.directory = Path(config.workdir) / "pods" / metadata["uid"]
        self.logs = self.directory / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        spec = pod["spec"]
        self.init_containers = [
            ContainerRun(c, self.logs / f"{c['name']}.log") for c in spec.get("initContainers") or []
        ]
        self.containers = [ContainerRun(c, self.logs / f"{c['name']}.log") for c in spec.get("containers") or []]
        self.phase = "Pending"
        self.reason = ""
        self.message = ""
        self.started_at = now_rfc3339()
        self.started_monotonic = time.monotonic()
        self.stopping = threading.Event()
        self.grace_seconds = float(spec.get("terminationGracePeriodSeconds", 30))
        self.done = threading.Event()
        self._status_lock = threading.Lock()
        self.ready_override: bool | None = None
        self.pause: subprocess.Popen[bytes] | None = None
        self.logs_refused = False  # the fault plan's logsReadable: false

    # ----------------------------------------------------------------------------------------- identity

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def name_(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])

    @property
    def node(self) -> str:
        return str(self.pod["spec"]["nodeName"])

    def container(self, name: str) -> ContainerRun | None:
        for run in self.init_containers + self.containers:
            if run.name == name:
                return run
        return None

    # ----------------------------------------------------------------------------------------- status

    def publish(self) -> None:
        """PATCH the pod's status with everything known now (full lists: each patch is self-contained)."""
        with self._status_lock:
            now = now_rfc3339()
            inits_done = all(run.exit_code == 0 for run in self.init_containers)
            all_ready = bool(self.containers) and all(run.ready and not run.finished for run in self.containers)
            ready = all_ready if self.ready_override is None else self.ready_override and not self.finished
            status: dict[str, Any] = {
                "phase": self.phase,
                "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}],
                "podIP": self.pod_ip,
                "podIPs": [{"ip": self.pod_ip}],
                "startTime": self.started_at,
                "qosClass": self.pod.get("status", {}).get("qosClass", "BestEffort"),
                "conditions": [
                    podspec.condition("PodReadyToStartContainers", True, now),
                    podspec.condition("Initialized", inits_done, now),
                    podspec.condition("ContainersReady", ready, now),
                    podspec.condition("Ready", ready, now),
                    podspec.condition("PodScheduled", True, now),
                ],
                "initContainerStatuses": [self._status_of(run) for run in self.init_containers],
                "containerStatuses": [self._status_of(run) for run in self.containers],
            }
            if self.reason:
                status["reason"] = self.reason
            if self.message:
                status["message"] = self.message
            try:
                self.core.patch_namespaced_pod_status(self.name_, self.namespace, {"status": status})
            except ApiException as error:
                if error.status != 404:
                    log.warning("cannot update the status of pod %s/%s: %s", self.namespace, self.name_, error.reason)

    def _status_of(self, run: ContainerRun) -> dict[str, Any]:
        return podspec.container_status(
            run.spec, run.state, ready=run.ready, container_id=f"sim://{self.uid}/{run.name}"
        )

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    # ----------------------------------------------------------------------------------------- lifecycle

    def run(self) -> None:
        try:
            self.publish()
            if self._play is not None:
                self._play(self)
            else:
                self._run_processes()
        except Exception as error:  # a kubelet never dies with its pod: report and fail the pod
            log.exception("pod %s/%s failed in the sim kubelet", self.namespace, self.name_)
            self.fail_pod("SimKubeletError", str(error))
        finally:
            self.done.set()

    def fail_pod(self, reason: str, message: str) -> None:
        for run in self.init_containers + self.containers:
            if not run.finished:
                run.state = (
                    podspec.waiting(reason, message) if not run.started_at else self._terminated(run, 1, message)
                )
        self.phase, self.reason, self.message = "Failed", reason, message
        self.publish()

    def request_stop(self, grace_seconds: float | None) -> None:
        """The pod was deleted: stop its containers within the grace period (default: the pod's own)."""
        if grace_seconds is not None:
            self.grace_seconds = grace_seconds
        self.stopping.set()

    def deadline_exceeded(self) -> bool:
        deadline = self.pod["spec"].get("activeDeadlineSeconds")
        return deadline is not None and time.monotonic() - self.started_monotonic > float(deadline)

    def finish(self) -> None:
        """Every container has stopped: the pod's phase follows from their exit codes (restartPolicy Never)."""
        if self.deadline_exceeded() and not self.finished:
            self.phase, self.reason = "Failed", "DeadlineExceeded"
            self.message = "Pod was active on the node longer than the specified deadline"
        elif not self.finished:
            codes = [run.exit_code for run in self.init_containers + self.containers if run.started_at]
            self.phase = "Succeeded" if codes and all(code == 0 for code in codes) else "Failed"
        for run in self.containers:
            run.ready = False
        self.publish()

    # ----------------------------------------------------------------------------------------- processes

    def _run_processes(self) -> None:
        try:
            if not self._mount_volumes():
                self.finish()
                return
            self._start_pod_network()
        except (podspec.ContainerConfigError, ApiException, OSError) as error:
            self.fail_pod("CreateContainerConfigError", str(error))
            return
        try:
            self._run_containers()
        finally:
            self._stop_pod_network()

    def _start_pod_network(self) -> None:
        """The pause process: holds the pod's network, UTS and PID namespaces and relays its API traffic
        (sandbox.py). Its child is PID 1 of the pod, so the containers' processes see only their pod's."""
        self.pause = subprocess.Popen(
            ["unshare", "--net", "--uts", "--pid", "--fork", "--", self.config.sandbox_python, str(SANDBOX), "network",
             str(self.config.apiserver_port), str(api_socket_path(self.config)), self.name_],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        assert self.pause.stdout is not None
        if self.pause.stdout.readline().strip() != b"ready":
            raise OSError(f"the pod network of {self.namespace}/{self.name_} did not start")

    def _stop_pod_network(self) -> None:
        if self.pause is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pause.pid, signal.SIGKILL)
            self.pause.wait()
            if self.pause.stdout is not None:
                self.pause.stdout.close()

    def _run_containers(self) -> None:
        for run in self.init_containers:
            self._start(run)
            self.publish()
            self._wait([run])
            if run.exit_code != 0:
                self.finish()
                return
        for run in self.containers:
            self._start(run)
        self.phase = "Running"
        self.publish()
        self._wait(self.containers)
        self.finish()

    def _mount_volumes(self) -> bool:
        """Materialise the pod's volumes, retrying while an object they name does not exist yet, as the
        kubelet does (its pod stays Pending with ``FailedMount`` events). A fresh namespace's
        ``kube-root-ca.crt``, which every service-account volume projects, is published by the controller
        manager moments after the namespace; failing the pod for that would be a sim-only failure.

        False when the pod was deleted or ran out of ``activeDeadlineSeconds`` while waiting."""
        while True:
            try:
                for volume in self.pod["spec"].get("volumes") or []:
                    materialise(self.core, self.pod, volume, self.volume_dir(volume["name"]))
                return True
            except ApiException as error:
                if error.status != 404:
                    raise
                log.info("pod %s/%s waits for a volume's object: %s", self.namespace, self.name_, error.reason)
            if self.stopping.wait(MOUNT_RETRY_SECONDS) or self.deadline_exceeded():
                return False

    def volume_dir(self, name: str) -> Path:
        return self.directory / "volumes" / name

    def _image(self, run: ContainerRun) -> ImageSpec:
        image = str(run.spec.get("image", ""))
        found = self.config.images.get(image)
        if found is None:
            raise podspec.ContainerConfigError(f"image {image!r} is not mapped to a program in the sim kubelet")
        return found

    def _start(self, run: ContainerRun) -> None:
        run.started_at = now_rfc3339()
        try:
            spec_path = self._write_sandbox_spec(run)
        except podspec.ContainerConfigError as error:
            run.state = self._terminated(run, EXIT_CONFIG_ERROR, str(error))
            return
        log_file = run.log_path.open("ab")
        try:
            assert self.pause is not None, "the pod network starts before its containers"
            run.process = subprocess.Popen(
                [
                    "nsenter",
                    f"--net=/proc/{self.pause.pid}/ns/net",
                    f"--uts=/proc/{self.pause.pid}/ns/uts",
                    # The pod's own PID namespace, as on a real node: a process that signals every process it
                    # may (kill -1) reaches its own pod only, never another pod's.
                    f"--pid=/proc/{self.pause.pid}/ns/pid_for_children",
                    "--",
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "--",
                    self.config.sandbox_python,
                    str(SANDBOX),
                    "container",
                    str(spec_path),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            )
        finally:
            log_file.close()
        run.group = _container_group(run.process.pid)
        run.state = podspec.running(run.started_at)
        run.ready = True

    def _write_sandbox_spec(self, run: ContainerRun) -> Path:
        image = self._image(run)
        base = {
            **image.env,
            "PATH": image.path,
            "HOSTNAME": self.name_,
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.config.apiserver_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(self.config.apiserver_port),
        }
        env = podspec.container_env(self.pod, run.spec, base=base, lookup=self._lookup)
        argv = podspec.container_argv(run.spec, env, image.entrypoint)
        identity = podspec.container_identity(self.pod, run.spec)
        binds: list[tuple[str, str, bool]] = []
        for mount in run.spec.get("volumeMounts") or []:
            source = self.volume_dir(mount["name"]) / mount.get("subPath", "")
            if not source.exists():
                # The kubelet creates a missing subPath inside the volume; what the pod may write there follows
                # the volume (an emptyDir is writable by any of the pod's users, through fsGroup on a cluster).
                source.mkdir(parents=True)
                source.chmod(self.volume_dir(mount["name"]).stat().st_mode & 0o7777)
            binds.append((str(source), mount["mountPath"], bool(mount.get("readOnly"))))
        termination = self.directory / "termination" / run.name
        termination.parent.mkdir(parents=True, exist_ok=True)
        termination.touch()
        termination.chmod(0o666)
        binds.append((str(termination), run.spec.get("terminationMessagePath") or TERMINATION_LOG, False))
        spec = {
            "root": str(self.directory / "roots" / run.name),
            "host_binds": self.config.host_binds + image.binds,
            "volume_binds": binds,
            "readonly_root": identity.readonly_root,
            "uid": identity.uid,
            "gid": identity.gid,
            "groups": list(identity.groups),
            "workdir": run.spec.get("workingDir") or "/",
            "argv": argv,
            "env": env,
        }
        path = self.directory / "specs" / f"{run.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec), encoding="utf-8")
        path.chmod(0o600)  # it holds the container's environment
        return path

    def _lookup(self, kind: str, name: str, key: str) -> str | None:
        try:
            if kind == "configMap":
                data = self.core.read_namespaced_config_map(name, self.namespace).data or {}
                return data.get(key)
            secret = self.core.read_namespaced_secret(name, self.namespace).data or {}
            return base64.b64decode(secret[key]).decode() if key in secret else None
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def _wait(self, runs: list[ContainerRun]) -> None:
        """Wait for the processes; on deletion or deadline, TERM then KILL them after the grace period."""
        kill_at: float | None = None
        while True:
            for run in runs:
                if run.restart_at is not None and time.monotonic() >= run.restart_at and kill_at is None:
                    run.restart_at = None
                    self._start(run)
                    self.publish()
                if run.process is not None and not run.finished and run.process.poll() is not None:
                    for group in {run.process.pid, run.group or run.process.pid}:  # its processes end with it
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(group, signal.SIGKILL)
                    code = _exit_code(run.process.returncode)
                    run.process = None
                    run.state = self._terminated(run, code)
                    run.ready = False
                    if kill_at is None and self._restarts(run):
                        self._schedule_restart(run)
                    self.publish()
            if all(run.finished for run in runs):
                return
            if kill_at is None and (self.stopping.is_set() or self.deadline_exceeded()):
                for run in runs:
                    if run.restart_at is not None:  # a container waiting to restart stays stopped
                        run.restart_at, run.state, run.last_state = None, run.last_state, {}
                self._signal(runs, signal.SIGTERM)
                kill_at = time.monotonic() + (self.grace_seconds if self.stopping.is_set() else 0)
            if kill_at is not None and time.monotonic() >= kill_at:
                self._signal(runs, signal.SIGKILL)
            time.sleep(POLL_SECONDS)

    def _restarts(self, run: ContainerRun) -> bool:
        """Whether the pod's restartPolicy restarts this (regular) container after the exit it just had."""
        policy = self.pod["spec"].get("restartPolicy", "Always")
        if run in self.init_containers:
            return False
        return policy == "Always" or (policy == "OnFailure" and run.exit_code != 0)

    def _schedule_restart(self, run: ContainerRun) -> None:
        """CrashLoopBackOff as the kubelet does it: 10 s, doubling, at most 300 s; the pod stays Running."""
        delay = min(RESTART_BACKOFF_S * 2**run.restart_count, RESTART_BACKOFF_MAX_S)
        run.restart_count += 1
        run.last_state = run.state
        run.state = podspec.waiting("CrashLoopBackOff", f"back-off {delay:.0f}s restarting failed container")
        run.restart_at = time.monotonic() + delay

    @staticmethod
    def _signal(runs: list[ContainerRun], sig: signal.Signals) -> None:
        for run in runs:
            if run.process is not None and run.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.group or run.process.pid, sig)

    def _terminated(self, run: ContainerRun, code: int, message: str = "") -> dict[str, Any]:
        if not message:
            message = self._termination_message(run, code)
        return podspec.terminated(
            code, started_at=run.started_at or now_rfc3339(), finished_at=now_rfc3339(), message=message
        )

    def _termination_message(self, run: ContainerRun, code: int) -> str:
        path = self.directory / "termination" / run.name
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        if not text and code != 0 and run.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            lines = run.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
            text = "\n".join(lines[-FALLBACK_LOG_LINES:])
        return text[-TERMINATION_MESSAGE_MAX:]


def api_socket_path(config: KubeletConfig) -> Path:
    """Where the kubelet relays pods' API connections to the API server (see sandbox.py)."""
    return Path(config.workdir) / "api.sock"


def _container_group(nsenter_pid: int, timeout_s: float = 5.0) -> int:
    """The process group of a container: nsenter forks the container's first process into the pod's PID
    namespace, and that process makes itself a group leader (sandbox.py) before anything else, so signals
    reach the container and never nsenter, which waits for it and exits as it did (128+N on a signal).
    Falls back to nsenter's own group when the child never appears (it failed before forking)."""
    children = Path(f"/proc/{nsenter_pid}/task/{nsenter_pid}/children")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pids = children.read_text(encoding="ascii").split()
        except OSError:
            return nsenter_pid
        with contextlib.suppress(ProcessLookupError):
            if pids and os.getpgid(int(pids[0])) == int(pids[0]):
                return int(pids[0])
        time.sleep(0.01)
    return nsenter_pid


def _exit_code(returncode: int) -> int:
    """A process killed by signal N exits 128+N in a container, as a shell would report it."""
    return 128 - returncode if returncode < 0 else returncode
