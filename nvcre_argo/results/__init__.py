"""Every result ConfigMap's keys and layout, in one place: the failed/succeeded-node ConfigMaps, a diagnose
category's isolation summary and the per-group `result.json`.

Why one package: the steps write these ConfigMaps and the watcher and `report` read them; with the keys and
the parsing here, a writer and its readers cannot drift apart. One module per record, on a shared codec:

    codec       deterministic gzip, base64 `binaryData`, the record label's values, ResultsError
    nodes       the failed-node and succeeded-node ConfigMaps, in the reference's layout
    platform    the platform record, as annotations on both node ConfigMaps
    diagnose    a diagnose category's isolation summary (`diagnose.json.gz`)
    group       each node group's result (`result.json.gz`), failed-node messages elided
    logtail     sanitize_log_tail: the end of a pod log, safe to carry in a message

The names below are what the rest of the code uses; import them from here.
"""

from nvcre_argo.results.codec import (
    RECORD_GROUP_RESULT,
    RECORD_PLAN,
    ResultsError,
    base64_text,
    configmap_binary,
    gzip_bytes,
)
from nvcre_argo.results.diagnose import DIAGNOSE_KEY, DiagnoseRecord, read_diagnose
from nvcre_argo.results.group import (
    GROUP_RESULT_KEY,
    LEGACY_GROUP_RESULT_KEY,
    GroupResultRecord,
    IterationRecord,
    RestartRecord,
    group_result_binary_data,
    last_failure_message,
    parse_group_result,
    read_group_result,
    reasons_for,
)
from nvcre_argo.results.logtail import sanitize_log_tail
from nvcre_argo.results.nodes import (
    FAILED_NODES_KEY,
    HARDWARE_FAILURE_DETECTED,
    SUCCEEDED_NODES_KEY,
    THRESHOLD_VIOLATION,
    WORKLOAD_FAILED,
    FailedNode,
    decode_failed_nodes,
    decode_succeeded_nodes,
    encode_failed_nodes,
    encode_succeeded_nodes,
    failed_nodes_configmap_manifest,
    read_failed_nodes,
    read_succeeded_nodes,
    succeeded_nodes_configmap_manifest,
)
from nvcre_argo.results.platform import PlatformRecord, read_platform

__all__ = [
    "DIAGNOSE_KEY",
    "FAILED_NODES_KEY",
    "GROUP_RESULT_KEY",
    "HARDWARE_FAILURE_DETECTED",
    "LEGACY_GROUP_RESULT_KEY",
    "RECORD_GROUP_RESULT",
    "RECORD_PLAN",
    "SUCCEEDED_NODES_KEY",
    "THRESHOLD_VIOLATION",
    "WORKLOAD_FAILED",
    "DiagnoseRecord",
    "FailedNode",
    "GroupResultRecord",
    "IterationRecord",
    "PlatformRecord",
    "RestartRecord",
    "ResultsError",
    "base64_text",
    "configmap_binary",
    "decode_failed_nodes",
    "decode_succeeded_nodes",
    "encode_failed_nodes",
    "encode_succeeded_nodes",
    "failed_nodes_configmap_manifest",
    "group_result_binary_data",
    "gzip_bytes",
    "last_failure_message",
    "parse_group_result",
    "read_diagnose",
    "read_failed_nodes",
    "read_group_result",
    "read_platform",
    "read_succeeded_nodes",
    "reasons_for",
    "sanitize_log_tail",
    "succeeded_nodes_configmap_manifest",
]
