"""Opening the cluster for the commands that talk to it (`report`, `watch`, `install`).

A missing or malformed kubeconfig and an API server that does not answer end the command with one line and
exit code 1, in bounded time, instead of a traceback or a minute of retries printing urllib3's text.
"""

from __future__ import annotations

import click

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.connect import connect
from nvcre_argo.kube.errors import KubeConfigError, UnreachableError

kubeconfig_option = click.option(
    "--kubeconfig",
    envvar="KUBECONFIG",
    default=None,
    help="The kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the pod's service account).",
)


def open_cluster(kubeconfig: str | None) -> KubeClient:
    """A client whose API server has answered once; exit 1 with one line when there is none."""
    try:
        kube = connect(kubeconfig or None)
        kube.check_reachable()
    except (KubeConfigError, UnreachableError) as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from None
    return kube
