"""One scorecard run on the simulated cluster: the Certification it applies, the faults it injects, what it
reads back afterwards (what a user reads), and the cluster's state between runs.

Why apart from `tests/bench/scorecard.py`: this is the part that talks to the cluster; the driver around it
plans the runs, starts one cluster per size and prints the figures. The choices made here (the categories'
options, the fault defaults, dropping node marks after the first category, repairing a leftover fault
condition between runs) are explained in the driver's docstring, which is the scorecard's documentation.
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nvcre_argo.catalog.loader import builtin_entries_dir
from nvcre_argo.contract import TEMPLATE_PLAN, TEMPLATE_PLAN_ROUND
from nvcre_argo.kube.resources import TRAINJOBS
from nvcre_argo.names import LABEL_RECORD, LABEL_WORKFLOW
from nvcre_argo.results import (
    FAILED_NODES_KEY,
    RECORD_GROUP_RESULT,
    SUCCEEDED_NODES_KEY,
    decode_failed_nodes,
    decode_succeeded_nodes,
    read_group_result,
)
from tests.bench import overhead, probes
from tests.bench.scorecard_faults import HEALTH_CONDITION, HEALTH_TAINT, RunSpec
from tests.bench.scorecard_scoring import (
    CATEGORY_ORDER,
    CategoryObservation,
    CrashGroup,
    NodeVerdict,
    crash_groups,
    expected_result,
    score_category,
)
from tests.harness.namespaces import namespace_for_test
from tests.sim import scenario
from tests.sim.cluster import SimCluster

DEFAULT_MAX_CONCURRENT: Final = 16
TIMEOUT_PER_JOB: Final = "90s"
BUS_BANDWIDTH_THRESHOLD: Final = "value >= 100"
STEP_TIME_THRESHOLD: Final = "value <= 5"
FAULT_DEFAULTS: Final = {"durationSeconds": 4, "busBandwidthGBps": 380, "stepTimeMs": 2000}
CERTIFICATION: Final = "gpu-cluster-cert"
NODES_CLEAN_TIMEOUT_S: Final = 300.0
RESULT_TIMEOUT_S: Final = 180.0
KUBELET_CONDITIONS: Final = frozenset({"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"})
JOBSET_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
MESSAGE_CHARS: Final = 400
# The scorecard's health system marks a node by cordoning it, tainting it `HEALTH_TAINT`, setting the
# condition `HEALTH_CONDITION` or stopping its kubelet; this expression catches each of them.
HEALTH_EXPRESSION: Final = (
    "node.spec.unschedulable == true"
    f" || node.spec.taints.exists(t, t.key == '{HEALTH_TAINT['key']}')"
    f" || node.status.conditions.exists(c, (c.type == '{HEALTH_CONDITION['type']}' && c.status == 'True')"
    " || (c.type == 'Ready' && c.status != 'True'))"
)
VARIANTS: Final = {"communication": "nccl-all-reduce", "diagnostics": "dcgm-level1", "training": "nemotron5-8b"}
CommunicationScale = Literal["diagnose", "pairs"]
COMMUNICATION_SCALES: Final[Mapping[str, Mapping[str, Any]]] = {
    "diagnose": {"testScale": "diagnose"},
    "pairs": {"nodesPerJob": 2},
}
TRAINING_RESOURCES: Final = {"limits": {"cpu": "6", "memory": "48Gi"}, "requests": {"cpu": "4", "memory": "32Gi"}}


@dataclass(frozen=True)
class Settings:
    """What one scorecard varies: the seed of the fault placement; the cap on the groups each category runs
    at once; whether the training category runs; which of the planned runs to play and which fault kinds to
    inject (None: all; a few kinds fill a run with copies of each, e.g. crashes only, to measure one rate);
    how the communication category groups its nodes (`COMMUNICATION_SCALES`)."""

    seed: int = 1
    max_concurrent: int | None = DEFAULT_MAX_CONCURRENT
    training: bool = False
    runs: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    communication: CommunicationScale = "diagnose"

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(domain for domain in CATEGORY_ORDER if self.training or domain != "training")


def categories(settings: Settings) -> list[dict[str, Any]]:
    """The categories of every run (see `tests/bench/scorecard.py`), training only when asked for."""
    every: dict[str, dict[str, Any]] = {
        "communication": {
            "variant": VARIANTS["communication"],
            "options": {
                **COMMUNICATION_SCALES[settings.communication],
                "timeoutPerJob": TIMEOUT_PER_JOB,
                "thresholds": {"busBandwidthGBps": BUS_BANDWIDTH_THRESHOLD},
            },
        },
        "diagnostics": {"variant": VARIANTS["diagnostics"], "options": {"timeoutPerJob": TIMEOUT_PER_JOB}},
        "training": {
            "variant": VARIANTS["training"],
            "options": {
                "nodesPerJob": 2,
                "maxSteps": 20,
                "timeoutPerJob": TIMEOUT_PER_JOB,
                "thresholds": {"avgStepTimeSec": STEP_TIME_THRESHOLD},
                "resources": TRAINING_RESOURCES,
            },
        },
    }
    found: list[dict[str, Any]] = [{"domain": domain, **every[domain]} for domain in settings.domains]
    if settings.max_concurrent:
        for category in found:
            category["options"]["maxConcurrent"] = settings.max_concurrent
    return found


def certification(namespace: str, settings: Settings) -> dict[str, Any]:
    return scenario.example_certification(namespace, categories=categories(settings))


def write_health_catalog(directory: Path) -> Path:
    """A `--catalog` directory whose entries are the built-in ones of `VARIANTS` with `HEALTH_EXPRESSION`,
    as a site whose GPU health agent taints and conditions nodes would configure its catalog."""
    builtin = builtin_entries_dir()
    for domain, variant in VARIANTS.items():
        text = (builtin / domain / f"{variant}.yaml").read_text(encoding="utf-8")
        target = directory / domain / f"{variant}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{text.rstrip()}\nhealthExpression: {json.dumps(HEALTH_EXPRESSION)}\n", encoding="utf-8")
    return directory


@dataclass
class RunRecord:
    """Everything one run produced, as the JSON file holds it."""

    name: str
    namespace: str = ""
    seconds: float = 0.0
    result: str = ""
    expected_result: str = ""
    error: str = ""
    injections: list[dict[str, Any]] = field(default_factory=list)
    categories: list[dict[str, Any]] = field(default_factory=list)
    verdicts: list[NodeVerdict] = field(default_factory=list)
    crash_groups: list[CrashGroup] = field(default_factory=list)
    leftover_trainjobs: list[str] = field(default_factory=list)
    marks_dropped_late: list[str] = field(default_factory=list)
    workflow_tree: str = ""
    largest_objects: list[dict[str, Any]] = field(default_factory=list)  # `footprint.LargestObject`s
    step_memory_mib: dict[str, float] = field(default_factory=dict)  # per step command, its peak RSS


def run_scenario(
    sim: SimCluster, api: k8s.ApiClient, spec: RunSpec, *, size: int, settings: Settings, timeout_s: float
) -> RunRecord:
    """One Certification in a namespace of its own: inject, run, read, score; the namespace is being deleted
    when it returns (the next run does not wait for that: every workload of this one has ended, and its node
    marks are undone as soon as the namespace terminates). A run that cannot complete is returned with its
    error."""
    record = RunRecord(name=spec.name, expected_result=expected_result(spec))
    record.injections = [{"node": item.node, "kind": item.kind, **item.entry} for item in spec.injections]
    began = time.monotonic()
    with namespace_for_test(api, f"scorecard-{size}-{spec.name}") as namespace:
        record.namespace = namespace
        try:
            _execute(sim, api, spec, namespace, record, settings=settings, timeout_s=timeout_s)
        except (scenario.ScenarioError, ApiException, RuntimeError) as error:
            record.error = f"{type(error).__name__}: {str(error)[:2000]}"
        record.seconds = time.monotonic() - began
    return record


def _execute(
    sim: SimCluster,
    api: k8s.ApiClient,
    spec: RunSpec,
    namespace: str,
    record: RunRecord,
    *,
    settings: Settings,
    timeout_s: float,
) -> None:
    scenario.install(sim.kubeconfig, namespace, submit=False)
    scenario.write_fault_plan(api, namespace, yaml.safe_dump(spec.fault_plan(FAULT_DEFAULTS), sort_keys=False))
    document = certification(namespace, settings)
    scenario.apply_certification(api, document)
    with tempfile.TemporaryDirectory(prefix="scorecard-catalog-") as directory:
        workflow = scenario.compile_workflow(sim.kubeconfig, document, [write_health_catalog(Path(directory))])
    with (
        probes.LastSeen(api, TRAINJOBS, namespace, what="TrainJobs") as trainjobs,
        probes.StepMemory() as memory,
    ):
        parent = scenario.submit(api, workflow)
        if spec.has_marks:
            record.marks_dropped_late = drop_marks_after_first_category(
                api, namespace, parent, spec, timeout_s=timeout_s
            )
        scenario.wait_workflow_done(api, namespace, parent, timeout_s=timeout_s)
    record.step_memory_mib = dict(sorted(memory.peaks_mib.items()))
    record.largest_objects = [asdict(item) for item in probes.largest_objects(api, namespace, trainjobs.values())]
    found = scenario.wait_certification_result(api, namespace, CERTIFICATION, timeout_s=RESULT_TIMEOUT_S)
    status = found["status"]
    record.result = str(status.get("result", ""))
    kind_of = spec.kind_of()
    for category in status.get("categoryStatuses") or []:
        observed = read_category(api, namespace, category)
        workflow = scenario.get_workflow(api, namespace, (category.get("workflowRef") or {}).get("name", ""))
        record.categories.append(
            {
                **_category_json(observed, category),
                "seconds": workflow_seconds(workflow),
                "planSeconds": plan_seconds(workflow),
            }
        )
        record.verdicts += score_category(kind_of, observed)
        record.crash_groups += crash_groups(spec, observed)
    record.leftover_trainjobs = scenario.unfinished_trainjobs(api, namespace)
    record.workflow_tree = scenario.workflow_tree(api, namespace)


def drop_marks_after_first_category(
    api: k8s.ApiClient, namespace: str, parent: str, spec: RunSpec, *, timeout_s: float
) -> list[str]:
    """Once the first category's Workflow has ended, rewrite the fault plan without its node marks, and
    return the workload pods of later categories that had already started (none is expected: the next
    category still has to be created and planned).

    Why: a health system marks a node once, and the mark stays until the run's namespace is deleted. The
    simulator makes the mark again on every workload the node runs; for a taint the API server refuses the
    duplicate and the sim kubelet fails the pod, a failure the product would be credited with. Without its
    entry the node simply stays marked (and its later workloads are not stretched by the health grace)."""
    first = f"{parent}-0"
    scenario.wait_for(
        f"the first category Workflow {first} to end",
        lambda: scenario.workflow_phase(api, namespace, first) in scenario.FINAL_PHASES,
        timeout_s=timeout_s,
        describe=lambda: scenario.workflow_tree(api, namespace),
    )
    plan = yaml.safe_dump(spec.fault_plan(FAULT_DEFAULTS, marks=False), sort_keys=False)
    scenario.write_fault_plan(api, namespace, plan)
    pods = k8s.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=JOBSET_LABEL).items
    return sorted(pod.metadata.name for pod in pods if not pod.metadata.labels[JOBSET_LABEL].startswith(f"{first}-"))


def read_category(api: k8s.ApiClient, namespace: str, category: Mapping[str, Any]) -> CategoryObservation:
    """What a user reads about one category: the ConfigMaps its status points to, and its groups."""
    core = k8s.CoreV1Api(api)
    failed: dict[str, dict[str, str]] = {}
    succeeded: list[str] = []
    if category.get("failedNodesRef"):
        configmap = core.read_namespaced_config_map(category["failedNodesRef"]["name"], namespace)
        for node in decode_failed_nodes(_binary(configmap, FAILED_NODES_KEY)):
            failed.setdefault(node.name, {})[node.reason] = node.message
    if category.get("succeededNodesRef"):
        configmap = core.read_namespaced_config_map(category["succeededNodesRef"]["name"], namespace)
        succeeded = decode_succeeded_nodes(_binary(configmap, SUCCEEDED_NODES_KEY))
    workflow = (category.get("workflowRef") or {}).get("name", "")
    return CategoryObservation(
        domain=str(category.get("domain", "")),
        variant=str(category.get("variant", "")),
        status=str(category.get("status", "")),
        failed=failed,
        succeeded=frozenset(succeeded),
        groups=read_groups(api, namespace, workflow) if workflow else (),
    )


def read_groups(api: k8s.ApiClient, namespace: str, workflow: str) -> tuple[tuple[str, ...], ...]:
    """The node groups a category Workflow ran, from its group-result ConfigMaps."""
    selector = f"{LABEL_RECORD}={RECORD_GROUP_RESULT},{LABEL_WORKFLOW}={workflow}"
    found = k8s.CoreV1Api(api).list_namespaced_config_map(namespace, label_selector=selector).items
    groups = {tuple(sorted(read_group_result(api.sanitize_for_serialization(item))["nodes"])) for item in found}
    return tuple(sorted(groups))


def workflow_seconds(workflow: Mapping[str, Any] | None) -> float | None:
    """How long a finished Workflow ran, from its status (None when it did not finish)."""
    status = (workflow or {}).get("status") or {}
    if not status.get("startedAt") or not status.get("finishedAt"):
        return None
    started, finished = (datetime.fromisoformat(status[key]) for key in ("startedAt", "finishedAt"))
    return (finished - started).total_seconds()


def plan_seconds(workflow: Mapping[str, Any] | None) -> dict[str, float]:
    """How long a category's planning took: its `plan` step and its slowest `plan-round` (a diagnose loop's,
    or confirmation's), in seconds."""
    if not workflow:
        return {}
    status = overhead.with_plain_nodes(workflow)["status"]
    return overhead.longest_pods(status, (TEMPLATE_PLAN, TEMPLATE_PLAN_ROUND))


def _binary(configmap: k8s.V1ConfigMap, key: str) -> bytes:
    return base64.b64decode((configmap.binary_data or {})[key])


def _category_json(observed: CategoryObservation, status: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "domain": observed.domain,
        "variant": observed.variant,
        "status": observed.status,
        "message": status.get("message"),
        "failed": {
            node: {reason: message[:MESSAGE_CHARS] for reason, message in sorted(reasons.items())}
            for node, reasons in sorted(observed.failed.items())
        },
        "succeeded": sorted(observed.succeeded),
        "groups": [list(group) for group in observed.groups],
        "diagnose": status.get("diagnose"),  # a diagnose category's rounds, jobs and node-jobs
    }


def wait_nodes_clean(api: k8s.ApiClient, names: Sequence[str], *, timeout_s: float = NODES_CLEAN_TIMEOUT_S) -> None:
    """Wait until every node (GPU and system) is Ready, schedulable and untainted, with no fault condition:
    the previous run's health marks are undone (by the sim kubelet, once its namespace terminates) and the
    node controller has lifted its not-ready taints, so no run inherits another's faults. A condition the sim
    kubelet leaves behind is removed here, as an operator repairing the node would."""
    wanted = set(names)

    def dirty() -> list[str]:
        nodes = [node for node in k8s.CoreV1Api(api).list_node().items if node.metadata.name in wanted]
        for node in nodes:
            _remove_extra_conditions(api, node)
        return sorted(node.metadata.name for node in nodes if not _clean(node))

    scenario.wait_for(
        "every node healthy again", lambda: not dirty(), timeout_s=timeout_s, describe=lambda: f"{dirty()}"
    )


def extra_conditions(node: k8s.V1Node) -> list[str]:
    """The node's condition types other than the four a kubelet reports (what a health fault added)."""
    return sorted(item.type for item in node.status.conditions or [] if item.type not in KUBELET_CONDITIONS)


def _remove_extra_conditions(api: k8s.ApiClient, node: k8s.V1Node) -> None:
    """Delete leftover fault conditions (strategic merge patch, by the conditions' merge key `type`): the sim
    kubelet's undo rewrites the four kubelet conditions with a merge patch, which keeps any other one."""
    extra = extra_conditions(node)
    if not extra:
        return
    progress(f"{node.metadata.name}: removing condition {', '.join(extra)} left after its run's namespace")
    patch = {"status": {"conditions": [{"type": kind, "$patch": "delete"} for kind in extra]}}
    k8s.CoreV1Api(api).patch_node_status(node.metadata.name, patch)


def _clean(node: k8s.V1Node) -> bool:
    conditions = node.status.conditions or []
    ready = any(item.type == "Ready" and item.status == "True" for item in conditions)
    return ready and not node.spec.unschedulable and not node.spec.taints and not extra_conditions(node)


def progress(message: str) -> None:
    """A line on stderr while the scorecard runs (the figures go to stdout)."""
    print(f"[scorecard] {message}", file=sys.stderr, flush=True)
