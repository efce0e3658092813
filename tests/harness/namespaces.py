"""One namespace per test, on any of the test clusters (the plain control plane or the simulated one).

Tests share a cluster for speed and stay apart by working in their own namespace, named after the test so a
leftover one says where it came from.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

NAMESPACE_MAX = 63
SUFFIX_HEX = 3  # bytes -> 6 hex characters


def namespace_name(node_id: str) -> str:
    """A valid, unique namespace name (RFC 1123 label, at most 63 characters) derived from a test id."""
    base = re.sub(r"[^a-z0-9]+", "-", node_id.rsplit("/", 1)[-1].lower()).strip("-")
    suffix = secrets.token_hex(SUFFIX_HEX)
    base = base[: NAMESPACE_MAX - len(suffix) - 1].rstrip("-") or "test"
    return f"{base}-{suffix}"


@contextlib.contextmanager
def namespace_for_test(api: k8s_client.ApiClient, node_id: str) -> Iterator[str]:
    """Create a namespace for the test ``node_id`` and delete it afterwards (already gone is fine)."""
    name = namespace_name(node_id)
    core = k8s_client.CoreV1Api(api)
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
