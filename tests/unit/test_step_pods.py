"""The orchestration around the tests: where step pods run, how long Workflows live, and what a group and
the verdict show in the Argo UI."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from nvcre_argo import contract
from nvcre_argo.api.spec import NodeSelectorRequirement, TargetSpec
from nvcre_argo.cli.compile import compile_command
from nvcre_argo.names import trainjob_name
from nvcre_argo.plan.confirmation import MAX_CONFIRMATION_ROUNDS
from nvcre_argo.plan.model import NodeGroup, Plan
from nvcre_argo.plan.selection import matches_target
from nvcre_argo.render.certification_workflow import embedded_category_workflow
from nvcre_argo.render.step_placement import StepPlacement, Toleration, avoid_target_affinity, placement_spec
from nvcre_argo.resolve.category import ResolvedCheckpoint
from nvcre_argo.results import GroupResultRecord, IterationRecord
from nvcre_argo.steps.deadline import ITERATION_ALLOWANCE_S, WORKFLOW_ALLOWANCE_S, category_deadline_seconds
from nvcre_argo.steps.group_summary import (
    confirmation_job_summary,
    failed_node_count,
    failure_summary,
    isolation_job_summary,
    measurement_text,
    measurements_text,
)
from nvcre_argo.steps.iteration import IterationResult
from nvcre_argo.steps.running import GroupResult, next_attempt
from nvcre_argo.yamlio import load_yaml_mapping
from tests.unit.test_plan import edited_by_hand, resolve

EXAMPLE = "examples/gpu-cluster-cert.yaml"
NCCL = {"domain": "communication", "variant": "nccl-all-reduce"}
DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def satisfies(node_object: dict[str, Any], affinity: dict[str, Any]) -> bool:
    """Kubernetes' required node affinity: any term, every expression and field of the term."""
    labels = node_object["metadata"]["labels"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def holds(expression: dict[str, Any], value: str | None) -> bool:
        operator, values = expression["operator"], expression.get("values", [])
        return {
            "In": value in values,
            "NotIn": value not in values,
            "Exists": value is not None,
            "DoesNotExist": value is None,
        }[operator]

    return any(
        all(holds(expression, labels.get(expression["key"])) for expression in term.get("matchExpressions", []))
        and all(holds(field, node_object["metadata"]["name"]) for field in term.get("matchFields", []))
        for term in terms
    )


TARGETS = {
    "node-selector": TargetSpec(node_selector={"nvidia.com/gpu.present": "true", "pool": "a"}),
    "expressions": TargetSpec(
        match_expressions=[
            NodeSelectorRequirement(key="pool", operator="In", values=["a", "b"]),
            NodeSelectorRequirement(key="drain", operator="DoesNotExist"),
            NodeSelectorRequirement(key="gpu", operator="Exists"),
            NodeSelectorRequirement(key="zone", operator="NotIn", values=["z9"]),
        ]
    ),
    "names": TargetSpec(node_names=["n1", "n3"], node_selector={"pool": "a"}),
}
NODES = [
    node("n0"),
    node("n1", pool="a", gpu="x", **{"nvidia.com/gpu.present": "true"}),
    node("n2", pool="b", gpu="x", zone="z9"),
    node("n3", pool="a", gpu="x", **{"nvidia.com/gpu.present": "true"}),
    node("n4", pool="a", drain="1", gpu="x"),
    node("n5", pool="c", gpu="x"),
    node("n6", pool="b", gpu="x", **{"nvidia.com/gpu.present": "true"}),
]


@pytest.mark.parametrize("target", TARGETS.values(), ids=TARGETS.keys())
def test_step_pods_may_run_on_exactly_the_nodes_the_target_does_not_select(target: TargetSpec) -> None:
    affinity = avoid_target_affinity(target)
    assert affinity is not None
    for candidate in NODES:
        assert satisfies(candidate, affinity) is not matches_target(candidate, target), candidate["metadata"]["name"]


def test_node_names_are_excluded_with_one_value_per_field_requirement_as_the_api_server_requires() -> None:
    """The API server refuses a pod whose `matchFields` In/NotIn requirement has more than one value ("must be
    only one value when `operator` is 'In' or 'NotIn' for node field selector")."""
    affinity = avoid_target_affinity(TargetSpec(node_names=["n3", "n1"]))
    assert affinity is not None
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {
            "matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]},
                {"key": "metadata.name", "operator": "NotIn", "values": ["n3"]},
            ]
        }
    ]


def test_a_target_of_every_node_or_only_of_taints_places_no_affinity() -> None:
    assert avoid_target_affinity(TargetSpec()) is None
    assert placement_spec(StepPlacement(), TargetSpec(taint_selectors=[])) == {}


def test_the_placement_knobs_become_workflow_spec_fields_and_steps_on_target_drops_the_affinity() -> None:
    placement = StepPlacement(
        node_selector={"role": "system"},
        tolerations=(Toleration("dedicated", "system", "NoSchedule"), Toleration("spot")),
        priority_class="high",
        image_pull_secrets=("registry-auth",),
        avoid_target=False,
    )
    assert placement_spec(placement, TARGETS["node-selector"]) == {
        "imagePullSecrets": [{"name": "registry-auth"}],
        "nodeSelector": {"role": "system"},
        "podPriorityClassName": "high",
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"},
            {"key": "spot", "operator": "Exists"},
        ],
    }


def compile_example(*args: str) -> Any:
    return CliRunner().invoke(compile_command, [EXAMPLE, *args], prog_name="nvcre-compile", catch_exceptions=False)


def test_both_workflow_levels_get_the_placement_and_the_parent_its_lifetime() -> None:
    result = compile_example(
        "--step-node-selector", "role=system", "--step-toleration", "dedicated=system:NoSchedule",
        "--step-priority-class", "nvcre-steps", "--step-image-pull-secret", "auth",
        "--ttl", "24h", "--deadline", "12h", "--category-deadline", "2h",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    spec = load_yaml_mapping(result.stdout, "compiled")["spec"]
    assert spec["ttlStrategy"] == {"secondsAfterCompletion": 86400}
    assert spec["activeDeadlineSeconds"] == 43200
    children = [embedded_category_workflow(template) for template in spec["templates"]]
    manifests = [child for child in children if child is not None]
    assert len(manifests) == 2
    for level in (spec, *(manifest["spec"] for manifest in manifests)):
        assert level["nodeSelector"] == {"role": "system"}
        assert level["tolerations"] == [
            {"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}
        ]
        assert level["podPriorityClassName"] == "nvcre-steps"
        assert level["imagePullSecrets"] == [{"name": "auth"}]
        assert "affinity" in level
    assert {manifest["spec"]["activeDeadlineSeconds"] for manifest in manifests} == {7200}


def test_by_default_workflows_are_kept_a_week_and_categories_get_their_deadline_from_the_plan() -> None:
    result = compile_example()
    spec = load_yaml_mapping(result.stdout, "compiled")["spec"]
    assert spec["ttlStrategy"] == {"secondsAfterCompletion": 7 * 24 * 3600}
    assert "activeDeadlineSeconds" not in spec
    manifests = [child for child in map(embedded_category_workflow, spec["templates"]) if child]
    assert all("activeDeadlineSeconds" not in manifest["spec"] for manifest in manifests)
    assert "ttlStrategy" not in load_yaml_mapping(compile_example("--ttl", "none").stdout, "compiled")["spec"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--step-toleration", "a=b:Sometimes"), "--step-toleration"),
        (("--step-node-selector", "novalue"), "--step-node-selector"),
        (("--step-node-selector", "bad key=x"), "--step-node-selector"),
        (("--step-priority-class", "Not_A_Name"), "--step-priority-class"),
        (("--step-image-pull-secret", "UPPER"), "--step-image-pull-secret"),
        (("--ttl", "7d"), "--ttl"),
        (("--deadline", "0s"), "--deadline"),
    ],
)
def test_a_bad_placement_or_lifetime_value_is_a_usage_error_naming_the_option(
    args: tuple[str, str], named: str
) -> None:
    result = compile_example(*args)
    assert result.exit_code == 2
    assert named in result.output
    assert "Traceback" not in result.output


# ------------------------------------------------------------------------------------------------- deadlines


def plan_of(regular: int, overflow: int = 0) -> Plan:
    groups = [NodeGroup(f"g{index}", (f"n{index}",)) for index in range(regular)]
    groups += [NodeGroup(f"o{index}", (f"n{index}",), overflow=True) for index in range(overflow)]
    return Plan(None, (), (), tuple(groups))


def test_the_category_deadline_counts_waves_of_max_concurrent_and_repeats() -> None:
    ten_minutes = {"timeout_per_job": "10m"}
    category = edited_by_hand(resolve(NCCL), max_concurrent=4, repeat_count=2).model_copy(update=ten_minutes)
    iteration = 2 * 600 + 300 + ITERATION_ALLOWANCE_S  # blocked, running, and the default 5m measurement wait
    # 9 regular groups in waves of 4 = 3 waves, and the overflow group after its host: at worst one more.
    assert category_deadline_seconds(plan_of(9, 1), category) == WORKFLOW_ALLOWANCE_S + 4 * 2 * iteration
    unlimited = resolve(NCCL).model_copy(update=ten_minutes)
    assert category_deadline_seconds(plan_of(9), unlimited) == WORKFLOW_ALLOWANCE_S + iteration
    assert category_deadline_seconds(plan_of(0), unlimited) == WORKFLOW_ALLOWANCE_S


def test_the_category_deadline_allows_a_wave_per_confirmation_round_for_groups_of_two_or_more() -> None:
    category = edited_by_hand(resolve(NCCL), max_concurrent=4).model_copy(update={"timeout_per_job": "10m"})
    iteration = 2 * 600 + 300 + ITERATION_ALLOWANCE_S
    pairs = Plan(None, (), (), tuple(NodeGroup(f"g{index}", (f"a{index}", f"b{index}")) for index in range(6)))
    # 6 groups in waves of 4 = 2 waves; each of the 3 confirmation rounds up to 12 groups, 3 waves.
    expected = WORKFLOW_ALLOWANCE_S + (2 + MAX_CONFIRMATION_ROUNDS * 3) * iteration
    assert category_deadline_seconds(pairs, category) == expected
    # Unpinned groups are never confirmed (the scheduler picked their nodes), so no confirmation wave is added.
    unpinned = Plan(None, (), (), tuple(NodeGroup(f"g{i}", (f"a{i}", f"b{i}"), pinned=False) for i in range(6)))
    assert category_deadline_seconds(unpinned, category) == WORKFLOW_ALLOWANCE_S + 2 * iteration


def test_the_category_deadline_allows_the_measurement_wait_only_where_something_is_measured() -> None:
    plan = plan_of(1)
    one_minute = resolve(NCCL).model_copy(update={"timeout_per_job": "10m", "measurement_timeout": "1m"})
    dcgm = resolve(DCGM).model_copy(update={"timeout_per_job": "10m", "measurement_timeout": "1h"})
    assert category_deadline_seconds(plan, one_minute) == WORKFLOW_ALLOWANCE_S + 2 * 600 + 60 + ITERATION_ALLOWANCE_S
    assert category_deadline_seconds(plan, dcgm) == WORKFLOW_ALLOWANCE_S + 2 * 600 + ITERATION_ALLOWANCE_S


def test_the_category_deadline_allows_every_checkpoint_restart_a_whole_iteration() -> None:
    training = resolve(NCCL).model_copy(update={"timeout_per_job": "10m", "measurement_timeout": "1m"})
    restarting = training.model_copy(update={"checkpoint": ResolvedCheckpoint(max_restarts=2)})
    iteration = 2 * 600 + 60 + ITERATION_ALLOWANCE_S
    assert category_deadline_seconds(plan_of(1), training) == WORKFLOW_ALLOWANCE_S + iteration
    assert category_deadline_seconds(plan_of(1), restarting) == WORKFLOW_ALLOWANCE_S + 3 * iteration


# ---------------------------------------------------------------------------------------- what the UI shows


def failed(iteration: int, message: str, *nodes: tuple[str, str]) -> IterationResult:
    blamed = [{"name": name, "reason": reason, "message": message} for name, reason in nodes]
    return IterationResult(iteration, f"tj-{iteration}", False, message, blamed)


def test_a_failed_group_names_its_failed_nodes_and_reasons_bounded() -> None:
    nodes = [(f"gpu-node-{index}", "WorkloadFailed") for index in range(1, 9)]
    result = GroupResult("g0", [name for name, _ in nodes], [failed(0, "TrainJob/tj failed: rank 3\nlog tail", *nodes)])
    summary = failure_summary([result])
    assert summary.startswith("8 node(s) failed: gpu-node-1 (WorkloadFailed), gpu-node-2 (WorkloadFailed)")
    assert "and 3 more: TrainJob/tj failed: rank 3" in summary
    assert "log tail" not in summary
    assert failed_node_count([result]) == 8


def test_a_group_that_blamed_nobody_says_it_is_not_certified() -> None:
    result = GroupResult("g0", ["a"], [failed(0, "its nccl-bandwidth measurement is unavailable")])
    assert failure_summary([result]).startswith("no node blamed: its nccl-bandwidth measurement")
    assert failed_node_count([result]) == 0


def test_a_step_that_also_ran_an_overflow_group_names_each_group() -> None:
    host = GroupResult("g0", ["a", "b"], [IterationResult(0, "tj", True, "ok", [], {"busBandwidthGBps": 452.1})])
    crashed = failed(0, "TrainJob/tj failed: rank 1", ("c", "WorkloadFailed"))
    overflow = GroupResult("g2-overflow", ["a", "c"], [crashed])

    assert measurements_text([host, overflow]) == "g0: busBandwidthGBps=452.1"
    assert (
        failure_summary([host, overflow])
        == "g2-overflow: 1 node(s) failed: c (WorkloadFailed): TrainJob/tj failed: rank 1"
    )
    assert failed_node_count([host, overflow]) == 1
    assert measurements_text([host]) == "busBandwidthGBps=452.1"


def test_a_failed_isolation_job_blames_nobody_and_says_which_round_and_stage_it_was() -> None:
    blamed = ("gpu-node-1", "WorkloadFailed")
    result = GroupResult("r1-g0", ["gpu-node-1", "gpu-node-2"], [failed(0, "TrainJob/tj failed: rank 3\ntail", blamed)])

    summary = isolation_job_summary(result, round_number=1, stage="intra-screening")

    assert summary == (
        "isolation job failed (round 1, intra-screening, 2 nodes; the next rounds find which node or link is at "
        "fault): TrainJob/tj failed: rank 3"
    )


def test_a_failed_confirmation_job_blames_nobody_and_says_what_it_was() -> None:
    both = [("gpu-node-1", "WorkloadFailed"), ("gpu-node-5", "WorkloadFailed")]
    result = GroupResult("c1-g0", ["gpu-node-1", "gpu-node-5"], [failed(0, "WorkloadStalled: none\ntail", *both)])

    summary = confirmation_job_summary(result, round_number=1)

    assert summary == (
        "confirmation job failed (round 1, 2 nodes: one suspect with known-healthy partners, convicted by the "
        "record step): WorkloadStalled: none"
    )


def test_measurements_show_each_iteration_when_the_group_repeats() -> None:
    one = IterationResult(0, "tj", True, "ok", [], {"busBandwidthGBps": 452.123})
    two = IterationResult(1, "tj-i1", True, "ok", [], {"busBandwidthGBps": 449.0})
    assert measurement_text(GroupResult("g0", ["a"], [one])) == "busBandwidthGBps=452.1"
    assert (
        measurement_text(GroupResult("g0", ["a"], [one, two])) == "#1: busBandwidthGBps=452.1; #2: busBandwidthGBps=449"
    )
    assert measurement_text(GroupResult("g0", ["a"], [])) == ""


def test_a_restarted_workload_shows_its_restarts_and_lost_work_beside_its_figures() -> None:
    restart = {"trainjob": "tj", "checkpoint_iteration": 10, "lost_work_seconds": 12.4}
    resumed = IterationResult(0, "tj-r1", True, "ok", [], {"goodputRatio": 0.71}, [restart])
    unmeasured = IterationResult(0, "tj-r1", False, "failed", [], {}, [restart, restart])

    assert measurement_text(GroupResult("g0", ["a"], [resumed])) == (
        "goodputRatio=0.71 (1 checkpoint restart(s), 12s of work lost)"
    )
    assert measurement_text(GroupResult("g0", ["a"], [unmeasured])) == "2 checkpoint restart(s), 25s of work lost"


def test_each_category_step_exports_its_duration_and_failed_nodes_as_argo_metrics() -> None:
    spec = load_yaml_mapping(compile_example().stdout, "compiled")["spec"]
    steps = [template for template in spec["templates"] if embedded_category_workflow(template)]
    for template in steps:
        metrics = {metric["name"]: metric for metric in template["metrics"]["prometheus"]}
        assert metrics["nvcre_category_duration_seconds"]["gauge"]["value"] == "{{duration}}"
        failed_nodes = metrics["nvcre_category_failed_nodes"]
        assert failed_nodes["gauge"]["value"] == f"{{{{outputs.parameters.{contract.OUTPUT_FAILED_NODE_COUNT}}}}}"
        # Not for an attempt that wrote no count (its pod lost): the output's empty default is no number.
        assert failed_nodes["when"] == f"'{failed_nodes['gauge']['value']}' != ''"


# ------------------------------------------------------------------------------------------------- re-tests


def recorded(iterations: int, attempt: int = 1) -> GroupResultRecord:
    done = [
        IterationRecord(iteration=i, trainjob="tj", succeeded=False, message="", failed_nodes=[], measurements={})
        for i in range(iterations)
    ]
    return GroupResultRecord(group="g0", nodes=["a"], iterations=done, attempt=attempt)


def test_a_group_is_tested_again_only_once_its_previous_attempt_was_fully_recorded() -> None:
    assert next_attempt(None, repeat=2) == 1
    assert next_attempt(recorded(1), repeat=2) == 1  # a lost step pod: follow the same TrainJobs
    assert next_attempt(recorded(2), repeat=2) == 2  # argo retry after a finished run: test again
    assert next_attempt(recorded(1, attempt=2), repeat=1) == 3
    assert trainjob_name("cert-0", "g0", 0, 2) == "cert-0-g0-a2"
    assert trainjob_name("cert-0", "g0", 1, 1) == "cert-0-g0-i1"
