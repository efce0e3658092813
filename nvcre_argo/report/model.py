"""The report of one Certification: a frozen value built from the resource, its status and decoded results.

Why a model separate from the renderers: the verdict, the counts and the order of everything are decided
once, here, and the text, JSON and JUnit outputs only format them, so they can never disagree. Inputs are
what a caller reads from the cluster: the Certification (a dict, as the API server returns it), its
`CertificationStatus`, and per category index the contents of its ConfigMaps (`failed-nodes.json.gz`
entries `{name, reason, message}`, `succeeded-nodes.csv.gz` names, a diagnose category's `diagnose.json.gz`)
and optional measurement figures such as `busBandwidthGBps`. Decoding the ConfigMaps is the caller's job;
nothing here does I/O.

A diagnose category's isolation summary comes whole from its ConfigMap when the caller could read it
(`watch.diagnose.diagnose_summary(record, capped=False)`), else from the status, whose lists are cut short
(its counts stay whole).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre_argo.api.status import CategoryStatus, CertificationStatus, DiagnoseSummary, Result
from nvcre_argo.results import PlatformRecord
from nvcre_argo.watch.conditions import VALIDATION_FAILED, find_condition
from nvcre_argo.watch.status import derive_result


@dataclass(frozen=True)
class FailedNode:
    """One entry of a failed-nodes ConfigMap (docs/nvcre-contract.md §3.7)."""

    name: str
    reason: str
    message: str


@dataclass(frozen=True)
class CategoryResults:
    """What the caller decoded for one category; every part may be missing (not written yet, or no access)."""

    failed_nodes: Sequence[Mapping[str, Any]] = ()
    succeeded_nodes: Sequence[str] = ()
    figures: Mapping[str, float] = field(default_factory=dict)
    # Result ConfigMaps the status names that no longer exist (deleted by hand or with an old owner).
    missing: Sequence[str] = ()
    diagnose: DiagnoseSummary | None = None  # a diagnose category's whole isolation summary
    platform: PlatformRecord | None = None  # the platform, arms and GPU architecture the run used


@dataclass(frozen=True)
class CategoryReport:
    """One category, in spec order; `index` is 0-based like the `category-index` label."""

    index: int
    domain: str
    variant: str
    status: str
    mnnvl: bool | None
    workflow: str | None
    message: str | None
    failed_nodes: tuple[FailedNode, ...]
    succeeded_nodes: tuple[str, ...]
    figures: tuple[tuple[str, float], ...]
    missing_results: tuple[str, ...] = ()
    diagnose: DiagnoseSummary | None = None
    platform: PlatformRecord | None = None

    @property
    def key(self) -> str:
        return f"{self.domain}/{self.variant}"

    @property
    def passed(self) -> bool:
        return self.status == "Succeeded"

    @property
    def failed(self) -> bool:
        return self.status == "Failed"


@dataclass(frozen=True)
class Report:
    """The whole report; `failed_node_names` is the distinct union over categories, sorted."""

    name: str
    namespace: str | None
    result: Result
    mnnvl: bool | None
    categories: tuple[CategoryReport, ...]
    excluded_nodes: int | None
    failed_node_names: tuple[str, ...]
    failed_node_count: int | None
    validation_failed: bool

    @property
    def passed_count(self) -> int:
        return sum(category.passed for category in self.categories)

    @property
    def passed(self) -> str:
        return f"{self.passed_count}/{len(self.categories)}"


def _failed_nodes(entries: Sequence[Mapping[str, Any]]) -> tuple[FailedNode, ...]:
    nodes = {
        FailedNode(str(entry.get("name", "")), str(entry.get("reason", "")), str(entry.get("message", "")))
        for entry in entries
    }
    return tuple(sorted((node for node in nodes if node.name), key=lambda node: (node.name, node.reason, node.message)))


def _mnnvl(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _diagnose(decoded: CategoryResults, observed: CategoryStatus | None) -> DiagnoseSummary | None:
    """The whole summary from the ConfigMap when it was read, else the status's (lists cut short)."""
    if decoded.diagnose is not None:
        return decoded.diagnose
    return observed.diagnose if observed else None


def build_report(
    certification: Mapping[str, Any],
    status: CertificationStatus | None,
    results: Mapping[int, CategoryResults] | None = None,
) -> Report:
    """The report of `certification` as `status` describes it, with the decoded `results` per category index.

    A category the status does not mention yet is Pending. The result is the status's own when the watcher
    wrote one, else derived from the category phases with the same rule the watcher uses. The failed-node
    count is the size of the decoded union when any category's failed nodes were decoded, else the count the
    status carries (None when neither is known)."""
    metadata = certification.get("metadata") or {}
    spec = certification.get("spec") or {}
    global_mnnvl = _mnnvl(spec.get("enableMNNVL"))
    category_statuses = list(status.category_statuses or []) if status else []
    results = results or {}
    categories = []
    for index, item in enumerate(spec.get("categories") or []):
        domain, variant = str(item.get("domain", "")), str(item.get("variant", ""))
        observed = category_statuses[index] if index < len(category_statuses) else None
        if observed is not None and (observed.domain, observed.variant) != (domain, variant):
            observed = None
        decoded = results.get(index, CategoryResults())
        option = _mnnvl((item.get("options") or {}).get("enableMNNVL"))
        categories.append(
            CategoryReport(
                index=index,
                domain=domain,
                variant=variant,
                status=observed.status if observed else "Pending",
                mnnvl=option if option is not None else global_mnnvl,
                workflow=observed.workflow_ref.name if observed and observed.workflow_ref else None,
                message=observed.message if observed else None,
                failed_nodes=_failed_nodes(decoded.failed_nodes),
                succeeded_nodes=tuple(sorted(set(decoded.succeeded_nodes) - {""})),
                figures=tuple(sorted((str(key), float(value)) for key, value in decoded.figures.items())),
                missing_results=tuple(decoded.missing),
                diagnose=_diagnose(decoded, observed),
                platform=decoded.platform,
            )
        )
    union = sorted({node.name for category in categories for node in category.failed_nodes})
    decoded_any = any(result.failed_nodes for result in results.values())
    excluded = status.excluded_nodes if status else None
    result = status.result if status and status.result else derive_result([c.status for c in categories], excluded)
    validation = find_condition(status.conditions if status else None, VALIDATION_FAILED)
    return Report(
        name=str(metadata.get("name") or ""),
        namespace=metadata.get("namespace") or None,
        result=result,
        mnnvl=global_mnnvl,
        categories=tuple(categories),
        excluded_nodes=excluded,
        failed_node_names=tuple(union),
        failed_node_count=len(union) if decoded_any else (status.failed_nodes if status else None),
        validation_failed=validation is not None and validation.status == "True",
    )


def exit_code(report: Report) -> int:
    """0 only for PASSED; FAILED, INCOMPLETE ("not certified") and RUNNING all exit 1 (§7.13)."""
    return 0 if report.result == "PASSED" else 1
