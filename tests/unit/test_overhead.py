"""The overhead benchmark's arithmetic on hand-made timestamps: the ideal critical path from the group count,
`maxConcurrent` and the workload duration, and the split of a category Workflow's wall time from Argo's
per-node timestamps and a TrainJob's.

Every expected value is worked out from the timeline written in the test (seconds after 13:00:00), not read
off the benchmark's output.
"""

from __future__ import annotations

from typing import Any

import pytest

from nvcre_argo.names import LABEL_GROUP
from nvcre_argo.watch import workflows
from tests.bench import overhead


def at(seconds: int) -> str:
    """An Argo/Kubernetes timestamp `seconds` after 2026-12-01T13:00:00Z."""
    return f"2026-12-01T13:{seconds // 60:02d}:{seconds % 60:02d}Z"


def pod_node(name: str, template: str, start: int, end: int, group: str = "") -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": name,
        "displayName": name.rsplit(".", 1)[-1],
        "type": "Pod",
        "templateName": template,
        "phase": "Succeeded",
        "startedAt": at(start),
        "finishedAt": at(end),
    }
    if group:
        node["inputs"] = {"parameters": [{"name": "group", "value": group}]}
    return node


def workflow_status(end: int, *pods: dict[str, Any]) -> dict[str, Any]:
    """A finished category Workflow's status: the Steps and Retry nodes Argo adds around the pods too."""
    nodes = {f"id-{index}": pod for index, pod in enumerate(pods)}
    nodes["root"] = {"name": "wf", "type": "Steps", "startedAt": at(0), "finishedAt": at(end)}
    nodes["retry"] = {"name": "wf[0].plan", "type": "Retry", "startedAt": at(2), "finishedAt": at(9)}
    return {"phase": "Succeeded", "startedAt": at(0), "finishedAt": at(end), "nodes": nodes}


@pytest.mark.parametrize(
    ("groups", "max_concurrent", "overflow", "expected_waves", "expected_ideal"),
    [
        pytest.param(16, 0, 0, 1, 60, id="16 groups unlimited run in one wave"),
        pytest.param(16, 8, 0, 2, 120, id="16 groups by 8 run in two waves"),
        pytest.param(17, 8, 0, 3, 180, id="a 17th group by 8 needs a third wave"),
        pytest.param(1, 8, 0, 1, 60, id="one full-scale group is one wave"),
        pytest.param(8, 8, 0, 1, 60, id="8 pairs by 8 are one wave"),
        pytest.param(8, 0, 1, 2, 120, id="an overflow group runs after its host"),
        pytest.param(8, 8, 1, 2, 120, id="an overflow group by 8 makes a second wave"),
        pytest.param(9, 8, 1, 2, 120, id="an overflow group shares the second wave"),
        pytest.param(0, 8, 0, 0, 0, id="no group no wave"),
        pytest.param(1024, 8, 0, 128, 7680, id="1024 nodes per node by 8"),
    ],
)
def test_the_ideal_critical_path_is_one_duration_per_wave(
    groups: int, max_concurrent: int, overflow: int, expected_waves: int, expected_ideal: float
) -> None:
    assert overhead.job_waves(groups, max_concurrent, overflow=overflow) == expected_waves
    assert overhead.ideal_seconds(groups, max_concurrent, 60, overflow=overflow) == expected_ideal


def test_the_ratio_is_wall_over_ideal_minus_one_and_absent_without_an_ideal() -> None:
    assert overhead.overhead_ratio(330, 300) == pytest.approx(0.10)
    assert overhead.overhead_ratio(12, 0) is None


def two_waves() -> dict[str, Any]:
    """Three groups by two, 60 s workloads: plan 2-10, wave one 13-80 and 13-82, wave two 82-150, record
    155-165, cleanup 170-180, Workflow 0-200."""
    return workflow_status(
        200,
        pod_node("wf[0].plan(0)", "plan", 2, 10),
        pod_node("wf[1].group(0:g0)(0)", "run-group", 13, 80, "g0"),
        pod_node("wf[1].group(1:g1)(0)", "run-group", 13, 82, "g1"),
        pod_node("wf[1].group(2:g2)(0)", "run-group", 82, 150, "g2"),
        pod_node("wf[3].record(0)", "record", 155, 165),
        pod_node("wf.onExit(0)", "cleanup", 170, 180),
    )


def test_the_breakdown_splits_the_overhead_into_steps_gaps_and_waves() -> None:
    found = overhead.breakdown(two_waves(), duration=60, max_concurrent=2)
    assert (found.groups, found.overflow_groups, found.waves) == (3, 0, 2)
    assert (found.ideal, found.wall, found.overhead) == (120, 200, 80)
    assert found.parts == {
        "lead_in": 2,  # 0 -> plan at 2
        "plan": 8,  # 2 -> 10
        "plan_to_run": 3,  # 10 -> 13
        "wave_excess": 17,  # wave one 13-82 (69 s) + wave two 82-150 (68 s) - 2 x 60
        "between_waves": 0,  # the run phase 13-150 is exactly its two waves
        "run_to_record": 5,  # 150 -> 155
        "record": 10,
        "record_to_cleanup": 5,
        "cleanup": 10,
        "tail": 20,  # 180 -> 200
    }
    assert sum(found.parts.values()) == found.overhead
    assert (found.run_pod_excess_mean, found.run_pod_excess_max) == (8, 9)  # 67, 69, 68 s pods


def test_with_a_shared_runner_its_one_pod_is_the_run_and_the_groups_are_its_suspend_nodes() -> None:
    """The same three groups by two, run by one `run-groups` pod from 13 to 150."""
    status = workflow_status(
        200,
        pod_node("wf[0].plan(0)", "plan", 2, 10),
        pod_node("wf[1].run-groups(0)", "run-groups", 13, 150),
        pod_node("wf[3].record(0)", "record", 155, 165),
        pod_node("wf.onExit(0)", "cleanup", 170, 180),
    )
    for index in range(3):
        status["nodes"][f"g{index}"] = {"type": "Suspend", "templateName": "group", "name": f"wf[1].group({index})"}
    found = overhead.breakdown(status, duration=60, max_concurrent=2)
    assert (found.groups, found.waves, found.ideal, found.overhead) == (3, 2, 120, 80)
    assert (found.parts["plan_to_run"], found.parts["wave_excess"], found.parts["between_waves"]) == (3, 17, 0)
    assert (found.parts["run_to_record"], found.parts["tail"]) == (5, 20)
    assert sum(found.parts.values()) == found.overhead
    assert found.run_pod_excess_mean is None


def test_overlapping_waves_count_negative_time_between_them() -> None:
    """Argo's parallelism is a sliding window: the third group starts when the first ends, before the second."""
    status = workflow_status(
        160,
        pod_node("wf[0].plan(0)", "plan", 2, 10),
        pod_node("wf[1].group(0:g0)(0)", "run-group", 12, 75, "g0"),
        pod_node("wf[1].group(1:g1)(0)", "run-group", 12, 80, "g1"),
        pod_node("wf[1].group(2:g2)(0)", "run-group", 76, 140, "g2"),
        pod_node("wf[3].record(0)", "record", 145, 150),
        pod_node("wf.onExit(0)", "cleanup", 152, 155),
    )
    found = overhead.breakdown(status, duration=60, max_concurrent=2)
    assert found.parts["wave_excess"] == (68 - 60) + (64 - 60)
    assert found.parts["between_waves"] == (140 - 12) - (68 + 64)  # -4: the waves overlapped by 4 s
    assert sum(found.parts.values()) == found.overhead == 160 - 120


def test_a_step_that_did_not_run_joins_its_neighbours_gaps() -> None:
    """A Workflow whose cleanup pod is missing (still listed without a finish): record -> end is all tail."""
    status = workflow_status(
        100,
        pod_node("wf[0].plan(0)", "plan", 1, 5),
        pod_node("wf[1].group(0:g0)(0)", "run-group", 7, 75, "g0"),
        pod_node("wf[3].record(0)", "record", 78, 84),
    )
    status["nodes"]["cleanup"] = {"name": "wf.onExit(0)", "type": "Pod", "templateName": "cleanup", "startedAt": at(86)}
    found = overhead.breakdown(status, duration=60, max_concurrent=0)
    assert (found.parts["cleanup"], found.parts["record_to_cleanup"], found.parts["tail"]) == (0, 0, 16)
    assert sum(found.parts.values()) == found.overhead == 40


def test_a_retried_step_spans_from_its_first_pod_to_its_last() -> None:
    status = workflow_status(
        100,
        pod_node("wf[0].plan(0)", "plan", 1, 5),
        pod_node("wf[0].plan(1)", "plan", 8, 12),
        pod_node("wf[1].group(0:g0)(0)", "run-group", 14, 80, "g0"),
    )
    found = overhead.breakdown(status, duration=60, max_concurrent=0)
    assert (found.parts["lead_in"], found.parts["plan"], found.parts["plan_to_run"]) == (1, 11, 2)


def test_an_overflow_group_is_a_second_job_in_its_hosts_pod() -> None:
    status = workflow_status(
        200,
        pod_node("wf[0].plan(0)", "plan", 1, 5),
        pod_node("wf[1].group(0:g0)(0)", "run-group", 7, 138, "g0"),  # g0, then g2-overflow
        pod_node("wf[1].group(1:g1)(0)", "run-group", 7, 71, "g1"),
    )
    found = overhead.breakdown(status, duration=60, max_concurrent=0, overflow=1)
    assert (found.groups, found.overflow_groups, found.waves, found.ideal) == (2, 1, 2, 120)
    assert found.parts["wave_excess"] == (138 - 7) - 120
    assert found.parts["between_waves"] == 0
    assert sum(found.parts.values()) == found.overhead


def trainjob(group: str, created: int, complete: int | None) -> dict[str, Any]:
    conditions = [{"type": "Complete", "status": "True", "lastTransitionTime": at(complete)}] if complete else []
    return {
        "metadata": {"name": f"wf-{group}", "creationTimestamp": at(created), "labels": {LABEL_GROUP: group}},
        "status": {"conditions": [{"type": "Created", "status": "True"}, *conditions]},
    }


def workload_pod(start: int, end: int | None, exit_code: int = 0) -> dict[str, Any]:
    if end is None:
        state: dict[str, Any] = {"running": {"startedAt": at(start)}}
    else:
        state = {"terminated": {"exitCode": exit_code, "startedAt": at(start), "finishedAt": at(end)}}
    return {"metadata": {"name": "pod"}, "status": {"containerStatuses": [{"name": "node", "state": state}]}}


def step_pod(node: str, start: int, end: int | None) -> dict[str, Any]:
    """An Argo step pod as last seen: its node-name annotation and its `main` container (plus Argo's `wait`)."""
    main: dict[str, Any] = (
        {"running": {"startedAt": at(start)}}
        if end is None
        else {"terminated": {"exitCode": 0, "startedAt": at(start), "finishedAt": at(end)}}
    )
    wait = {"terminated": {"exitCode": 0, "startedAt": at(0), "finishedAt": at(999)}}
    return {
        "metadata": {"name": "wf-run-group-1", "annotations": {overhead.NODE_NAME_ANNOTATION: node}},
        "status": {"containerStatuses": [{"name": "wait", "state": wait}, {"name": "main", "state": main}]},
    }


def test_a_run_pod_splits_into_start_ups_workload_completion_polling_and_argo() -> None:
    g0, g1 = "wf[1].group(0:g0)(0)", "wf[1].group(1:g1)(0)"
    status = workflow_status(120, pod_node(g0, "run-group", 10, 90, "g0"), pod_node(g1, "run-group", 10, 96, "g1"))
    workloads = {
        "g0": overhead.workload_times(trainjob("g0", 13, 80), [workload_pod(18, 78)]),
        "g1": overhead.workload_times(trainjob("g1", 14, 82), [workload_pod(20, 80)]),
    }
    mains = dict(overhead.main_times(pod) for pod in (step_pod(g0, 11, 86), step_pod(g1, 13, 90)))
    found = overhead.run_phases(overhead.pod_spans(status), workloads, mains)
    assert found.groups_seen == 2
    # g0: pod 10 -> main 11 -> TrainJob 13 -> workload 18-78 -> Complete 80 -> main exits 86 -> Argo's end 90
    # g1: pod 10 -> main 13 -> TrainJob 14 -> workload 20-80 -> Complete 82 -> main exits 90 -> Argo's end 96
    assert found.mean == {
        "pod_startup": 2,
        "step_startup": 1.5,
        "trainjob_startup": 5.5,
        "workload": 60,
        "completion": 2,
        "seen_late": 7,
        "argo_notice": 5,
    }
    assert (found.max["pod_startup"], found.max["seen_late"], found.max["argo_notice"]) == (3, 8, 6)


def test_a_step_pod_still_running_or_not_seen_leaves_its_group_out() -> None:
    g0 = "wf[1].group(0:g0)(0)"
    status = workflow_status(120, pod_node(g0, "run-group", 10, 90, "g0"))
    workloads = {"g0": overhead.workload_times(trainjob("g0", 13, 80), [workload_pod(18, 78)])}
    running = dict([overhead.main_times(step_pod(g0, 11, None))])
    assert running[g0] == overhead.MainTimes(overhead.parse_time(at(11)), None)
    assert overhead.run_phases(overhead.pod_spans(status), workloads, running).groups_seen == 0
    assert overhead.run_phases(overhead.pod_spans(status), workloads, {}).groups_seen == 0


def test_an_mpi_worker_killed_at_teardown_is_not_the_workload() -> None:
    """The launcher completes (exit 0) after 60 s; the workers run until JobSet deletes them (exit 137)."""
    times = overhead.workload_times(
        trainjob("g0", 5, 75), [workload_pod(8, 10 + 60), workload_pod(7, 90, 137), workload_pod(7, None)]
    )
    assert (times.running, times.exited) == (overhead.parse_time(at(8)), overhead.parse_time(at(70)))


def test_a_group_whose_trainjob_was_not_seen_whole_is_left_out() -> None:
    g0 = "wf[1].group(0:g0)(0)"
    status = workflow_status(120, pod_node(g0, "run-group", 10, 90, "g0"))
    mains = dict([overhead.main_times(step_pod(g0, 11, 86))])
    unfinished = {"g0": overhead.workload_times(trainjob("g0", 13, None), [workload_pod(18, 78)])}
    assert overhead.run_phases(overhead.pod_spans(status), unfinished, mains).groups_seen == 0
    assert overhead.run_phases(overhead.pod_spans(status), {}, mains).groups_seen == 0


def test_a_trainjob_is_matched_to_its_group_by_label() -> None:
    assert overhead.group_of(trainjob("g12", 1, 2)) == "g12"
    assert overhead.group_of({"metadata": {}}) == ""


def test_a_shared_runners_group_splits_into_its_trainjob_and_the_runner_completing_its_node() -> None:
    """g0: node created at 5, TrainJob created at 12, workload 14-74, Complete at 75, node completed at 78; g1
    not yet complete."""
    status = workflow_status(120)
    status["nodes"]["n0"] = {
        "type": "Suspend",
        "templateName": "group",
        "startedAt": at(5),
        "finishedAt": at(78),
        "inputs": {"parameters": [{"name": "group", "value": "g0"}]},
    }
    status["nodes"]["n1"] = status["nodes"]["n0"] | {"inputs": {"parameters": [{"name": "group", "value": "g1"}]}}
    workloads = {
        "g0": overhead.workload_times(trainjob("g0", 12, 75), [workload_pod(14, 74)]),
        "g1": overhead.workload_times(trainjob("g1", 12, None), [workload_pod(14, None)]),
    }
    found = overhead.shared_phases(status, workloads)
    assert found.groups_seen == 1
    assert found.mean == {"step_startup": 7, "trainjob_startup": 2, "workload": 60, "completion": 1, "seen_late": 3}


def test_a_shared_runners_wave_is_timed_on_its_pod_from_the_group_nodes_creation_to_the_last_completion() -> None:
    """The runner pod runs 20-200; Argo created the group nodes at 25 and 90, completed at 150 and 190."""
    status = workflow_status(220, pod_node("wf[1].run-groups(0)", "run-groups", 20, 200))
    for key, (created, completed) in {"n0": (25, 150), "n1": (90, 190)}.items():
        status["nodes"][key] = {
            "type": "Suspend",
            "templateName": "group",
            "startedAt": at(created),
            "finishedAt": at(completed),
        }
    assert overhead.group_node_times(status) == overhead.GroupNodeTimes(
        nodes=2, first_created=5, last_created=70, last_completed=170, runner_ended=180
    )
    assert overhead.group_node_times(workflow_status(220, pod_node("wf[1].run-group(0)", "run-group", 20, 80))) is None


def test_a_workflow_whose_nodes_argo_compressed_is_read_like_one_whose_nodes_are_plain() -> None:
    """At about a thousand groups Argo moves the node map into `status.compressedNodes`; the benchmark once
    read an empty `status.nodes` there and reported no groups, no waves and no step pods."""
    node = {"id": "wf-1", "type": "Suspend", "templateName": overhead.GROUP_NODE_TEMPLATE, "phase": "Succeeded"}
    compressed = {
        "status": {"phase": "Succeeded", "compressedNodes": workflows.encode_compressed_nodes({"wf-1": node})}
    }
    plain = overhead.with_plain_nodes(compressed)
    assert plain["status"]["nodes"] == {"wf-1": node}
    assert "compressedNodes" not in plain["status"]
    assert overhead.group_node_count(plain["status"]) == 1
    already = {"status": {"nodes": {"wf-1": node}}}
    assert overhead.with_plain_nodes(already) == already


def test_planning_time_is_each_planning_templates_longest_pod() -> None:
    status = workflow_status(
        200,
        pod_node("wf[0].plan", "plan", 2, 9),
        pod_node("wf[1].rounds[0].plan-round", "plan-round", 10, 14),
        pod_node("wf[1].rounds[1].plan-round", "plan-round", 60, 71),
        pod_node("wf[2].record", "record", 180, 190),
    )
    assert overhead.longest_pods(status, ("plan", "plan-round")) == {"plan": 7.0, "plan-round": 11.0}
    assert overhead.longest_pods(status, ("cleanup",)) == {}


def test_workload_pods_are_keyed_by_their_jobset_which_is_named_after_the_trainjob() -> None:
    def pod(name: str, jobset: str | None) -> dict[str, Any]:
        labels = {} if jobset is None else {"jobset.sigs.k8s.io/jobset-name": jobset}
        return {"metadata": {"name": name, "labels": labels}}

    found = overhead.pods_by_jobset([pod("a-0", "tj-a"), pod("b-0", "tj-b"), pod("a-1", "tj-a"), pod("x", None)])

    assert {key: [p["metadata"]["name"] for p in pods] for key, pods in found.items()} == {
        "tj-a": ["a-0", "a-1"],
        "tj-b": ["b-0"],
        "": ["x"],
    }
