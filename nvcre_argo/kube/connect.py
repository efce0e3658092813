"""A client from a kubeconfig file or the in-cluster service account, with errors a person can act on."""

from __future__ import annotations

import os

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import KubeConfigError

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def connect(kubeconfig: str | None = None, *, context: str | None = None, connections: int | None = None) -> KubeClient:
    """A client from a kubeconfig file, or the in-cluster service account when none is given and one exists.

    `connections`: how many connections to the API server it keeps open at most, for a process whose threads
    talk to it at once (the shared runner follows every running group in a thread of its own); by default the
    library's few.

    Raises KubeConfigError, with one line a person can act on, when there is no usable configuration.
    """
    configuration = k8s_client.Configuration()
    if connections is not None:
        configuration.connection_pool_maxsize = connections
    if kubeconfig is None:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
            return KubeClient(k8s_client.ApiClient(configuration), namespace=_service_account_namespace())
        except k8s_config.ConfigException:
            pass
    files = [path for path in (kubeconfig or os.environ.get("KUBECONFIG") or "").split(os.pathsep) if path]
    label = f"kubeconfig {os.pathsep.join(files)}" if files else "kubeconfig ~/.kube/config"
    if not any(os.path.isfile(os.path.expanduser(path)) for path in files or ["~/.kube/config"]):
        if files:
            raise KubeConfigError(f"{label}: no such file")
        raise KubeConfigError(
            "no kubeconfig: ~/.kube/config does not exist, KUBECONFIG is not set and this is not a pod; "
            "pass --kubeconfig FILE"
        )
    try:
        k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
        _, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception as error:  # the loader raises ConfigException, YAML, type and key errors alike
        raise KubeConfigError(f"{label}: invalid: {_config_problem(error)}") from None
    namespace = (active.get("context") or {}).get("namespace") if isinstance(active, dict) else None
    return KubeClient(k8s_client.ApiClient(configuration), namespace=str(namespace or "default"))


def _config_problem(error: Exception) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    text = text.removeprefix("Invalid kube-config file. ")
    for marker in (' in "', " in /"):
        text = text.split(marker, 1)[0]
    return text.rstrip(".")


def _service_account_namespace() -> str:
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as handle:
            return handle.read().strip() or "default"
    except OSError:
        return "default"
