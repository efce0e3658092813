"""The arithmetic of the orchestration-overhead benchmark (pure): the ideal critical path of a category, and
where a category Workflow's wall time went, from the timestamps Argo, Trainer and the pods record.

Why apart from `tests/bench/bench_overhead.py`: the driver talks to the simulated cluster; what it prints is
decided here, from plain dictionaries (a Workflow's `status`, TrainJob and pod objects as the API returns
them), so every figure can be checked on hand-made timestamps without a cluster.

The ideal: the simulator runs every healthy workload for exactly `durationSeconds`, and a category runs its
groups in waves of `maxConcurrent` (0: all at once), an overflow group in its host group's step right after
the host's own job (see `nvcre_argo/plan/grouping.py`). So the ideal critical path is `waves x duration`,
where an overflow group is one more job and makes at least two waves; everything else in the category
Workflow's wall time is orchestration. It splits exactly (to Argo's one-second timestamps) as

    wall = ideal + lead-in (Workflow start -> plan pod) + plan + plan->run gap + wave excess
           + between waves + run->record gap + record + record->cleanup gap + cleanup + tail

where a wave is `maxConcurrent` consecutive run-group pods in start order, the wave excess is the sum of
their spans beyond the ideal (a host pod runs two jobs, so its wave spans two durations), and "between
waves" is the run phase's span beyond the sum of its waves (negative when Argo's sliding window starts a pod
of the next wave before the last of the current one ends, or waves overlap). The gaps are Argo's
reconciliation between steps.

A run-group pod's own time splits, through its `main` container, the TrainJob it created and the workload
pods it ran, into pod start-up (Argo's node start -> the step's `main` container running: scheduling, Argo's
init container, the container start), step start-up (-> TrainJob created: the step's process, its reads and
the TrainingRuntime), TrainJob start-up (-> the workload container running: Trainer, JobSet, Job, scheduling,
the kubelet), the workload, completion (workload exit -> TrainJob `Complete`: JobSet and Trainer noticing),
seen late (`Complete` -> `main` exited: the step's 10 s polling, then its result ConfigMap and outputs) and
Argo's notice (`main` exited -> the node's end: Argo's wait container saving the outputs, the controller).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from nvcre_argo.names import JOBSET_NAME_LABEL, LABEL_GROUP
from nvcre_argo.watch import workflows

RUN_TEMPLATE: Final = "run-group"
# With `--shared-runner`: one pod runs every group, each group a suspend node (`steps.shared_runner`).
SHARED_RUN_TEMPLATE: Final = "run-groups"
GROUP_NODE_TEMPLATE: Final = "group"
PLAN_TEMPLATE: Final = "plan"
RECORD_TEMPLATE: Final = "record"
CLEANUP_TEMPLATE: Final = "cleanup"
# The order of the breakdown's parts; they add up to the overhead.
PARTS: Final = (
    "lead_in",
    "plan",
    "plan_to_run",
    "wave_excess",
    "between_waves",
    "run_to_record",
    "record",
    "record_to_cleanup",
    "cleanup",
    "tail",
)
STEPS: Final = (
    ("plan", PLAN_TEMPLATE),
    ("run", RUN_TEMPLATE),
    ("record", RECORD_TEMPLATE),
    ("cleanup", CLEANUP_TEMPLATE),
)
GAP_AFTER: Final = {"plan": "plan_to_run", "run": "run_to_record", "record": "record_to_cleanup", "cleanup": "tail"}
PHASES: Final = (
    "pod_startup",
    "step_startup",
    "trainjob_startup",
    "workload",
    "completion",
    "seen_late",
    "argo_notice",
)
NODE_NAME_ANNOTATION: Final = "workflows.argoproj.io/node-name"  # on a step pod: its Argo node's name


def waves(groups: int, max_concurrent: int) -> int:
    """How many waves `groups` groups take under `maxConcurrent` (0: unlimited, one wave)."""
    if groups <= 0:
        return 0
    return math.ceil(groups / max_concurrent) if max_concurrent > 0 else 1


def job_waves(groups: int, max_concurrent: int, *, overflow: int = 0) -> int:
    """Waves of one workload duration the ideal run takes: `groups + overflow` jobs by `maxConcurrent`, and
    at least two when there is an overflow group (it runs after its host, in the host's step)."""
    return max(waves(groups + overflow, max_concurrent), 2 if overflow else 0)


def ideal_seconds(groups: int, max_concurrent: int, duration: float, *, overflow: int = 0) -> float:
    """The ideal critical path of one category: each wave lasts exactly the workload's duration."""
    return job_waves(groups, max_concurrent, overflow=overflow) * duration


def overhead_ratio(wall: float, ideal: float) -> float | None:
    """wall / ideal - 1, or None when there is no ideal (no group ran)."""
    return wall / ideal - 1 if ideal > 0 else None


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp as Kubernetes and Argo write it (`2026-12-01T13:00:00Z`)."""
    return datetime.fromisoformat(text)


def seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (parse_time(end) - parse_time(start)).total_seconds()


@dataclass(frozen=True)
class Span:
    """One Argo Pod node: its template, start and end (datetimes), and for a run-group pod its group."""

    template: str
    started: datetime
    finished: datetime
    group: str = ""
    name: str = ""

    @property
    def seconds(self) -> float:
        return (self.finished - self.started).total_seconds()


def pod_spans(status: Mapping[str, Any]) -> list[Span]:
    """The Pod nodes of a Workflow's `status.nodes` that started and finished, in start order."""
    found = []
    for node in (status.get("nodes") or {}).values():
        if node.get("type") != "Pod" or not node.get("startedAt") or not node.get("finishedAt"):
            continue
        parameters = {item["name"]: item.get("value", "") for item in (node.get("inputs") or {}).get("parameters", [])}
        found.append(
            Span(
                template=str(node.get("templateName", "")),
                started=parse_time(node["startedAt"]),
                finished=parse_time(node["finishedAt"]),
                group=str(parameters.get("group", "")),
                name=str(node.get("name", "")),
            )
        )
    return sorted(found, key=lambda span: (span.started, span.finished))


def longest_pods(status: Mapping[str, Any], templates: Iterable[str]) -> dict[str, float]:
    """Per template of `templates` that ran a pod in this Workflow status, its longest pod's seconds (e.g. how
    long planning took: `plan`, or a diagnose loop's slowest `plan-round`)."""
    wanted = set(templates)
    found: dict[str, float] = {}
    for span in pod_spans(status):
        if span.template in wanted:
            found[span.template] = max(span.seconds, found.get(span.template, 0.0))
    return found


def with_plain_nodes(workflow: Mapping[str, Any]) -> dict[str, Any]:
    """The Workflow with its node map in `status.nodes`, also when Argo compressed it into
    `status.compressedNodes` (a category of about a thousand groups): every reader here reads `status.nodes`."""
    status = dict(workflow.get("status") or {})
    status["nodes"] = workflows.nodes(workflow)
    status.pop("compressedNodes", None)
    return {**workflow, "status": status}


def group_nodes(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A shared runner's groups: its Workflow's `group` suspend nodes."""
    nodes = (status.get("nodes") or {}).values()
    return [node for node in nodes if node.get("type") == "Suspend" and node.get("templateName") == GROUP_NODE_TEMPLATE]


def group_node_count(status: Mapping[str, Any]) -> int:
    """How many groups a shared runner ran."""
    return len(group_nodes(status))


@dataclass(frozen=True)
class GroupNodeTimes:
    """A shared runner's wave on the clock of its `run-groups` pod (seconds after the pod started): when Argo
    created the first and the last group node, when the last group node was completed, and when the pod
    ended. It tells a wave that waited for Argo to create its groups from one whose groups ran long."""

    nodes: int
    first_created: float
    last_created: float
    last_completed: float
    runner_ended: float


def group_node_times(status: Mapping[str, Any]) -> GroupNodeTimes | None:
    """The `GroupNodeTimes` of a finished shared-runner Workflow; None without a runner pod or group nodes."""
    runner = _envelope(span for span in pod_spans(status) if span.template == SHARED_RUN_TEMPLATE)
    nodes = group_nodes(status)
    created = [parse_time(node["startedAt"]) for node in nodes if node.get("startedAt")]
    completed = [parse_time(node["finishedAt"]) for node in nodes if node.get("finishedAt")]
    if runner is None or not created or not completed:
        return None
    start, end = runner
    return GroupNodeTimes(
        nodes=len(nodes),
        first_created=_gap(start, min(created)),
        last_created=_gap(start, max(created)),
        last_completed=_gap(start, max(completed)),
        runner_ended=_gap(start, end),
    )


def split_waves(spans: Sequence[Span], max_concurrent: int) -> list[list[Span]]:
    """Run-group pods in waves: `maxConcurrent` consecutive pods in start order (all when 0)."""
    size = max_concurrent if max_concurrent > 0 else max(len(spans), 1)
    return [list(spans[index : index + size]) for index in range(0, len(spans), size)]


@dataclass(frozen=True)
class Breakdown:
    """Where one category Workflow's wall time went (seconds); `parts` add up to `overhead`."""

    groups: int
    overflow_groups: int
    waves: int
    ideal: float
    wall: float
    overhead: float
    ratio: float | None
    parts: dict[str, float]
    run_pod_excess_mean: float | None  # a run-group pod's time beyond the workload duration
    run_pod_excess_max: float | None


def _envelope(spans: Iterable[Span]) -> tuple[datetime, datetime] | None:
    """First start and last end of some spans (a retried step has several pods)."""
    listed = list(spans)
    if not listed:
        return None
    return min(span.started for span in listed), max(span.finished for span in listed)


def _span_of(spans: Sequence[Span]) -> tuple[datetime, datetime]:
    found = _envelope(spans)
    assert found is not None
    return found


def _gap(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()


def breakdown(status: Mapping[str, Any], *, duration: float, max_concurrent: int, overflow: int = 0) -> Breakdown:
    """Split a finished category Workflow's wall time (its `status`) into the ideal and the parts of
    `PARTS`; a step that did not run counts zero and its neighbours' gaps join. `overflow`: how many
    overflow groups ran (inside their hosts' pods, so Argo's nodes do not show them)."""
    started, finished = parse_time(status["startedAt"]), parse_time(status["finishedAt"])
    spans = pod_spans(status)
    shared = any(span.template == SHARED_RUN_TEMPLATE for span in spans)
    runs = [span for span in spans if span.template == RUN_TEMPLATE]
    regular = group_node_count(status) if shared else len(runs)
    ideal = ideal_seconds(regular, max_concurrent, duration, overflow=overflow)
    parts = dict.fromkeys(PARTS, 0.0)
    cursor, gap = started, "lead_in"
    for part, step_template in STEPS:
        template = SHARED_RUN_TEMPLATE if part == "run" and shared else step_template
        envelope = _envelope(span for span in spans if span.template == template)
        if envelope is None:
            continue
        begin, end = envelope
        parts[gap] += _gap(cursor, begin)  # the gap before a step counts after the last step that ran
        if part == "run" and shared:
            # One pod ran every wave: its time beyond the ideal is the waves' excess and what lies between them.
            parts["wave_excess"] = _gap(begin, end) - ideal
        elif part == "run":
            grouped = split_waves(runs, max_concurrent)
            spans_total = sum(_gap(*_span_of(wave)) for wave in grouped)
            parts["wave_excess"] = spans_total - ideal
            parts["between_waves"] = _gap(begin, end) - spans_total
        else:
            parts[part] = _gap(begin, end)
        cursor, gap = end, GAP_AFTER[part]
    parts["tail"] += _gap(cursor, finished)
    wall = _gap(started, finished)
    excess = [span.seconds - duration for span in runs]
    return Breakdown(
        groups=regular,
        overflow_groups=overflow,
        waves=job_waves(regular, max_concurrent, overflow=overflow),
        ideal=ideal,
        wall=wall,
        overhead=wall - ideal,
        ratio=overhead_ratio(wall, ideal),
        parts=parts,
        run_pod_excess_mean=statistics.mean(excess) if excess else None,
        run_pod_excess_max=max(excess) if excess else None,
    )


# ------------------------------------------------------------------------------------------- TrainJobs


@dataclass(frozen=True)
class WorkloadTimes:
    """One TrainJob's life as its objects recorded it (None: not seen)."""

    created: datetime | None
    running: datetime | None  # the last completed container's start: the workload's own clock starts
    exited: datetime | None  # the last completed container's end
    complete: datetime | None  # the TrainJob's `Complete` condition


def pods_by_jobset(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Workload pods keyed by their JobSet's name, which is their TrainJob's."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        found.setdefault(str(labels.get(JOBSET_NAME_LABEL, "")), []).append(pod)
    return found


def workload_times(trainjob: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> WorkloadTimes:
    """From a TrainJob and its JobSet pods as last seen: the containers that completed (exit 0) are the
    workload (an MPI launcher, a DCGM or training rank); MPI workers that run until deleted are not."""
    starts, ends = [], []
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated") or {}
            if terminated.get("exitCode") == 0 and terminated.get("startedAt") and terminated.get("finishedAt"):
                starts.append(parse_time(terminated["startedAt"]))
                ends.append(parse_time(terminated["finishedAt"]))
    conditions = (trainjob.get("status") or {}).get("conditions") or []
    complete = [item for item in conditions if item.get("type") == "Complete" and item.get("status") == "True"]
    created = (trainjob.get("metadata") or {}).get("creationTimestamp")
    return WorkloadTimes(
        created=parse_time(created) if created else None,
        running=max(starts) if starts else None,
        exited=max(ends) if ends else None,
        complete=parse_time(complete[0]["lastTransitionTime"]) if complete else None,
    )


@dataclass(frozen=True)
class MainTimes:
    """A step pod's `main` container: when the step's own process started and ended (None: not seen)."""

    started: datetime | None
    finished: datetime | None


def main_times(pod: Mapping[str, Any]) -> tuple[str, MainTimes]:
    """A step pod as last seen: its Argo node's name and its `main` container's start and end."""
    node = str(((pod.get("metadata") or {}).get("annotations") or {}).get(NODE_NAME_ANNOTATION, ""))
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") != "main":
            continue
        state = container.get("state") or {}
        started = (state.get("running") or state.get("terminated") or {}).get("startedAt")
        finished = (state.get("terminated") or {}).get("finishedAt")
        return node, MainTimes(parse_time(started) if started else None, parse_time(finished) if finished else None)
    return node, MainTimes(None, None)


@dataclass(frozen=True)
class RunPhases:
    """A run-group pod's time split by its `main` container and its TrainJob (seconds, over the groups seen
    whole)."""

    groups_seen: int
    mean: dict[str, float] = field(default_factory=dict)
    max: dict[str, float] = field(default_factory=dict)


def run_phases(
    spans: Sequence[Span], workloads: Mapping[str, WorkloadTimes], mains: Mapping[str, MainTimes]
) -> RunPhases:
    """`PHASES` per run-group pod whose `main` container (keyed by Argo node name) was seen start and end and
    whose TrainJob (keyed by group) was seen from creation to `Complete`: Argo's pod start -> main running
    -> TrainJob created -> workload running -> workload exited -> `Complete` -> main exited -> Argo's end."""
    rows: list[dict[str, float]] = []
    for span in spans:
        if span.template != RUN_TEMPLATE:
            continue
        times, main = workloads.get(span.group), mains.get(span.name)
        if times is None or main is None:
            continue
        middle = [main.started, times.created, times.running, times.exited, times.complete, main.finished]
        points = [span.started, *(point for point in middle if point is not None), span.finished]
        if len(points) != len(PHASES) + 1:
            continue  # not seen whole
        rows.append({name: _gap(a, b) for name, a, b in zip(PHASES, points[:-1], points[1:], strict=True)})
    if not rows:
        return RunPhases(groups_seen=0)
    return RunPhases(
        groups_seen=len(rows),
        mean={name: statistics.mean(row[name] for row in rows) for name in PHASES},
        max={name: max(row[name] for row in rows) for name in PHASES},
    )


def shared_phases(status: Mapping[str, Any], workloads: Mapping[str, WorkloadTimes]) -> RunPhases:
    """With a shared runner, the part of `PHASES` a group still has, per `group` suspend node whose TrainJob was
    seen from creation to `Complete`: Argo created the node -> the runner created its TrainJob (`step_startup`:
    the runner pod's start for the first groups, then its notice of the node, the group's thread and the
    TrainJob's creation) -> workload running -> exited -> `Complete` -> the runner completed the group's node
    (`seen_late`: its notice of the end, and the patch). There is no step pod per group, so no pod start-up and
    no Argo notice of a pod's end. With `maxConcurrent` the node's start is before Argo's semaphore let it run,
    so `step_startup` then includes the wait for a slot."""
    rows: list[dict[str, float]] = []
    for node in group_nodes(status):
        parameters = {item["name"]: item.get("value", "") for item in (node.get("inputs") or {}).get("parameters", [])}
        times = workloads.get(str(parameters.get("group", "")))
        started, finished = node.get("startedAt"), node.get("finishedAt")
        if times is None or not started or not finished:
            continue
        points = [parse_time(started), times.created, times.running, times.exited, times.complete, parse_time(finished)]
        if any(point is None for point in points):
            continue  # not seen whole
        seen = [point for point in points if point is not None]
        names = ("step_startup", "trainjob_startup", "workload", "completion", "seen_late")
        rows.append({name: _gap(a, b) for name, a, b in zip(names, seen[:-1], seen[1:], strict=True)})
    if not rows:
        return RunPhases(groups_seen=0)
    return RunPhases(
        groups_seen=len(rows),
        mean={name: statistics.mean(row[name] for row in rows) for name in rows[0]},
        max={name: max(row[name] for row in rows) for name in rows[0]},
    )


def group_of(trainjob: Mapping[str, Any]) -> str:
    """The group a TrainJob ran for, from the label the run step puts on it."""
    return str(((trainjob.get("metadata") or {}).get("labels") or {}).get(LABEL_GROUP, ""))
