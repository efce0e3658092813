"""One home for the result ConfigMaps: the run step's group result reads back through the shared parser (the
compressed form it writes and the plain `data["result.json"]` older steps wrote), the readers of the
failed/succeeded-node ConfigMaps accept exactly the layout the writers produce, and a malformed record is one
ResultsError naming the field, never a KeyError in a step or a report.
"""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import asdict
from typing import Any

import pytest

from nvcre_argo.results import (
    GROUP_RESULT_KEY,
    LEGACY_GROUP_RESULT_KEY,
    FailedNode,
    ResultsError,
    base64_text,
    configmap_binary,
    failed_nodes_configmap_manifest,
    parse_group_result,
    read_failed_nodes,
    read_group_result,
    read_succeeded_nodes,
    succeeded_nodes_configmap_manifest,
)
from nvcre_argo.steps.iteration import IterationResult
from nvcre_argo.steps.running import GroupResult


def written_by_the_run_step() -> GroupResult:
    return GroupResult(
        group="g0",
        nodes=["node-a", "node-b"],
        iterations=[
            IterationResult(0, "tj-0", True, "completed", [], {"busBandwidthGBps": 41.5, "algBandwidthGBps": 22}),
            IterationResult(
                1,
                "tj-1",
                False,
                "busBandwidthGBps 12.5 < 40",
                [{"name": "node-a", "reason": "ThresholdViolation", "message": "busBandwidthGBps 12.5 < 40"}],
                {"busBandwidthGBps": 12.5},
            ),
        ],
    )


def legacy_text(result: GroupResult) -> str:
    """`data["result.json"]` as run steps wrote it before compression: plain JSON, every message written out."""
    return json.dumps(asdict(result), sort_keys=True, indent=1)


@pytest.mark.parametrize(
    "configmap",
    [
        pytest.param(lambda result: {"binaryData": result.binary_data()}, id="compressed"),
        pytest.param(lambda result: {"data": {LEGACY_GROUP_RESULT_KEY: legacy_text(result)}}, id="older-plain"),
    ],
)
def test_what_the_run_step_writes_reads_back_field_for_field(configmap: Any) -> None:
    written = written_by_the_run_step()
    record = read_group_result(configmap(written))
    assert record["group"] == "g0"
    assert record["nodes"] == ["node-a", "node-b"]
    assert [iteration["succeeded"] for iteration in record["iterations"]] == [True, False]
    assert record["iterations"][0]["measurements"] == {"busBandwidthGBps": 41.5, "algBandwidthGBps": 22.0}
    assert record["iterations"][1]["failed_nodes"] == [
        {"name": "node-a", "reason": "ThresholdViolation", "message": "busBandwidthGBps 12.5 < 40"}
    ]
    assert [(i["iteration"], i["trainjob"], i["message"]) for i in record["iterations"]] == [
        (0, "tj-0", "completed"),
        (1, "tj-1", "busBandwidthGBps 12.5 < 40"),
    ]


def _document(**changes: Any) -> str:
    document = json.loads(legacy_text(written_by_the_run_step()))
    for path, value in changes.items():
        target = document
        *parents, last = path.split("__")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return json.dumps(document)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{", "result.json: not a JSON document", id="not-json"),
        pytest.param("[]", "result.json: expected dict, got list", id="not-an-object"),
        pytest.param(_document(group=3), "result.json.group: expected str, got int", id="group-not-a-string"),
        pytest.param(_document(iterations=None), "result.json.iterations: expected list", id="no-iterations"),
        pytest.param(
            _document(iterations__0__succeeded="yes"),
            "result.json.iterations[0].succeeded: expected bool, got str",
            id="succeeded-not-a-bool",
        ),
        pytest.param(
            _document(iterations__0__measurements={"busBandwidthGBps": True}),
            "result.json.iterations[0].measurements['busBandwidthGBps']: expected int or float, got bool",
            id="a-bool-is-not-a-measurement",
        ),
        pytest.param(
            _document(iterations__1__failed_nodes=[{"name": "n", "reason": "Bogus", "message": ""}]),
            "unknown failure reason 'Bogus'",
            id="unknown-reason",
        ),
        pytest.param(
            _document(iterations__1__failed_nodes=[{"name": "n", "reason": "WorkloadFailed", "message": None}]),
            "result.json.iterations[1].failed_nodes[0].message: expected str, got NoneType",
            id="failed-node-with-a-null-message",
        ),
    ],
)
def test_a_malformed_result_is_one_results_error_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(ResultsError, match="^" + message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_group_result(text)


def test_a_configmap_without_a_result_is_a_results_error() -> None:
    with pytest.raises(ResultsError, match=r"^result\.json\.gz: missing \(and no result\.json either\)"):
        read_group_result({"data": {}})
    with pytest.raises(ResultsError, match=r"^result\.json\.gz: not gzip data"):
        read_group_result({"binaryData": {GROUP_RESULT_KEY: base64.b64encode(b"plain").decode()}})


def _blame_everyone(count: int, message: str) -> GroupResult:
    """A group whose TrainJob failed with no rank to blame: every node recorded, each with the one message."""
    nodes = [f"dgx-h100-80gb-use1a-pool01-rack{index // 8:04d}-node{index % 8:02d}" for index in range(count)]
    failed = [{"name": node, "reason": "WorkloadFailed", "message": message} for node in nodes]
    return GroupResult("g0", nodes, [IterationResult(0, "tj-0", False, message, failed)])


def test_a_10000_node_group_blaming_every_node_with_a_log_tail_stays_far_below_the_object_limit() -> None:
    """The API server refuses a ConfigMap over 1 MiB; plain, this result was 1,393,606 B at 4,096 nodes with a
    short message. With a 4 KiB log tail shared by every blamed node, compressed and written once, it is
    bounded by the node names, not by nodes x message."""
    tail = "".join(
        f"[rank {index}] NCCL WARN transport/net_ib.cc:1295 -> 3 unhandled system error\n" for index in range(64)
    )
    message = f"TrainJob/tj-0 failed: BackoffLimitExceeded; first failure: ...; log tail:\n{tail[:4096]}"
    result = _blame_everyone(10_000, message)

    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "binaryData": result.binary_data()}
    size = len(json.dumps(configmap, separators=(",", ":")).encode())
    stored = json.loads(gzip.decompress(base64.b64decode(configmap["binaryData"][GROUP_RESULT_KEY])))

    assert size < 256 * 1024, f"{size:,} B"
    assert json.dumps(stored).count("NCCL WARN") == message.count("NCCL WARN") > 50, "the tail is stored once"
    record = read_group_result(configmap)
    (iteration,) = record["iterations"]
    assert len(iteration["failed_nodes"]) == 10_000
    assert {node["message"] for node in iteration["failed_nodes"]} == {message}, "each node reads its message back"


def test_a_node_message_that_differs_from_its_iteration_is_kept_as_written() -> None:
    result = GroupResult(
        "g0",
        ["a", "b"],
        [
            IterationResult(
                0,
                "tj-0",
                False,
                "rank 1 failed first",
                [
                    {"name": "a", "reason": "WorkloadFailed", "message": "rank 1 failed first"},
                    {"name": "b", "reason": "WorkloadFailed", "message": "its own words"},
                ],
            )
        ],
    )
    stored = json.loads(gzip.decompress(base64.b64decode(result.binary_data()[GROUP_RESULT_KEY])))
    assert stored["iterations"][0]["failed_nodes"] == [
        {"name": "a", "reason": "WorkloadFailed"},
        {"name": "b", "reason": "WorkloadFailed", "message": "its own words"},
    ]
    record = read_group_result({"binaryData": result.binary_data()})
    assert [node["message"] for node in record["iterations"][0]["failed_nodes"]] == [
        "rank 1 failed first",
        "its own words",
    ]


def test_the_compressed_result_is_the_same_bytes_for_the_same_result() -> None:
    """A re-run of the step writing an identical result makes the update a no-op (deterministic gzip)."""
    assert written_by_the_run_step().binary_data() == written_by_the_run_step().binary_data()


def test_the_readers_decode_what_the_manifest_writers_produce() -> None:
    failed = [FailedNode("node-b", "WorkloadFailed", "exit 1"), FailedNode("node-a", "ThresholdViolation", "low")]
    assert read_failed_nodes(failed_nodes_configmap_manifest("f", "ns", failed)) == sorted(
        failed, key=lambda node: (node.name, node.reason)
    )
    assert read_succeeded_nodes(succeeded_nodes_configmap_manifest("s", "ns", ["n2", "n1"])) == ["n1", "n2"]


def test_a_configmap_without_its_key_holds_no_nodes_and_undecodable_data_is_a_results_error() -> None:
    assert read_failed_nodes({"binaryData": {}}) == []
    assert read_succeeded_nodes({}) == []
    assert configmap_binary({"binaryData": {"k": base64_text(b"x")}}, "k") == b"x"
    with pytest.raises(ResultsError, match="not base64"):
        configmap_binary({"binaryData": {"k": "***"}}, "k")
