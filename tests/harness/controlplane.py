"""Start and stop a real, throw-away Kubernetes control plane: etcd plus kube-apiserver.

This is what controller-runtime's envtest does, done from Python so the integration tests need neither Docker
nor Go at test time (the binaries come from ``make testbin``). Everything listens on free ``127.0.0.1``
ports only (``--bind-address=127.0.0.1``; without it the apiserver would advertise the machine's external
address). Clients authenticate with a static bearer token (``--token-auth-file``) that belongs to
``system:masters``; the token is written only to files in the private work directory and never printed.

No kube-controller-manager runs, so the ``ServiceAccount`` admission plugin is disabled (nothing would create
the ``default`` service account) and deleted namespaces stay ``Terminating``.

Each component runs in its own session (process group). :meth:`ControlPlane.stop` terminates both groups and
reaps them; it is registered with :mod:`atexit` while the control plane runs, so a crashed test session does
not leave an etcd or apiserver behind.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self, TypeVar

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from tests.harness.crds import CrdInstallReport, install_crds
from tests.harness.pki import PkiFiles, write_pki
from tests.harness.versions import BUILD_COMMAND, BinaryDirs, binary_dirs

READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 15.0
POLL_INTERVAL_S = 0.25
PROGRESS_EVERY_S = 10.0
LOG_TAIL_LINES = 40
PORT_CLASH_ATTEMPTS = 3
ADMIN_USER = "nvcre-test-admin"
ETCD_MAX_REQUEST_BYTES = 1536 * 1024
"""etcd's own default, as on a real cluster: an object too large to store there (a Workflow whose node
map outgrew it, say) is refused here too, instead of passing a test it would fail in production. Argo's
full CRDs fit (the largest, with its managedFields, installs under it)."""

Progress = Callable[[str], None]
_T = TypeVar("_T")


class ControlPlaneError(RuntimeError):
    """A component failed to start (the message carries the tail of its log)."""


def stderr_progress(message: str) -> None:
    """Default progress sink: one line on stderr, flushed, so long waits are visible."""
    print(f"[control-plane] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file, or a note if there is none."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return f"(no log file at {path})"
    return "\n".join(text.splitlines()[-lines:])


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (a reaped child no longer does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_group_alive(pgid: int) -> bool:
    """Whether any process is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Component:
    """One running binary: its process (leader of its own process group) and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> bool:
        return self.process.poll() is not None

    def failure(self, what: str) -> ControlPlaneError:
        return ControlPlaneError(
            f"{self.name} {what} (exit code {self.process.returncode}); last lines of {self.log_path}:\n"
            f"{log_tail(self.log_path)}"
        )

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``, reap the leader, close the log."""
        try:
            if self.process.poll() is None:
                _signal_group(self.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    _signal_group(self.pid, signal.SIGKILL)
                    self.process.wait(timeout=grace_s)
            # Stragglers the leader may have left in its group (neither binary forks, but be sure).
            if process_group_alive(self.pid):
                _signal_group(self.pid, signal.SIGKILL)
        finally:
            self.log_file.close()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def spawn(name: str, argv: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> Component:
    """Start ``argv`` in a new session with stdout/stderr going to ``log_path`` (``env`` adds variables)."""
    log_file = log_path.open("ab")
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=log_path.parent,
            env=None if env is None else {**os.environ, **env},
        )
    except BaseException:
        log_file.close()
        raise
    return Component(name=name, process=process, log_path=log_path, log_file=log_file)


@dataclass(frozen=True)
class Ports:
    """The loopback ports one control plane instance listens on."""

    etcd_client: int
    etcd_peer: int
    apiserver: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(etcd_client=free_port(), etcd_peer=free_port(), apiserver=free_port())


def etcd_argv(binary: Path, data_dir: Path, ports: Ports) -> list[str]:
    client_url = f"http://127.0.0.1:{ports.etcd_client}"
    return [
        str(binary),
        "--name=nvcre-test",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
        f"--initial-cluster=nvcre-test=http://127.0.0.1:{ports.etcd_peer}",
        "--unsafe-no-fsync=true",
        f"--max-request-bytes={ETCD_MAX_REQUEST_BYTES}",
        "--log-level=warn",
    ]


# Who the audit log records, when there is one: every request of a service account outside kube-system (the
# pods' identity: step pods, watchers), once, when its response is complete; nothing of the controllers
# (kube-system's service accounts, or their own credentials) or of the tests themselves.
SERVICE_ACCOUNT_AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
"""


def audit_argv(workdir: Path) -> list[str]:
    """kube-apiserver's flags for an audit log of service accounts' requests, ``<workdir>/audit.log`` (JSON
    lines), written as requests complete; writes the policy they name into ``workdir``."""
    policy = workdir / "audit-policy.yaml"
    policy.write_text(SERVICE_ACCOUNT_AUDIT_POLICY, encoding="utf-8")
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={workdir / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
    ]


def apiserver_argv(
    binary: Path,
    workdir: Path,
    pki: PkiFiles,
    token_file: Path,
    ports: Ports,
    *,
    service_accounts: bool = False,
    audit: bool = False,
) -> list[str]:
    """kube-apiserver's flags; ``service_accounts`` keeps the ServiceAccount admission plugin on (only when a
    kube-controller-manager runs to create the ``default`` service accounts); ``audit`` logs every request
    of a service account (see :func:`audit_argv`)."""
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        f"--cert-dir={workdir / 'apiserver-certs'}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--secure-port={ports.apiserver}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        "--service-cluster-ip-range=127.2.0.0/24",  # loopback only, apart from the pods' 127.1.0.0/16
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        f"--token-auth-file={token_file}",
        *([] if service_accounts else ["--disable-admission-plugins=ServiceAccount"]),
        f"--service-account-issuer=https://127.0.0.1:{ports.apiserver}/",
        f"--service-account-key-file={pki.sa_public_key}",
        f"--service-account-signing-key-file={pki.sa_private_key}",
        "--profiling=false",
        *(audit_argv(workdir) if audit else []),
    ]


def write_token_file(path: Path, token: str) -> Path:
    """The static token file: ``token,user,uid,"groups"`` (k8s.io/apiserver tokenfile format)."""
    path.write_text(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n', encoding="utf-8")
    path.chmod(0o600)
    return path


def write_kubeconfig(path: Path, server: str, ca_cert: Path, token: str) -> Path:
    """A kubeconfig for the admin user, with the CA inlined so the file stands alone."""
    ca_data = base64.b64encode(ca_cert.read_bytes()).decode("ascii")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "nvcre-test", "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": ADMIN_USER, "user": {"token": token}}],
        "contexts": [{"name": "nvcre-test", "context": {"cluster": "nvcre-test", "user": ADMIN_USER}}],
        "current-context": "nvcre-test",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)
    return path


def _no_proxy_opener(context: ssl.SSLContext | None = None) -> urllib.request.OpenerDirector:
    """An opener that never uses a proxy: the control plane is on loopback only."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def probe(opener: urllib.request.OpenerDirector, request: urllib.request.Request) -> tuple[int, str]:
    """GET once; returns ``(status, body)``, with status 0 when the server is not reachable yet."""
    try:
        with opener.open(request, timeout=5) as response:
            return int(response.status), response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def _failing_checks(body: str) -> str:
    failing = [line.strip() for line in body.splitlines() if line.startswith("[-]")]
    return ", ".join(failing) if failing else body.strip()[:200]


class ControlPlane:
    """etcd + kube-apiserver on loopback, with its own PKI, token and kubeconfig in a work directory.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. The work directory (data, logs,
    kubeconfig) is removed on stop unless it was passed in or ``keep_workdir`` is set.
    """

    def __init__(
        self,
        binaries: BinaryDirs | None = None,
        workdir: Path | None = None,
        *,
        ready_timeout_s: float = READY_TIMEOUT_S,
        keep_workdir: bool = False,
        progress: Progress = stderr_progress,
        service_accounts: bool = False,
        audit: bool = False,
    ) -> None:
        self._binaries = binaries
        self._service_accounts = service_accounts
        self._audit = audit
        self._pki: PkiFiles | None = None
        self._given_workdir = workdir
        self._keep_workdir = keep_workdir or workdir is not None
        self._ready_timeout_s = ready_timeout_s
        self._progress = progress
        self._workdir: Path | None = None
        self._components: list[Component] = []
        self._token: str | None = None
        self._ca_cert: Path | None = None
        self._kubeconfig: Path | None = None
        self._server: str | None = None
        self.ready_seconds: float | None = None

    # ----------------------------------------------------------------------------------------- properties

    @property
    def workdir(self) -> Path:
        return self._require(self._workdir, "workdir")

    @property
    def audit_log(self) -> Path | None:
        """The audit log of service accounts' requests (JSON lines), when started with ``audit``."""
        return self.workdir / "audit.log" if self._audit else None

    @property
    def kubeconfig(self) -> Path:
        return self._require(self._kubeconfig, "kubeconfig")

    @property
    def server(self) -> str:
        """The apiserver URL, ``https://127.0.0.1:<port>``."""
        return self._require(self._server, "server")

    @property
    def pki(self) -> PkiFiles:
        """The CA, serving pair and service-account keys this instance issued (other components reuse them)."""
        return self._require(self._pki, "pki")

    @property
    def port(self) -> int:
        return int(self.server.rsplit(":", 1)[1])

    @property
    def pids(self) -> dict[str, int]:
        """PID (= process group id) of each component started by this instance, by name."""
        return {c.name: c.pid for c in self._components}

    @property
    def running(self) -> bool:
        return bool(self._components) and all(not c.exited() for c in self._components)

    @staticmethod
    def _require(value: _T | None, what: str) -> _T:
        if value is None:
            raise RuntimeError(f"control plane not started: no {what} yet")
        return value

    # ----------------------------------------------------------------------------------------- clients

    def api_client(self) -> k8s_client.ApiClient:
        """A new client configured from the kubeconfig; close it (or use ``with``) when done."""
        api: k8s_client.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig)
        )
        return api

    def get(self, path: str) -> tuple[int, str]:
        """Authenticated GET of an apiserver path (e.g. ``/version``), verified against our CA."""
        context = ssl.create_default_context(cafile=str(self._require(self._ca_cert, "CA")))
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self._require(self._token, 'token')}"}
        )
        return probe(_no_proxy_opener(context), request)

    # ----------------------------------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        """Start etcd, then kube-apiserver, and wait until ``/readyz`` answers ``ok``."""
        if self._components:
            raise RuntimeError("control plane already started")
        self._binaries = self._binaries or binary_dirs()
        missing = self._binaries.missing()
        if missing:
            raise ControlPlaneError(
                f"missing binaries {', '.join(map(str, missing))}; build them with `{BUILD_COMMAND}`"
            )
        self._workdir = self._given_workdir or Path(tempfile.mkdtemp(prefix="nvcre-cp-"))
        self._workdir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            self._start_with_retries()
        except BaseException:
            self._keep_workdir = True  # keep the logs of a failed start for inspection
            self.stop()
            raise
        return self

    def _start_with_retries(self) -> None:
        """Start once; retry with new ports if another process grabbed a picked port in the meantime."""
        for attempt in range(1, PORT_CLASH_ATTEMPTS + 1):
            try:
                self._start_once(Ports.pick())
                return
            except ControlPlaneError as exc:
                if "address already in use" not in str(exc) or attempt == PORT_CLASH_ATTEMPTS:
                    raise
                self._progress(f"port clash on attempt {attempt}, retrying with new ports")
                self._stop_components()

    def _start_once(self, ports: Ports) -> None:
        binaries = self._require(self._binaries, "binaries")
        workdir = self.workdir
        started = time.monotonic()
        pki = write_pki(workdir / "pki")
        self._pki = pki
        self._ca_cert = pki.ca_cert
        self._token = secrets.token_urlsafe(32)
        token_file = write_token_file(workdir / "tokens.csv", self._token)
        self._server = f"https://127.0.0.1:{ports.apiserver}"
        self._kubeconfig = write_kubeconfig(workdir / "kubeconfig", self._server, pki.ca_cert, self._token)

        data_dir = workdir / "etcd-data"
        shutil.rmtree(data_dir, ignore_errors=True)
        self._progress(f"starting etcd on 127.0.0.1:{ports.etcd_client} (logs in {workdir})")
        etcd = spawn("etcd", etcd_argv(binaries.etcd_binary, data_dir, ports), workdir / "etcd.log")
        self._components.append(etcd)
        self._wait_for_etcd(etcd, ports, deadline=started + self._ready_timeout_s)

        self._progress(f"starting kube-apiserver on {self._server}")
        apiserver = spawn(
            "kube-apiserver",
            apiserver_argv(
                binaries.kube_apiserver,
                workdir,
                pki,
                token_file,
                ports,
                service_accounts=self._service_accounts,
                audit=self._audit,
            ),
            workdir / "kube-apiserver.log",
        )
        self._components.append(apiserver)
        self._wait_for_apiserver(apiserver, deadline=started + self._ready_timeout_s)
        self.ready_seconds = time.monotonic() - started
        self._progress(f"control plane ready in {self.ready_seconds:.1f} s")

    def _check_alive(self) -> None:
        for component in self._components:
            if component.exited():
                raise component.failure("exited during start-up")

    def _wait_for_etcd(self, etcd: Component, ports: Ports, deadline: float) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{ports.etcd_client}/health")
        self._wait_until(etcd, lambda: probe(_no_proxy_opener(), request), '"health":"true"', deadline)

    def _wait_for_apiserver(self, apiserver: Component, deadline: float) -> None:
        self._wait_until(apiserver, lambda: self.get("/readyz"), "ok", deadline)

    def _wait_until(
        self, component: Component, poll: Callable[[], tuple[int, str]], expect: str, deadline: float
    ) -> None:
        """Poll until a 200 whose body contains ``expect``; fail on process exit or at ``deadline``."""
        began = time.monotonic()
        next_report = began + PROGRESS_EVERY_S
        status, body = 0, ""
        while True:
            self._check_alive()
            status, body = poll()
            if status == 200 and expect in body:
                return
            now = time.monotonic()
            if now >= deadline:
                raise component.failure(
                    f"not ready within the {self._ready_timeout_s:.0f} s budget (last answer: HTTP {status} "
                    f"{_failing_checks(body)})"
                )
            if now >= next_report:
                waited = now - began
                self._progress(f"waiting for {component.name}: {waited:.0f} s, HTTP {status} {_failing_checks(body)}")
                next_report = now + PROGRESS_EVERY_S
            time.sleep(POLL_INTERVAL_S)

    def _stop_components(self) -> None:
        """Stop components in reverse start order (apiserver before etcd)."""
        while self._components:
            self._components.pop().stop()

    def stop(self) -> None:
        """Kill both process groups, reap them and remove the work directory. Idempotent."""
        atexit.unregister(self.stop)
        self._stop_components()
        if self._workdir is not None and not self._keep_workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass(frozen=True)
class Cluster:
    """A running control plane together with the CRDs installed in it (what the pytest fixture yields)."""

    plane: ControlPlane
    crds: CrdInstallReport

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def api_client(self) -> k8s_client.ApiClient:
        """A new configured client; close it (or use ``with``) when done."""
        return self.plane.api_client()


def start_cluster(binaries: BinaryDirs | None = None, crd_files: Sequence[Path] | None = None) -> Cluster:
    """Start a control plane and install the CRDs into it; nothing is left running if either step fails."""
    plane = ControlPlane(binaries)
    plane.start()
    try:
        with plane.api_client() as api:
            report = install_crds(api, crd_files)
    except BaseException:
        plane.stop()
        raise
    return Cluster(plane=plane, crds=report)
