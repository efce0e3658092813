"""What a status computation needs besides the Workflows: counts read from the result ConfigMaps.

Failed nodes come from each category's `failed-nodes-<id>` ConfigMap (distinct names across categories, and
which categories saw a `ThresholdViolation`); excluded nodes from each category's plan ConfigMap. A ConfigMap
is written once, so decoded contents are cached by (name, resourceVersion): a reconcile storm costs reads of
the Certification and nothing else.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo.api.status import CertificationStatus
from nvcre_argo.kube.client import ApiError, KubeClient
from nvcre_argo.kube.resources import CONFIGMAPS
from nvcre_argo.names import LABEL_ROLE, ROLE_CATEGORY, group_nodes_configmap
from nvcre_argo.plan.model import PlanError
from nvcre_argo.plan.storage import plan_from_configmap
from nvcre_argo.results import THRESHOLD_VIOLATION, FailedNode, ResultsError, decode_failed_nodes

log = logging.getLogger(__name__)
FAILED_NODES_KEY = "failed-nodes.json.gz"


@dataclass(frozen=True)
class ResultCounts:
    failed_node_names: set[str]
    threshold_categories: set[int]
    excluded_nodes: int


@dataclass
class ConfigMapReader:
    """Reads and decodes result ConfigMaps, caching each decoded version."""

    kube: KubeClient
    _cache: dict[tuple[str, str, str], Any] = field(default_factory=dict)

    def _get(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.kube.get(CONFIGMAPS, name, namespace)
        except ApiError as error:
            log.warning("cannot read ConfigMap %s/%s: %s", namespace, name, error)
            return None

    def failed_nodes(self, namespace: str, name: str) -> list[FailedNode]:
        configmap = self._get(namespace, name)
        if configmap is None:
            return []
        key = (namespace, name, configmap["metadata"].get("resourceVersion", ""))
        if key not in self._cache:
            try:
                self._cache[key] = decode_failed_nodes(
                    base64.b64decode(configmap.get("binaryData", {})[FAILED_NODES_KEY])
                )
            except (KeyError, ValueError, ResultsError) as error:
                log.warning("ConfigMap %s/%s does not hold failed nodes: %s", namespace, name, error)
                self._cache[key] = []
        nodes: list[FailedNode] = self._cache[key]
        return nodes

    def excluded_nodes(self, namespace: str, workflow_uid: str) -> set[str]:
        name = group_nodes_configmap(workflow_uid)
        configmap = self._get(namespace, name)
        if configmap is None:
            return set()
        key = (namespace, name, configmap["metadata"].get("resourceVersion", ""))
        if key not in self._cache:
            try:
                plan = plan_from_configmap(configmap)
                self._cache[key] = {exclusion.node for exclusion in plan.excluded}
            except PlanError as error:
                log.warning("ConfigMap %s/%s does not hold a plan: %s", namespace, name, error)
                self._cache[key] = set()
        excluded: set[str] = self._cache[key]
        return excluded

    def forget(self, namespace: str) -> None:
        for key in [key for key in self._cache if key[0] == namespace]:
            del self._cache[key]


def read_counts(
    reader: ConfigMapReader, namespace: str, status: CertificationStatus, workflows: Sequence[Mapping[str, Any]]
) -> ResultCounts:
    failed: set[str] = set()
    threshold: set[int] = set()
    for index, category in enumerate(status.category_statuses or []):
        if category.failed_nodes_ref is None:
            continue
        nodes = reader.failed_nodes(namespace, category.failed_nodes_ref.name)
        failed |= {node.name for node in nodes}
        if any(node.reason == THRESHOLD_VIOLATION for node in nodes):
            threshold.add(index)
    excluded: set[str] = set()
    for workflow in workflows:
        metadata = workflow.get("metadata", {})
        if (metadata.get("labels") or {}).get(LABEL_ROLE) == ROLE_CATEGORY and metadata.get("uid"):
            excluded |= reader.excluded_nodes(namespace, metadata["uid"])
    return ResultCounts(failed, threshold, len(excluded))
