"""The failed/succeeded-node ConfigMaps in the reference's exact layout (`docs/nvcre-contract.md` §3.7).

Consumers read these with nothing but base64 and gunzip, so the layout is checked with the real
`base64 -d | gunzip` commands on the manifest's text, not only with our own decoder.
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
from typing import Any

import pytest

from nvcre_argo.results import (
    DIAGNOSE_KEY,
    FAILED_NODES_KEY,
    SUCCEEDED_NODES_KEY,
    DiagnoseRecord,
    FailedNode,
    ResultsError,
    decode_failed_nodes,
    decode_succeeded_nodes,
    encode_failed_nodes,
    encode_succeeded_nodes,
    failed_nodes_configmap_manifest,
    read_diagnose,
    sanitize_log_tail,
    succeeded_nodes_configmap_manifest,
)

OWNER = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "name": "wf",
    "uid": "1234",
    "blockOwnerDeletion": True,
}
DELETED = "Workload TrainJob/test-nccl-all-gather-comm-f80-112be-workload was deleted"
FAILED = [
    FailedNode("node-b", "WorkloadFailed", DELETED),
    FailedNode("node-a", "ThresholdViolation", 'Threshold "busBandwidthGBps" violated: measured 250.0000'),
    FailedNode("node-b", "WorkloadFailed", "a later message for the same pair"),
    FailedNode("node-b", "HardwareFailureDetected", "node health check fired"),
]


def shell_decode(text: str) -> bytes:
    """What a consumer sees: `echo <binaryData> | base64 -d | gunzip`."""
    completed = subprocess.run(
        ["sh", "-c", "base64 -d | gunzip"], input=text.encode("ascii"), capture_output=True, check=True, timeout=30
    )
    return completed.stdout


def binary_data(manifest: dict[str, Any], key: str) -> str:
    value = manifest["binaryData"][key]
    assert isinstance(value, str)
    return value


# --- failed nodes --------------------------------------------------------------------------------------------


def test_failed_nodes_decode_with_base64_and_gunzip_into_the_documented_json() -> None:
    manifest = failed_nodes_configmap_manifest("failed-nodes-1234abcd", "nvcre", FAILED, [OWNER], {"team": "a"})
    assert shell_decode(binary_data(manifest, FAILED_NODES_KEY)).decode() == (
        '[{"name":"node-a","reason":"ThresholdViolation",'
        '"message":"Threshold \\"busBandwidthGBps\\" violated: measured 250.0000"},'
        '{"name":"node-b","reason":"HardwareFailureDetected","message":"node health check fired"},'
        f'{{"name":"node-b","reason":"WorkloadFailed","message":"{DELETED}"}}]'
    )


def test_failed_nodes_are_deduplicated_by_name_and_reason_keeping_the_first_message_and_sorted() -> None:
    decoded = decode_failed_nodes(encode_failed_nodes(FAILED))
    assert [(node.name, node.reason, node.message) for node in decoded] == [
        ("node-a", "ThresholdViolation", 'Threshold "busBandwidthGBps" violated: measured 250.0000'),
        ("node-b", "HardwareFailureDetected", "node health check fired"),
        ("node-b", "WorkloadFailed", DELETED),
    ]


def test_failed_nodes_round_trip_including_non_ascii_messages() -> None:
    nodes = [FailedNode("n1", "WorkloadFailed", "exit 1: échec — \\x1b[31m")]
    assert decode_failed_nodes(encode_failed_nodes(nodes)) == nodes
    assert decode_failed_nodes(encode_failed_nodes([])) == []
    assert gzip.decompress(encode_failed_nodes([])) == b"[]"


def test_the_same_failed_nodes_give_the_same_bytes_in_any_order() -> None:
    first = encode_failed_nodes(FAILED)
    assert encode_failed_nodes(list(reversed(FAILED[:2])) + FAILED[2:]) == first
    assert encode_failed_nodes(FAILED) == first
    # gzip header: no file name flag, mtime 0, best compression, OS "unknown" (same bytes on every platform).
    assert first[:10] == bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 2, 0xFF])


def test_a_failed_node_with_an_unknown_reason_cannot_be_built() -> None:
    with pytest.raises(ResultsError, match="unknown failure reason 'Flaky'; known: HardwareFailureDetected, "):
        FailedNode("n1", "Flaky", "")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param(b"not gzip", "failed-nodes.json.gz: not gzip data", id="not-gzip"),
        pytest.param(gzip.compress(b"{}"), "expected a JSON array, got dict", id="object"),
        pytest.param(
            gzip.compress(b'[{"name": "a", "reason": "Tired", "message": ""}]'), "unknown reason 'Tired'", id="reason"
        ),
        pytest.param(
            gzip.compress(b'[{"name": "a", "reason": "WorkloadFailed"}]'), r"\[0\]\.message: expected", id="field"
        ),
    ],
)
def test_failed_nodes_data_in_another_layout_is_rejected(payload: bytes, message: str) -> None:
    with pytest.raises(ResultsError, match=message):
        decode_failed_nodes(payload)


def test_the_failed_nodes_configmap_manifest_carries_owner_labels_and_binary_data_only() -> None:
    manifest = failed_nodes_configmap_manifest("failed-nodes-1234abcd", "nvcre", FAILED, [OWNER], {"z": "1", "a": "2"})
    assert manifest["apiVersion"] == "v1"
    assert manifest["kind"] == "ConfigMap"
    assert manifest["metadata"] == {
        "name": "failed-nodes-1234abcd",
        "namespace": "nvcre",
        "labels": {"a": "2", "z": "1"},
        "ownerReferences": [OWNER],
    }
    assert list(manifest["binaryData"]) == [FAILED_NODES_KEY]
    assert "data" not in manifest
    assert base64.b64decode(binary_data(manifest, FAILED_NODES_KEY)) == encode_failed_nodes(FAILED)


def test_a_diagnose_summary_beside_the_failed_nodes_leaves_the_references_key_byte_for_byte_the_same() -> None:
    """The watcher and `report` read the summary from the same ConfigMap as the failed nodes; consumers that
    know only the reference's key must read exactly what they read without it."""
    record: DiagnoseRecord = {
        "rounds": 2,
        "jobs": 3,
        "nodeJobs": 12,
        "faulty": [],
        "healthy": 8,
        "infrastructureFaults": [{"domain": "d1|d2", "groupA": ["a"], "groupB": ["b"], "stage": "inter-screening"}],
        "untested": [],
        "history": [],
    }
    plain = failed_nodes_configmap_manifest("failed-nodes-1234abcd", "nvcre", FAILED)
    diagnosed = failed_nodes_configmap_manifest("failed-nodes-1234abcd", "nvcre", FAILED, diagnose=record)
    assert list(diagnosed["binaryData"]) == [FAILED_NODES_KEY, DIAGNOSE_KEY]
    assert binary_data(diagnosed, FAILED_NODES_KEY) == binary_data(plain, FAILED_NODES_KEY)
    assert json.loads(shell_decode(binary_data(diagnosed, DIAGNOSE_KEY))) == record
    assert read_diagnose(diagnosed) == record
    assert read_diagnose(plain) is None


# --- succeeded nodes -----------------------------------------------------------------------------------------


def test_succeeded_nodes_decode_with_base64_and_gunzip_into_one_comma_joined_line() -> None:
    manifest = succeeded_nodes_configmap_manifest("succeeded-nodes-1234abcd", "nvcre", ["n3", "n1", "n2", "n1"])
    assert shell_decode(binary_data(manifest, SUCCEEDED_NODES_KEY)) == b"n1,n2,n3"
    assert "ownerReferences" not in manifest["metadata"]


def test_succeeded_nodes_round_trip_and_are_deterministic() -> None:
    data = encode_succeeded_nodes(["b", "a", "c"])
    assert decode_succeeded_nodes(data) == ["a", "b", "c"]
    assert encode_succeeded_nodes(["c", "a", "b", "a"]) == data
    assert decode_succeeded_nodes(encode_succeeded_nodes([])) == []
    assert decode_succeeded_nodes(gzip.compress(b"a,b\n")) == ["a", "b"]


def test_a_node_name_with_a_comma_cannot_be_written() -> None:
    with pytest.raises(ResultsError, match="cannot be written to a CSV line"):
        encode_succeeded_nodes(["a,b"])


# --- log tails -----------------------------------------------------------------------------------------------


def test_a_log_tail_keeps_the_last_bytes() -> None:
    text = "".join(f"line {index}\n" for index in range(2000))
    tail = sanitize_log_tail(text, 100)
    assert len(tail.encode()) == 100
    assert text.endswith(tail)
    assert sanitize_log_tail("short\n") == "short\n"


def test_a_log_tail_is_cut_on_a_utf8_character_boundary() -> None:
    text = "x" + "é" * 3000  # 2 bytes each
    tail = sanitize_log_tail(text, 4095)
    assert tail == "é" * 2047
    assert len(tail.encode()) == 4094
    assert len(sanitize_log_tail(text).encode()) == 4096


def test_control_characters_are_escaped_except_newline_and_tab() -> None:
    text = "\x1b[31mFAILED\x1b[0m\r\n\tbell\x07 del\x7f c1\x85 ok"
    assert sanitize_log_tail(text) == "\\x1b[31mFAILED\\x1b[0m\\x0d\n\tbell\\x07 del\\x7f c1\\x85 ok"


def test_the_byte_limit_counts_escapes_and_never_splits_one() -> None:
    tail = sanitize_log_tail("abc" + "\x1b" * 10, 9)
    assert tail == "\\x1b\\x1b"
    assert sanitize_log_tail("anything", 0) == ""
    with pytest.raises(ValueError, match="limit_bytes"):
        sanitize_log_tail("x", -1)


def test_a_decoded_configmap_is_valid_json_for_any_consumer() -> None:
    manifest = failed_nodes_configmap_manifest("f", "ns", FAILED)
    document = json.loads(shell_decode(binary_data(manifest, FAILED_NODES_KEY)))
    assert [set(item) for item in document] == [{"name", "reason", "message"}] * 3
