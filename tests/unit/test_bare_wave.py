"""The overhead benchmark's control wave: the copies it creates of a run's TrainJobs, and its figures from
hand-made timelines (seconds after 13:00:00; every expected value worked out from the timeline in the test).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre_argo.names import LABEL_GROUP
from tests.bench import bare_wave, overhead

ZERO = datetime(2026, 12, 1, 13, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return ZERO + timedelta(seconds=seconds)


def recorded(name: str, group: str) -> dict[str, Any]:
    """A TrainJob as a run left it: server fields, an owner, a status."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": "run-ns",
            "uid": "u-1",
            "resourceVersion": "42",
            "creationTimestamp": "2026-12-01T13:00:00Z",
            "labels": {LABEL_GROUP: group, "kai.scheduler/queue": "gpu"},
            "ownerReferences": [{"kind": "Workflow", "name": "wf", "uid": "w-1"}],
        },
        "spec": {"runtimeRef": {"name": "runtime-wf"}, "trainer": {"numNodes": 1}},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def test_copies_keep_the_spec_and_labels_but_drop_the_group_the_owner_and_the_server_fields() -> None:
    copies = bare_wave.bare_manifests([recorded("wf-g0002", "g0002"), recorded("wf-g0001", "g0001")], "ns")

    assert [copy["metadata"]["name"] for copy in copies] == ["bare-00000", "bare-00001"]
    first = copies[0]
    assert first["metadata"] == {
        "name": "bare-00000",
        "namespace": "ns",
        "labels": {"kai.scheduler/queue": "gpu", bare_wave.BARE_LABEL: "true"},
    }
    assert first["spec"] == {"runtimeRef": {"name": "runtime-wf"}, "trainer": {"numNodes": 1}}
    assert set(first) == {"apiVersion", "kind", "metadata", "spec"}


def test_the_wave_runs_from_the_first_creation_to_the_last_complete() -> None:
    # Job A: created at 0, running at 5, exited at 65, Complete at 67. Job B: created at 2, running at 20, exited
    # at 80, Complete at 81. A 60 s workload: the wave took 81 s, 21 s beyond it.
    times = [
        overhead.WorkloadTimes(created=at(0), running=at(5), exited=at(65), complete=at(67)),
        overhead.WorkloadTimes(created=at(2), running=at(20), exited=at(80), complete=at(81)),
    ]

    wave = bare_wave.summarize(times, duration=60, creating=1.5)

    assert (wave.trainjobs, wave.complete, wave.creating) == (2, 2, 1.5)
    assert wave.wall == 81
    assert wave.excess == 21
    assert wave.mean == {"to_running": 11.5, "workload": 60, "completion": 1.5}
    assert wave.max == {"to_running": 18, "workload": 60, "completion": 2}


def test_a_wave_with_a_trainjob_that_never_completed_has_no_wall_time() -> None:
    times = [
        overhead.WorkloadTimes(created=at(0), running=at(5), exited=at(65), complete=at(67)),
        overhead.WorkloadTimes(created=at(1), running=None, exited=None, complete=None),
    ]

    wave = bare_wave.summarize(times, duration=60, creating=0.2)

    assert (wave.complete, wave.wall, wave.excess) == (1, None, None)
    assert wave.mean == {"to_running": 5, "workload": 60, "completion": 2}


def test_ended_counts_complete_and_failed_trainjobs_only() -> None:
    def with_condition(kind: str, status: str) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": kind, "status": status}]}}

    trainjobs = [
        with_condition("Complete", "True"),
        with_condition("Failed", "True"),
        with_condition("Complete", "False"),
        with_condition("Suspended", "True"),
        {},
    ]

    assert bare_wave._ended(trainjobs) == 2
