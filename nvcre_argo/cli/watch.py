"""`nvcre-argo watch`: keep Certification status true to the Argo Workflows (optionally, submit them)."""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import threading
from pathlib import Path

import click

from nvcre_argo import contract
from nvcre_argo.cli.catalog import catalog_dir_option, open_catalog
from nvcre_argo.cli.cluster import open_cluster
from nvcre_argo.cli.inputs import check_namespace, require_non_empty
from nvcre_argo.controller.leader import LeaderElector, LeaseSettings
from nvcre_argo.controller.loop import LoopSettings, Watcher
from nvcre_argo.controller.observability import Metrics, serve
from nvcre_argo.controller.reconciler import Reconciler, SubmitSettings

log = logging.getLogger(__name__)
LEADER_ELECTION_ID = "nvcre-argo-watcher"


def check_bind_address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """A click callback: the metrics and health servers bind an IP literal (IPv4, or IPv6 such as `::`, which
    on a dual-stack node also accepts IPv4), so a typo is a usage error, not a traceback at start-up."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise click.BadParameter(f"must be an IPv4 or IPv6 address such as 0.0.0.0 or ::, got {value!r}") from None
    return value


@click.command("watch")
@click.option("-n", "--namespace", default=None, callback=check_namespace, help="Watch one namespace.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Watch every namespace.")
@click.option("--submit", is_flag=True, help="Compile and create the Workflows of Certifications applied with kubectl.")
@click.option(
    "--step-image",
    default=contract.DEFAULT_STEP_IMAGE,
    show_default=True,
    callback=require_non_empty,
    help="With --submit.",
)
@click.option(
    "--template-ref",
    is_flag=True,
    help="With --submit: compile as nvcre-compile --template-ref does, for Argo's templateReferencing: Strict.",
)
@click.option(
    "--shared-runner/--pod-per-group",
    default=True,
    show_default=True,
    help="With --submit: one pod runs each category's groups, or a pod per group (as nvcre-compile does).",
)
@catalog_dir_option
@click.option("--kubeconfig", envvar="KUBECONFIG", default=None, help="Outside a cluster: the kubeconfig.")
@click.option("--metrics-port", type=int, default=8080, show_default=True, help="0 disables /metrics.")
@click.option("--health-port", type=int, default=8081, show_default=True, help="0 disables /healthz and /readyz.")
@click.option(
    "--bind-address",
    default="0.0.0.0",  # noqa: S104 - the pod's own network namespace; kubelet probes need it
    show_default=True,
    callback=check_bind_address,
    help="IP the metrics and health servers listen on (`::` for IPv6).",
)
@click.option("--leader-elect", is_flag=True, help="Hold a Lease so only one replica writes.")
@click.option(
    "--leader-election-namespace",
    default=None,
    callback=check_namespace,
    help="Namespace of the Lease (default: the watched one).",
)
@click.option(
    "--leader-election-id",
    default=LEADER_ELECTION_ID,
    show_default=True,
    callback=check_namespace,  # a DNS-1123 label, as the install's generated names are
    help="Name of the Lease (one per watcher that must not stand in for another).",
)
@click.option("--identity", default=None, help="This replica's identity (default: the host name).")
@click.option("--resync-seconds", type=float, default=60.0, show_default=True, help="Periodic full reconcile.")
def watch_command(
    namespace: str | None,
    all_namespaces: bool,
    submit: bool,
    template_ref: bool,
    shared_runner: bool,
    step_image: str,
    catalog_dirs: tuple[Path, ...],
    kubeconfig: str | None,
    metrics_port: int,
    health_port: int,
    bind_address: str,
    leader_elect: bool,
    leader_election_namespace: str | None,
    leader_election_id: str,
    identity: str | None,
    resync_seconds: float,
) -> None:
    """Watch Argo Workflows labelled with a Certification and keep its status up to date."""
    if bool(namespace) == all_namespaces:
        raise click.UsageError("give exactly one of --namespace NS or --all-namespaces")
    kube = open_cluster(kubeconfig)  # before logging is configured: one line, not urllib3's retries
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    identity = identity or socket.gethostname()
    metrics = Metrics()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    submit_settings = (
        SubmitSettings(open_catalog(catalog_dirs), step_image, template_ref, shared_runner) if submit else None
    )
    reconciler = Reconciler(kube, metrics=metrics, submit=submit_settings, identity=identity)
    watcher = Watcher(
        kube, reconciler, settings=LoopSettings(namespace, resync_seconds=resync_seconds), metrics=metrics, stop=stop
    )
    elector = None
    if leader_elect:
        lease_namespace = leader_election_namespace or namespace
        if not lease_namespace:
            raise click.UsageError("--leader-elect with --all-namespaces needs --leader-election-namespace")
        elector = LeaderElector(kube, LeaseSettings(leader_election_id, lease_namespace, identity))
    servers = []
    if metrics_port:
        servers.append(
            serve(
                bind=bind_address, port=metrics_port, metrics=metrics, ready=watcher.synced.is_set, alive=lambda: True
            )
        )
    if health_port:
        servers.append(
            serve(
                bind=bind_address,
                port=health_port,
                metrics=None,
                ready=lambda: watcher.synced.is_set() or (elector is not None and not elector.leading.is_set()),
                alive=lambda: not stop.is_set(),
            )
        )
    lost = threading.Event()

    def on_lost() -> None:
        lost.set()
        stop.set()

    try:
        if elector is not None:
            threading.Thread(target=elector.run, args=(stop, on_lost), daemon=True).start()
            click.echo(f"{identity}: waiting for the Lease", err=True)
            while not stop.is_set() and not elector.leading.wait(0.5):
                pass
        if not stop.is_set():
            click.echo(f"{identity}: watching {'namespace ' + namespace if namespace else 'all namespaces'}", err=True)
            watcher.run()
    finally:
        for server in servers:
            server.shutdown()
    if lost.is_set():
        raise SystemExit(1)
