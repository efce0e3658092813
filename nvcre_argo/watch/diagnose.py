"""A `testScale: diagnose` category's isolation summary in the Certification's status, and what it says of
the category.

Why from the failed-nodes ConfigMap: a diagnose category's record step writes its `DiagnoseRecord` there
(`diagnose.json.gz`, beside the reference's failed-node list), and that record is the only place a fault no
node explains (a broken link between two domains) or a node left untested is written down. The record step
fails the category Workflow when it found any, but Argo's message for that is `child '<node id>' failed`;
the summary's findings are what tell a person why, so they lead the category's message. A finding makes the
category Failed even when no node failed: a pool with a broken link is not certified.

Why the summary is cut short: every `kubectl get` reads the Certification, so the lists are capped (the
counts stay whole) and the round history stays in the ConfigMap. Everything here is pure, and marking is
idempotent, because a kept status passes through it again on every reconcile.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from nvcre_argo.api.status import (
    DIAGNOSE_MAX_FAULTS,
    DIAGNOSE_MAX_GROUP_NAMES,
    DIAGNOSE_MAX_UNTESTED,
    CategoryStatus,
    CertificationStatus,
    DiagnoseSummary,
    InfrastructureFault,
    UntestedNode,
)
from nvcre_argo.results import DIAGNOSE_KEY, DiagnoseRecord, ResultsError
from nvcre_argo.watch.conditions import FAILED, TERMINAL

MESSAGE_FAULTS = 3  # faults described in a category's message; the rest are counted
MESSAGE_NAMES = 5  # node names per list in a message, as the record step writes its findings


def diagnose_summary(record: DiagnoseRecord, *, capped: bool = True) -> DiagnoseSummary:
    """The summary of a decoded record: without the round history and, when `capped`, with each list cut to
    the status's limits (the report passes `capped=False` to show everything). ResultsError, naming the field,
    for what `read_diagnose` lets through but a status cannot hold (a negative count, a node name that is not
    a string): one odd ConfigMap must not stop the watcher from writing a status."""
    _check(record)
    faults, untested = record["infrastructureFaults"], record["untested"]
    fault_limit = DIAGNOSE_MAX_FAULTS if capped else len(faults)
    names = DIAGNOSE_MAX_GROUP_NAMES if capped else None
    untested_limit = DIAGNOSE_MAX_UNTESTED if capped else len(untested)
    return DiagnoseSummary(
        rounds=record["rounds"],
        jobs=record["jobs"],
        node_jobs=record["nodeJobs"],
        infrastructure_fault_count=len(faults),
        infrastructure_faults=[
            InfrastructureFault(
                domain=fault["domain"],
                group_a=fault["groupA"][:names],
                group_b=fault["groupB"][:names],
                stage=fault["stage"],
            )
            for fault in faults[:fault_limit]
        ],
        untested_node_count=len(untested),
        untested_nodes=[UntestedNode(node=item["node"], reason=item["reason"]) for item in untested[:untested_limit]],
    )


def _check(record: DiagnoseRecord) -> None:
    """What `read_diagnose` checks by type only and the status model would refuse with a less useful error."""
    for key in ("rounds", "jobs", "nodeJobs"):
        if record[key] < 0:
            raise ResultsError(f"{DIAGNOSE_KEY}.{key}: must be >= 0, got {record[key]}")
    for index, fault in enumerate(record["infrastructureFaults"]):
        for side in ("groupA", "groupB"):
            for position, name in enumerate(fault[side]):
                if not isinstance(name, str):
                    where = f"{DIAGNOSE_KEY}.infrastructureFaults[{index}].{side}[{position}]"
                    raise ResultsError(f"{where}: expected str, got {type(name).__name__}")


def fault_domains(fault: InfrastructureFault) -> list[str]:
    """The domains a fault lies between: two for a link (`"<a>|<b>"`), one for a fault inside a domain."""
    return fault.domain.split("|")


def fault_kind(fault: InfrastructureFault) -> str:
    """`link <a>|<b>`, `domain <d>`, or `domains <a>|<b>|<c>` for a fault across more than two: a short name
    (the report's JUnit testcase is named by it)."""
    domains = fault_domains(fault)
    if len(domains) == 2:
        return f"link {fault.domain}"
    return f"domain {fault.domain}" if len(domains) == 1 else f"domains {fault.domain}"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MESSAGE_NAMES])
    return shown + (", ..." if len(names) > MESSAGE_NAMES else "")


def describe_fault(fault: InfrastructureFault) -> str:
    """One fault in words, e.g. `link fault between domains sim-cluster.1 and sim-cluster.2`."""
    domains = fault_domains(fault)
    if len(domains) == 2:
        return f"link fault between domains {domains[0]} and {domains[1]}"
    where = f"inside domain {fault.domain}" if len(domains) == 1 else f"across domains {', '.join(domains)}"
    return f"fault {where} between {_names(fault.group_a)} and {_names(fault.group_b)}"


def describe_untested(summary: DiagnoseSummary) -> str | None:
    """`<n> node(s) left untested: <node> (<reason>), ...`, or None when every node was settled."""
    if not summary.untested_node_count:
        return None
    text = f"{summary.untested_node_count} node(s) left untested"
    listed = [f"{item.node} ({item.reason})" for item in summary.untested_nodes]
    return f"{text}: {_names(listed)}" if listed else text


def findings(summary: DiagnoseSummary) -> list[str]:
    """What the isolation found beyond failed nodes, in words: each fault (the first few, the rest counted),
    then the untested nodes. Empty when the summary makes no finding."""
    found = [describe_fault(fault) for fault in summary.infrastructure_faults[:MESSAGE_FAULTS]]
    more = summary.infrastructure_fault_count - len(found)
    if more > 0:
        found.append(f"{more} more infrastructure fault(s)")
    untested = describe_untested(summary)
    return [*found, untested] if untested else found


def mark_diagnose(category: CategoryStatus, summary: DiagnoseSummary) -> CategoryStatus:
    """The category with its summary; a finished one the summary finds fault with is Failed, its findings
    leading its message (once: a message that already holds them is left alone)."""
    text = "; ".join(findings(summary))
    if not text or category.status not in TERMINAL:
        return category.model_copy(update={"diagnose": summary})
    message = category.message or ""
    if text not in message:
        message = f"{text}; {message}" if message else text
    return category.model_copy(update={"diagnose": summary, "status": FAILED, "message": message})


def current_summaries(
    categories: Sequence[CategoryStatus],
    found: Mapping[int, DiagnoseSummary],
    unread: Collection[int],
    previous: CertificationStatus | None,
) -> dict[int, DiagnoseSummary]:
    """Each diagnose category's summary, by index: the one found in its ConfigMap, or, when that could not be
    read this time, the one written before for the same Workflow (the evidence is gone, not disproved)."""
    summaries = {index: summary for index, summary in found.items() if index < len(categories)}
    before = list(previous.category_statuses or []) if previous else []
    for index in unread:
        if index in summaries or index >= min(len(before), len(categories)):
            continue
        old, now = before[index], categories[index]
        if old.diagnose is not None and old.workflow_ref is not None and old.workflow_ref == now.workflow_ref:
            summaries[index] = old.diagnose
    return summaries
