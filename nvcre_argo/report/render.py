"""Print a `Report` as text (people), JSON (tools) or JUnit XML (CI); deterministic bytes for the same report.

Why these rules: node messages come from pods and may hold terminal escapes, newlines or bidi controls, so
every piece of cluster text is escaped before printing (a report must not rewrite the reader's terminal), and
the same escaping keeps the XML valid (XML 1.0 forbids most control characters, and ElementTree writes them
unchecked). JSON keys are sorted and camelCase; JUnit has one testsuite per Certification and one testcase
per category (docs/nvcre-contract.md §7.13, ADR-088): a failed category carries a `failure` listing its failed
nodes, a category that has not finished carries an `error`, and an INCOMPLETE certification (every category
passed, some target nodes excluded: "not certified") adds one `certification` testcase with an `error`, so CI
never shows green for a pool that is not certified.

A diagnose category adds one failed testcase per infrastructure fault (`<category>/link <a>|<b>`: a fault no
node explains has no node to hang a failure on) and one skipped testcase per untested node
(`<category>/untested <node>`, the reason as its message). Skipped rather than system-out because JUnit
consumers count skipped testcases in their summary and list each with its message, while system-out is shown,
if at all, only on a testcase's own page: an untested node must be seen, but it neither passed nor failed.
"""

from __future__ import annotations

import json
import unicodedata
import xml.etree.ElementTree as ET
from typing import Any

from nvcre_argo.api.status import DiagnoseSummary, InfrastructureFault
from nvcre_argo.report.model import CategoryReport, Report
from nvcre_argo.results import PlatformRecord
from nvcre_argo.watch.diagnose import describe_fault, fault_kind

REPORT_VERSION = 1
_VERDICTS = {
    "PASSED": "PASSED: every category passed on every target node; the node pool is certified",
    "FAILED": "FAILED: one or more categories failed; the node pool is not certified",
    "INCOMPLETE": "INCOMPLETE: every category passed but some target nodes were excluded; not certified",
    "RUNNING": "RUNNING: the certification has not finished",
}


def escape(text: str) -> str:
    """`text` on one line with every control, format (bidi) and surrogate character written as `\\xNN` /
    `\\uNNNN`; safe for a terminal and for XML 1.0."""
    out = []
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn") or char in "\ufffe\uffff":
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


def _mnnvl(value: bool | None) -> str:
    return "auto" if value is None else "on" if value else "off"


def _figure(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def verdict(report: Report) -> str:
    return _VERDICTS[report.result]


def _count(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(escape(name) for name in names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def _fault_line(fault: InfrastructureFault) -> str:
    """`link <a>|<b> (<stage>): <group A> and <group B>`: which fault, who found it, between which nodes."""
    return f"{escape(fault_kind(fault))} ({escape(fault.stage)}): {_names(fault.group_a)} and {_names(fault.group_b)}"


def _diagnose_counts(summary: DiagnoseSummary) -> str:
    """What the isolation cost, in the units the planner is judged by."""
    return f"{summary.rounds} rounds, {summary.jobs} jobs, {summary.node_jobs} node-jobs"


def _diagnose_text(summary: DiagnoseSummary) -> list[str]:
    """The isolation's cost, then every infrastructure fault and untested node it reported (a list the status
    cut short says how many it leaves out)."""
    lines = [f"  Diagnose:  {_diagnose_counts(summary)}"]
    faults, untested = summary.infrastructure_faults, summary.untested_nodes
    if summary.infrastructure_fault_count:
        lines.append(f"  Infrastructure faults: {summary.infrastructure_fault_count}")
        lines.extend(f"    {_fault_line(fault)}" for fault in faults)
        if summary.infrastructure_fault_count > len(faults):
            lines.append(f"    (+{summary.infrastructure_fault_count - len(faults)} more not listed in the status)")
    if summary.untested_node_count:
        lines.append(f"  Untested nodes: {summary.untested_node_count}")
        width = max((len(escape(item.node)) for item in untested), default=0)
        lines.extend(f"    {escape(item.node).ljust(width)}  {escape(item.reason)}" for item in untested)
        if summary.untested_node_count > len(untested):
            lines.append(f"    (+{summary.untested_node_count - len(untested)} more not listed in the status)")
    return lines


def _platform_text(record: PlatformRecord) -> str:
    arms = ", ".join(record.arms) or "none"
    return f"{record.platform or 'unknown'}, GPU {record.gpu_architecture or 'unknown'}, arms: {arms}"


def _category_text(category: CategoryReport, total: int) -> list[str]:
    lines = [f"[{category.index + 1}/{total}] {escape(category.key)}", f"  Status:    {category.status}"]
    if category.workflow:
        lines.append(f"  Workflow:  {escape(category.workflow)}")
    lines.append(f"  MNNVL:     {_mnnvl(category.mnnvl)}")
    if category.platform is not None:
        lines.append(f"  Platform:  {escape(_platform_text(category.platform))}")
    lines.append(f"  Nodes:     {len(category.succeeded_nodes)} passed, {len(category.failed_nodes)} failed")
    if category.message:
        lines.append(f"  Message:   {escape(category.message)}")
    if category.diagnose is not None:
        lines.extend(_diagnose_text(category.diagnose))
    lines.extend(
        f"  Missing:   ConfigMap {escape(name)} no longer exists: its nodes cannot be listed"
        for name in category.missing_results
    )
    if category.figures:
        width = max(len(escape(key)) for key, _ in category.figures)
        lines.append("  Figures:")
        lines.extend(f"    {escape(key).ljust(width)}  {_figure(value)}" for key, value in category.figures)
    if category.failed_nodes:
        width = max(len(escape(node.name)) for node in category.failed_nodes)
        reason_width = max(len(escape(node.reason)) for node in category.failed_nodes)
        lines.append("  Failed nodes:")
        for node in category.failed_nodes:
            columns = (escape(node.name).ljust(width), escape(node.reason).ljust(reason_width), escape(node.message))
            lines.append(f"    {'  '.join(columns)}".rstrip())
    return lines


def render_text(report: Report) -> str:
    """Header, one block per category in spec order, summary, and a last line with the verdict."""
    lines = [f"Certification: {escape(report.name)}"]
    if report.namespace:
        lines.append(f"Namespace:     {escape(report.namespace)}")
    lines += [f"Result:        {report.result}", f"MNNVL:         {_mnnvl(report.mnnvl)}", ""]
    for category in report.categories:
        lines += [*_category_text(category, len(report.categories)), ""]
    lines += [
        "Summary",
        f"  Categories:     {report.passed} passed",
        f"  Failed nodes:   {_count(report.failed_node_count)}",
        f"  Excluded nodes: {_count(report.excluded_nodes)}",
        f"  Thresholds:     {'violated' if report.validation_failed else 'no violation reported'}",
        f"  Result:         {report.result}",
        "",
        f"Verdict: {verdict(report)}",
    ]
    return "\n".join(lines) + "\n"


def report_dict(report: Report) -> dict[str, Any]:
    """The JSON document as a dict (camelCase keys; the renderer sorts them)."""
    return {
        "reportVersion": REPORT_VERSION,
        "name": report.name,
        "namespace": report.namespace,
        "result": report.result,
        "verdict": verdict(report),
        "passed": report.passed,
        "mnnvl": report.mnnvl,
        "excludedNodes": report.excluded_nodes,
        "failedNodeCount": report.failed_node_count,
        "failedNodes": list(report.failed_node_names),
        "validationFailed": report.validation_failed,
        "categories": [
            {
                "index": category.index,
                "domain": category.domain,
                "variant": category.variant,
                "status": category.status,
                "mnnvl": category.mnnvl,
                "workflow": category.workflow,
                "message": category.message,
                "nodesPassed": len(category.succeeded_nodes),
                "nodesFailed": len(category.failed_nodes),
                "figures": dict(category.figures),
                "failedNodes": [
                    {"name": node.name, "reason": node.reason, "message": node.message}
                    for node in category.failed_nodes
                ],
                "succeededNodes": list(category.succeeded_nodes),
                "missingResults": list(category.missing_results),
                "diagnose": category.diagnose.model_dump(mode="json", by_alias=True) if category.diagnose else None,
            }
            | (
                {
                    "platform": category.platform.platform,
                    "platformArms": list(category.platform.arms),
                    "gpuArchitecture": category.platform.gpu_architecture,
                }
                if category.platform is not None
                else {}
            )
            for category in report.categories
        ],
    }


def render_json(report: Report) -> str:
    """Indented JSON with sorted keys and a final newline."""
    return json.dumps(report_dict(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _testcase(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", {"classname": classname, "name": escape(name), "time": "0"})


def _category_case(suite: ET.Element, classname: str, category: CategoryReport) -> str | None:
    """Adds the category's testcase; returns "failure", "error" or None (passed)."""
    case = _testcase(suite, classname, category.key)
    outcome = None
    if category.failed:
        outcome = "failure"
        nodes = [f"{node.name}: {node.reason}: {node.message}" for node in category.failed_nodes]
        nodes += _diagnose_findings(category.diagnose)
        failure = ET.SubElement(
            case,
            "failure",
            {"message": escape(category.message or f"{category.key} failed"), "type": "CategoryFailed"},
        )
        failure.text = "\n".join(escape(line) for line in nodes) if nodes else "No failed nodes were recorded."
    elif not category.passed:
        outcome = "error"
        message = f"{category.key} is {category.status}: it has not finished"
        ET.SubElement(case, "error", {"message": message, "type": category.status})
    details = [f"workflow: {category.workflow or '-'}", f"mnnvl: {_mnnvl(category.mnnvl)}"]
    details.append(f"nodes: {len(category.succeeded_nodes)} passed, {len(category.failed_nodes)} failed")
    details.extend(f"{key}: {_figure(value)}" for key, value in category.figures)
    if category.diagnose is not None:
        details.append(f"diagnose: {_diagnose_counts(category.diagnose)}")
    ET.SubElement(case, "system-out").text = "\n".join(escape(line) for line in details)
    return outcome


def _diagnose_findings(summary: DiagnoseSummary | None) -> list[str]:
    """The category failure's lines beyond failed nodes: each infrastructure fault, how many nodes untested."""
    if summary is None:
        return []
    lines = [f"infrastructure fault: {describe_fault(fault)}" for fault in summary.infrastructure_faults]
    if summary.untested_node_count:
        lines.append(f"{summary.untested_node_count} node(s) left untested")
    return lines


def _diagnose_cases(suite: ET.Element, classname: str, category: CategoryReport) -> list[str]:
    """A failed testcase per infrastructure fault and a skipped one per untested node; their outcomes."""
    summary = category.diagnose
    if summary is None:
        return []
    outcomes = []
    for fault in summary.infrastructure_faults:
        case = _testcase(suite, classname, f"{category.key}/{fault_kind(fault)}")
        failure = ET.SubElement(
            case, "failure", {"message": escape(describe_fault(fault)), "type": "InfrastructureFault"}
        )
        lines = [
            f"stage: {fault.stage}",
            f"group A: {', '.join(fault.group_a)}",
            f"group B: {', '.join(fault.group_b)}",
        ]
        failure.text = "\n".join(escape(line) for line in lines)
        outcomes.append("failure")
    for item in summary.untested_nodes:
        case = _testcase(suite, classname, f"{category.key}/untested {item.node}")
        ET.SubElement(case, "skipped", {"message": escape(f"untested: {item.reason}")})
        outcomes.append("skipped")
    return outcomes


def render_junit(report: Report) -> str:
    """JUnit XML: `<testsuites>` holding this Certification's `<testsuite>`; valid XML 1.0, deterministic."""
    suite_name = f"{report.namespace}/{report.name}" if report.namespace else report.name
    classname = escape(".".join(part for part in (report.namespace, report.name) if part))
    root = ET.Element("testsuites", {"name": "nvcre-argo"})
    suite = ET.SubElement(root, "testsuite", {"name": escape(suite_name)})
    properties = ET.SubElement(suite, "properties")
    for key, value in (
        ("result", report.result),
        ("passed", report.passed),
        ("mnnvl", _mnnvl(report.mnnvl)),
        ("excludedNodes", _count(report.excluded_nodes)),
        ("failedNodes", _count(report.failed_node_count)),
    ):
        ET.SubElement(properties, "property", {"name": key, "value": value})
    outcomes: list[str | None] = []
    for category in report.categories:
        outcomes.append(_category_case(suite, classname, category))
        outcomes.extend(_diagnose_cases(suite, classname, category))
    if report.result == "INCOMPLETE" or not report.categories:
        case = _testcase(suite, classname, "certification")
        ET.SubElement(case, "error", {"message": verdict(report), "type": report.result})
        outcomes.append("error")
    counts = {
        "tests": str(len(outcomes)),
        "failures": str(outcomes.count("failure")),
        "errors": str(outcomes.count("error")),
        "skipped": str(outcomes.count("skipped")),
        "time": "0",
    }
    root.attrib.update({key: counts[key] for key in ("tests", "failures", "errors", "time")})
    suite.attrib.update(counts)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
