"""What a status computation needs besides the Workflows: facts read from the result ConfigMaps.

Failed nodes come from each category's `failed-nodes-<id>` ConfigMap (distinct names across categories, and
which categories saw a `ThresholdViolation`), and so does a diagnose category's isolation summary (read from
the same object, so it costs no request); excluded nodes from each category's plan ConfigMap. A ConfigMap is
written once, so its decoded contents are cached by resourceVersion: a reconcile storm costs reads and no
decoding.

Why the cache forgets: a watcher runs for months while Certifications and Workflows come and go. Each
Certification's entries are exactly the ConfigMaps its last reconcile read, so what a finished Workflow's
garbage collection or a deleted Certification leaves behind is dropped at its next reconcile, and a bound on
the whole cache (least recently used first) caps what any burst can hold.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nvcre_argo.api.status import CategoryStatus, DiagnoseSummary
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CONFIGMAPS
from nvcre_argo.names import LABEL_ROLE, ROLE_CATEGORY, group_nodes_configmap
from nvcre_argo.plan.model import PlanError
from nvcre_argo.plan.storage import plan_from_configmap
from nvcre_argo.results import (
    THRESHOLD_VIOLATION,
    FailedNode,
    ResultsError,
    read_diagnose,
    read_failed_nodes,
)
from nvcre_argo.watch.diagnose import diagnose_summary

log = logging.getLogger(__name__)
T = TypeVar("T")
CacheKey = tuple[str, str]  # (namespace, ConfigMap name)
Owner = tuple[str, str]  # (namespace, Certification name)
DEFAULT_CACHE_LIMIT = 4096


@dataclass(frozen=True)
class ResultCounts:
    """The ConfigMap facts `compute_status` takes; None where they could not all be read (keep the last)."""

    failed_node_names: frozenset[str] | None
    threshold_categories: frozenset[int]
    unread_categories: frozenset[int]
    excluded_nodes: int | None
    diagnose: Mapping[int, DiagnoseSummary] = field(default_factory=dict)


@dataclass(frozen=True)
class FailedNodesContents:
    """What a failed-nodes ConfigMap holds: its nodes and, for a diagnose category, its isolation summary (as
    the status holds it)."""

    nodes: list[FailedNode]
    diagnose: DiagnoseSummary | None


def read_failed_nodes_contents(configmap: dict[str, Any]) -> FailedNodesContents:
    """Both parts of a failed-nodes ConfigMap. ResultsError when the failed-node list is malformed; a malformed
    isolation summary is logged and left out instead, so it never hides the failed nodes beside it."""
    nodes = read_failed_nodes(configmap)
    try:
        record = read_diagnose(configmap)
        diagnose = diagnose_summary(record) if record is not None else None
    except ResultsError as error:
        name = (configmap.get("metadata") or {}).get("name", "")
        log.warning("ConfigMap %s: the isolation summary is left out: %s", name, error)
        diagnose = None
    return FailedNodesContents(nodes, diagnose)


class DecodedCache:
    """Decoded ConfigMaps by (namespace, name), each for one resourceVersion, owned by the Certifications that
    read them; bounded, least recently used first (pure: no I/O, so its forgetting is unit-tested)."""

    def __init__(self, limit: int = DEFAULT_CACHE_LIMIT) -> None:
        self.limit = limit
        self._entries: OrderedDict[CacheKey, tuple[str, Any]] = OrderedDict()
        self._read_by: dict[Owner, set[CacheKey]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: CacheKey, version: str) -> tuple[bool, Any]:
        """(True, value) when `key` is cached at `version`, else (False, None)."""
        entry = self._entries.get(key)
        if entry is None or entry[0] != version:
            return False, None
        self._entries.move_to_end(key)
        return True, entry[1]

    def put(self, key: CacheKey, version: str, value: Any) -> None:
        """Cache `value` for `key` at `version` (replacing any other version), evicting the least recently
        used entries beyond the limit."""
        self._entries[key] = (version, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def retain(self, owner: Owner, read: set[CacheKey]) -> None:
        """Record what `owner`'s reconcile read, and drop what it read last time but no longer needs."""
        stale = self._read_by.get(owner, set()) - read
        self._read_by[owner] = set(read)
        self._evict(stale)

    def forget(self, owner: Owner) -> None:
        """The Certification is gone: drop every entry it used."""
        self._evict(self._read_by.pop(owner, set()))

    def _evict(self, keys: set[CacheKey]) -> None:
        still_used: set[CacheKey] = set().union(*self._read_by.values())
        for key in keys - still_used:
            self._entries.pop(key, None)


@dataclass
class ConfigMapReader:
    """Reads result ConfigMaps, decoding each version once (see `DecodedCache`)."""

    kube: KubeClient
    cache: DecodedCache = field(default_factory=DecodedCache)

    def failed_nodes(self, namespace: str, name: str) -> FailedNodesContents | None:
        """The ConfigMap's failed nodes (and isolation summary); None when it is gone or does not hold them."""
        return self._decoded(namespace, name, read_failed_nodes_contents, (ValueError, ResultsError))

    def excluded_nodes(self, namespace: str, workflow_uid: str) -> set[str] | None:
        """The nodes the plan of this category Workflow excluded; None when the plan cannot be read."""
        plan = self._decoded(namespace, group_nodes_configmap(workflow_uid), plan_from_configmap, (PlanError,))
        return None if plan is None else {exclusion.node for exclusion in plan.excluded}

    def retain(self, owner: Owner, read: set[CacheKey]) -> None:
        self.cache.retain(owner, read)

    def forget(self, owner: Owner) -> None:
        self.cache.forget(owner)

    def _decoded(
        self,
        namespace: str,
        name: str,
        decode: Callable[[dict[str, Any]], T],
        errors: tuple[type[Exception], ...],
    ) -> T | None:
        try:
            configmap = self.kube.get(CONFIGMAPS, name, namespace)
        except ApiError as error:
            log.warning("cannot read ConfigMap %s/%s: %s", namespace, name, error)
            return None
        if configmap is None:
            return None
        key, version = (namespace, name), (configmap.get("metadata") or {}).get("resourceVersion", "")
        found, cached = self.cache.get(key, version)
        if found:
            value: T | None = cached
            return value
        try:
            value = decode(configmap)
        except errors as error:
            log.warning("ConfigMap %s/%s does not hold what was expected: %s", namespace, name, error)
            value = None
        self.cache.put(key, version, value)
        return value


def read_counts(
    reader: ConfigMapReader,
    owner: Owner,
    categories: Sequence[CategoryStatus],
    workflows: Sequence[Mapping[str, Any]],
) -> ResultCounts:
    """The ConfigMap facts for one Certification, reading each ConfigMap its categories point at once; the
    reader keeps exactly these ConfigMaps for `owner`."""
    namespace = owner[0]
    read: set[CacheKey] = set()
    failed: set[str] = set()
    threshold: set[int] = set()
    unread: set[int] = set()
    diagnose: dict[int, DiagnoseSummary] = {}
    for index, category in enumerate(categories):
        if category.failed_nodes_ref is None:
            continue
        read.add((namespace, category.failed_nodes_ref.name))
        contents = reader.failed_nodes(namespace, category.failed_nodes_ref.name)
        if contents is None:
            unread.add(index)
            continue
        failed |= {node.name for node in contents.nodes}
        if any(node.reason == THRESHOLD_VIOLATION for node in contents.nodes):
            threshold.add(index)
        if contents.diagnose is not None:
            diagnose[index] = contents.diagnose
    excluded = _excluded(reader, namespace, categories, workflows, read)
    reader.retain(owner, read)
    return ResultCounts(
        failed_node_names=None if unread else frozenset(failed),
        threshold_categories=frozenset(threshold),
        unread_categories=frozenset(unread),
        excluded_nodes=excluded,
        diagnose=diagnose,
    )


def _excluded(
    reader: ConfigMapReader,
    namespace: str,
    categories: Sequence[CategoryStatus],
    workflows: Sequence[Mapping[str, Any]],
    read: set[CacheKey],
) -> int | None:
    """Distinct excluded nodes over the category Workflows; None when a category's Workflow is gone.

    A plan ConfigMap is owned by its category Workflow, so Argo's TTL removes it with the Workflow; a count
    taken then would turn INCOMPLETE into PASSED, so the count written before is kept instead."""
    present = {(item.get("metadata") or {}).get("name") for item in workflows}
    if any(category.workflow_ref and category.workflow_ref.name not in present for category in categories):
        return None
    excluded: set[str] = set()
    for workflow in workflows:
        metadata = workflow.get("metadata") or {}
        if (metadata.get("labels") or {}).get(LABEL_ROLE) == ROLE_CATEGORY and metadata.get("uid"):
            read.add((namespace, group_nodes_configmap(metadata["uid"])))
            excluded |= reader.excluded_nodes(namespace, metadata["uid"]) or set()  # no plan yet: none excluded
    return len(excluded)
