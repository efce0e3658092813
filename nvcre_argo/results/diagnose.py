"""The diagnose record: a diagnose category's isolation summary, `binaryData["diagnose.json.gz"]` of its
failed-nodes ConfigMap.

Why a record of its own: no failed-node list can say what the isolation found between domains or left
untested, nor how its rounds went (`DiagnoseRecord`: rounds, jobs, faults between domains, untested nodes,
each round's groups). It sits under a key of its own, so readers of the reference's key are unaffected;
`read_diagnose` checks the shape field by field, so a reader sees a typed record or a ResultsError.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, TypedDict

from nvcre_argo.results.codec import (
    ResultsError,
    base64_text,
    configmap_binary,
    expect_type,
    gunzip_bytes,
    gzip_bytes,
)

DIAGNOSE_KEY: Final = "diagnose.json.gz"


class InfrastructureFaultRecord(TypedDict):
    domain: str  # a domain, or "<a>|<b>" for the link between two domains
    groupA: list[str]
    groupB: list[str]
    stage: str


class UntestedRecord(TypedDict):
    node: str
    reason: str


class RoundGroupRecord(TypedDict):
    name: str
    stage: str
    nodes: int
    outcome: str  # passed | failed | below-threshold | not-run


class RoundRecord(TypedDict):
    round: int
    groups: list[RoundGroupRecord]


class DiagnoseRecord(TypedDict):
    """A diagnose category's isolation summary (`diagnose.json.gz` in its failed-nodes ConfigMap): what no
    failed-node list can say (faults between domains, nodes left untested) and how the rounds went."""

    rounds: int
    jobs: int
    nodeJobs: int
    faulty: list[str]
    healthy: int
    infrastructureFaults: list[InfrastructureFaultRecord]
    untested: list[UntestedRecord]
    history: list[RoundRecord]


_DIAGNOSE_FIELDS: Final[Mapping[str, type]] = {
    "rounds": int,
    "jobs": int,
    "nodeJobs": int,
    "faulty": list,
    "healthy": int,
    "infrastructureFaults": list,
    "untested": list,
    "history": list,
}


def diagnose_binary_data(record: DiagnoseRecord) -> dict[str, str]:
    """The extra `binaryData` a diagnose category's failed-nodes ConfigMap carries (see `DiagnoseRecord`)."""
    payload = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    return {DIAGNOSE_KEY: base64_text(gzip_bytes(payload))}


def read_diagnose(configmap: Mapping[str, Any]) -> DiagnoseRecord | None:
    """The isolation summary of a diagnose category's failed-nodes ConfigMap; None for any other category."""
    data = configmap_binary(configmap, DIAGNOSE_KEY)
    if data is None:
        return None
    try:
        document = json.loads(gunzip_bytes(data, DIAGNOSE_KEY).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{DIAGNOSE_KEY}: not a JSON document: {error}") from None
    document = expect_type(document, dict, DIAGNOSE_KEY)
    for key, kind in _DIAGNOSE_FIELDS.items():
        expect_type(document.get(key), kind, f"{DIAGNOSE_KEY}.{key}")
    for index, fault in enumerate(document["infrastructureFaults"]):
        where = f"{DIAGNOSE_KEY}.infrastructureFaults[{index}]"
        for key, kind in (("domain", str), ("groupA", list), ("groupB", list), ("stage", str)):
            expect_type(expect_type(fault, dict, where).get(key), kind, f"{where}.{key}")
    for index, item in enumerate(document["untested"]):
        where = f"{DIAGNOSE_KEY}.untested[{index}]"
        for key in ("node", "reason"):
            expect_type(expect_type(item, dict, where).get(key), str, f"{where}.{key}")
    record: DiagnoseRecord = document  # checked field by field above
    return record
