"""The footprint benchmark's arithmetic on hand-made pods, spans and audit events: what a pod reserves, the
peak of pods held at once and of their requests, and the API requests per service account.

Every expected value is worked out from the objects written in the test, not read off the benchmark's output.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.bench import footprint
from tests.bench.footprint import Requests
from tests.bench.overhead import NODE_NAME_ANNOTATION, Span

T0 = datetime(2026, 12, 1, 13, 0, 0, tzinfo=UTC)


def container(cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    return {"name": "c", "resources": {"requests": requests}} if requests else {"name": "c"}


def pod(node: str, containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": {"name": f"pod-{node}", "annotations": {NODE_NAME_ANNOTATION: node}}, "spec": spec}


def span(name: str, start: int, end: int) -> Span:
    return Span(
        template="run-group", started=T0 + timedelta(seconds=start), finished=T0 + timedelta(seconds=end), name=name
    )


def test_a_pod_reserves_the_sum_of_its_containers_or_its_biggest_init_container() -> None:
    # Argo's step pod: init 10m/64Mi; wait 10m/64Mi and main 100m/256Mi run together.
    step = pod("a", [container("10m", "64Mi"), container("100m", "256Mi")], init=[container("10m", "64Mi")])
    assert footprint.pod_requests(step) == Requests(cpu=pytest.approx(0.11), memory_mib=320.0)
    # An init container bigger than the rest decides, per resource.
    heavy_init = pod("b", [container("100m", "64Mi")], init=[container("1", "32Mi")])
    assert footprint.pod_requests(heavy_init) == Requests(cpu=1.0, memory_mib=64.0)
    assert footprint.pod_requests(pod("c", [container()])) == Requests()


def test_requests_are_keyed_by_the_argo_node_a_pod_ran() -> None:
    pods = [pod("wf.plan(0)", [container("1", "1Gi")]), {"metadata": {"name": "not-a-step"}, "spec": {}}]
    assert footprint.requests_by_node(pods) == {"wf.plan(0)": Requests(1.0, 1024.0)}


def test_the_peak_counts_pods_held_at_the_same_time_and_a_pod_ending_as_another_starts_as_gone() -> None:
    # a: 0-10, b: 5-20, c: 10-30 (starts as a ends), d: 12-14. Held at once: 2 (a, b), then b, c, d = 3.
    spans = [span("a", 0, 10), span("b", 5, 20), span("c", 10, 30), span("d", 12, 14)]
    requests = {
        "a": Requests(4.0, 100.0),
        "b": Requests(1.0, 100.0),
        "c": Requests(1.0, 100.0),
        "d": Requests(1.0, 1000.0),
    }
    found = footprint.footprint(spans, requests)
    assert (found.pods, found.peak_pods, found.unmatched) == (4, 3, 0)
    # CPU peaks with a and b (5 cores), memory with b, c and d (1,200 MiB): not at the same moment.
    assert found.peak == Requests(5.0, 1200.0)


def test_a_span_without_seen_requests_counts_as_a_pod_and_is_reported() -> None:
    found = footprint.footprint([span("a", 0, 10), span("b", 0, 10)], {"a": Requests(1.0, 10.0)})
    assert (found.peak_pods, found.unmatched, found.peak) == (2, 1, Requests(1.0, 10.0))


def audit_event(user: str, seconds: int) -> dict[str, Any]:
    received = (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"user": {"username": user}, "requestReceivedTimestamp": received, "stage": "ResponseComplete"}


def test_api_requests_count_the_namespaces_service_accounts_inside_the_window() -> None:
    events = [
        audit_event("system:serviceaccount:ns1:nvcre-argo-step", 5),
        audit_event("system:serviceaccount:ns1:nvcre-argo-step", 60),
        audit_event("system:serviceaccount:ns1:nvcre-argo-watcher", 30),
        audit_event("system:serviceaccount:ns1:nvcre-argo-step", 61),  # after the window
        audit_event("system:serviceaccount:ns2:nvcre-argo-step", 10),  # another namespace
        audit_event("admin", 10),  # not a service account
    ]
    counts = footprint.api_requests(events, "ns1", T0, T0 + timedelta(seconds=60))
    assert counts == {"nvcre-argo-step": 2, "nvcre-argo-watcher": 1}
    assert footprint.per_minute(3, T0, T0 + timedelta(seconds=30)) == 6.0
    assert footprint.per_minute(3, T0, T0) is None


def test_the_largest_object_of_each_kind_is_named_with_its_size_and_the_kinds_count() -> None:
    small = {"metadata": {"name": "small"}, "data": {"a": "x"}}
    managed_fields = [{"manager": "argo", "fieldsV1": {"f:data": {"f:a": {}}}}]
    large = {"metadata": {"name": "large", "managedFields": managed_fields}, "data": {"a": "x" * 1000}}
    workflow = {"metadata": {"name": "wf"}}
    found = footprint.largest_objects([("ConfigMap", small), ("Workflow", workflow), ("ConfigMap", large)])
    assert [(item.kind, item.count, item.name) for item in found] == [("ConfigMap", 2, "large"), ("Workflow", 1, "wf")]
    assert found[0].size_bytes == footprint.object_size(large) > 1000
    assert found[0].managed_fields_bytes == footprint.object_size(managed_fields) > 50
    assert found[1].managed_fields_bytes == 0
    assert footprint.object_size({"a": "é"}) == len('{"a":"é"}'.encode())


def test_the_high_water_mark_is_read_in_mib() -> None:
    status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t  153600 kB\nVmRSS:\t  100000 kB\n"
    assert footprint.high_water_mib(status) == 150.0
    assert footprint.high_water_mib("Name:\tkthreadd\n") is None


def test_object_sizes_print_per_run_and_kind_and_name_every_object_over_one_mib() -> None:
    small = {"kind": "ConfigMap", "count": 3, "name": "cm", "size_bytes": 19_016}
    huge = {
        "kind": "Workflow",
        "count": 2,
        "name": "wf-0",
        "size_bytes": footprint.OBJECT_LIMIT_BYTES + 1,
        "managed_fields_bytes": 300_000,
    }
    lines = footprint.object_size_lines([("faults-1", [small]), ("no-fault", [small, huge])])
    assert lines[2].split() == ["faults-1", "ConfigMap", "3", "19,016", "0", "cm"]
    assert lines[4].split() == ["no-fault", "Workflow", "2", "1,048,577", "300,000", "wf-0"]
    assert lines[-1] == "objects over 1 MiB: 1; no-fault Workflow wf-0"
    assert footprint.object_size_lines([("r", [small])])[-1] == "objects over 1 MiB: 0"


def test_step_memory_prints_each_command_in_whole_mib() -> None:
    assert footprint.step_memory_text({"run-groups": 236.4, "plan": 93.6}) == "run-groups 236, plan 94"
    assert footprint.step_memory_text({}) == "none sampled"
