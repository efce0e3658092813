"""The sim cluster's fault plan: what the loader reads, what it refuses (naming the path), and the round trip.

The plans here are the scenarios end-to-end tests write; every expected value is read off the plan text.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre_argo.errors import DocumentError, format_path
from tests.sim.faults import (
    FAULT_KINDS,
    Defaults,
    FaultPlan,
    FaultPlanError,
    LinkFault,
    NodeCondition,
    NodeFault,
    Taint,
    load_fault_plan,
)

BRIEF_PLAN = """\
defaults:
  durationSeconds: 3
  busBandwidthGBps: 380
  tflopsPerGpu: 400
  stepTimeMs: 2000
nodes:
  gpu-node-3: {fault: crash, exitCode: 137, afterSeconds: 1}
  gpu-node-4: {fault: hang}
  gpu-node-5: {fault: slow, busBandwidthGBps: 12}
  gpu-node-6: {fault: datacheck}
  gpu-node-7:
    fault: health
    afterSeconds: 1
    taint: {key: nvidia.com/gpu.health, value: unhealthy, effect: NoSchedule}
  gpu-node-8: {fault: notready, afterSeconds: 1}
  gpu-node-9: {fault: stall}
  gpu-node-10: {fault: transient, exitCode: 1}
  gpu-node-11: {fault: health, condition: {type: GpuUnhealthy, status: "True"}}
  gpu-node-12: {fault: slow, tflopsPerGpu: 150, stepTimeMs: 5000}
  gpu-node-13: {fault: nomeasurement}
links:
  - between: [sim-cluster.0, sim-cluster.1]
  - {between: [sim-cluster.2, sim-cluster.0], afterSeconds: 2.5, exitCode: 3}
"""


def test_the_example_plan_reads_every_fault_with_the_fields_it_names() -> None:
    plan = load_fault_plan(BRIEF_PLAN)
    assert plan.defaults == Defaults(duration_seconds=3, bus_bandwidth_gbps=380, tflops_per_gpu=400, step_time_ms=2000)
    assert plan.nodes == {
        "gpu-node-3": NodeFault(kind="crash", exit_code=137, after_seconds=1),
        "gpu-node-4": NodeFault(kind="hang"),
        "gpu-node-5": NodeFault(kind="slow", bus_bandwidth_gbps=12),
        "gpu-node-6": NodeFault(kind="datacheck"),
        "gpu-node-7": NodeFault(
            kind="health",
            after_seconds=1,
            taint=Taint(key="nvidia.com/gpu.health", value="unhealthy", effect="NoSchedule"),
        ),
        "gpu-node-8": NodeFault(kind="notready", after_seconds=1),
        "gpu-node-9": NodeFault(kind="stall"),
        "gpu-node-10": NodeFault(kind="transient", exit_code=1),
        "gpu-node-11": NodeFault(kind="health", condition=NodeCondition(type="GpuUnhealthy", status="True")),
        "gpu-node-12": NodeFault(kind="slow", tflops_per_gpu=150, step_time_ms=5000),
        "gpu-node-13": NodeFault(kind="nomeasurement"),
    }
    assert plan.links == (
        LinkFault(between=("sim-cluster.0", "sim-cluster.1")),
        LinkFault(between=("sim-cluster.2", "sim-cluster.0"), after_seconds=2.5, exit_code=3),
    )


def test_an_unlisted_node_is_healthy_and_measures_the_defaults_while_a_slow_one_overrides_only_what_it_names() -> None:
    plan = load_fault_plan(BRIEF_PLAN)
    assert plan.fault_for("gpu-node-1") == NodeFault(kind="healthy")
    assert (plan.bus_bandwidth_gbps("gpu-node-1"), plan.tflops_per_gpu("gpu-node-1")) == (380, 400)
    assert plan.bus_bandwidth_gbps("gpu-node-5") == 12
    assert (plan.tflops_per_gpu("gpu-node-5"), plan.step_time_ms("gpu-node-5")) == (400, 2000)
    assert (plan.tflops_per_gpu("gpu-node-12"), plan.step_time_ms("gpu-node-12")) == (150, 5000)


@pytest.mark.parametrize(
    "text", ["", "# nothing planned\n", "{}\n", "nodes: {}\n", "defaults: {}\nnodes:\n", "links: []\n", "links:\n"]
)
def test_an_empty_plan_is_all_healthy_with_the_documented_defaults(text: str) -> None:
    plan = load_fault_plan(text)
    assert plan == FaultPlan()
    assert plan.defaults == Defaults(duration_seconds=3, bus_bandwidth_gbps=380, tflops_per_gpu=400, step_time_ms=2000)


def test_unset_crash_fields_resolve_to_exit_1_after_1_second_with_reason_error() -> None:
    fault = load_fault_plan("nodes: {n: {fault: crash}}").fault_for("n")
    assert (fault.exit_code, fault.after_seconds, fault.reason) == (None, None, None)
    assert (fault.resolved_exit_code, fault.resolved_after_seconds, fault.resolved_reason) == (1, 1.0, "Error")


def test_unset_link_fields_resolve_to_exit_1_after_1_second() -> None:
    (link,) = load_fault_plan("links: [{between: [a, b]}]").links
    assert (link.exit_code, link.after_seconds) == (None, None)
    assert (link.resolved_exit_code, link.resolved_after_seconds) == (1, 1.0)


@pytest.mark.parametrize(
    ("domains", "expected"),
    [
        pytest.param({"sim-cluster.0", "sim-cluster.1"}, 0, id="both-sides"),
        pytest.param({"sim-cluster.1", "sim-cluster.0", "sim-cluster.7"}, 0, id="both-sides-and-another"),
        pytest.param({"sim-cluster.0", "sim-cluster.1", "sim-cluster.2"}, 1, id="two-links-the-earlier-fails"),
        pytest.param({"sim-cluster.0"}, None, id="one-domain"),
        pytest.param({"sim-cluster.1", "sim-cluster.7"}, None, id="one-side-and-another"),
        pytest.param({"sim-cluster.3", "sim-cluster.4"}, None, id="other-domains"),
        pytest.param(set(), None, id="no-domains"),
    ],
)
def test_a_group_is_broken_by_a_link_only_with_a_node_on_each_side(domains: set[str], expected: int | None) -> None:
    plan = load_fault_plan(
        "links:\n"
        "  - {between: [sim-cluster.0, sim-cluster.1], afterSeconds: 5}\n"
        "  - {between: [sim-cluster.2, sim-cluster.0], afterSeconds: 2}\n"
    )
    assert plan.broken_link(domains) == (None if expected is None else plan.links[expected])


def test_of_two_links_failing_together_the_first_listed_breaks_the_group() -> None:
    plan = load_fault_plan("links: [{between: [a, b], exitCode: 7}, {between: [b, c], exitCode: 9}]")
    assert plan.broken_link({"a", "b", "c"}) == plan.links[0]


@pytest.mark.parametrize(
    ("text", "change"),
    [
        pytest.param(
            "{fault: health, taint: {key: k, effect: NoExecute}}",
            {"taint": {"key": "k", "effect": "NoExecute"}},
            id="taint-without-value",
        ),
        pytest.param(
            "{fault: health, condition: {type: GpuUnhealthy, status: 'True', reason: Xid79}}",
            {"condition": {"type": "GpuUnhealthy", "status": "True", "reason": "Xid79"}},
            id="condition",
        ),
        pytest.param("{fault: notready}", {"not_ready": True}, id="notready"),
        pytest.param("{fault: crash}", None, id="crash-changes-no-node"),
    ],
)
def test_a_node_fault_says_how_it_changes_the_node_in_the_kubelets_shape(text: str, change: object) -> None:
    assert load_fault_plan(f"nodes: {{n: {text}}}").fault_for("n").node_change() == change


def test_to_yaml_round_trips_and_is_byte_stable() -> None:
    plan = load_fault_plan(BRIEF_PLAN)
    text = plan.to_yaml()
    assert load_fault_plan(text) == plan
    assert load_fault_plan(text).to_yaml() == text
    # Nodes are written in sorted order whatever order the plan listed them in; links keep the plan's order.
    assert text.index("gpu-node-10:") < text.index("gpu-node-3:")
    assert text.index("sim-cluster.1") < text.index("sim-cluster.2")


def test_a_plan_without_links_writes_no_links_key() -> None:
    assert "links" not in load_fault_plan("nodes: {n: {fault: hang}}\nlinks: []\n").to_yaml()


def test_the_plan_is_read_only() -> None:
    plan = load_fault_plan(BRIEF_PLAN)
    with pytest.raises(TypeError):
        plan.nodes["gpu-node-1"] = NodeFault(kind="crash")  # type: ignore[index]


_FIGURE = st.integers(min_value=1, max_value=10_000)
_SECONDS = st.one_of(st.integers(min_value=0, max_value=600), st.floats(min_value=0, max_value=600))
_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=20)
_TEXT = st.text(alphabet="abcXYZ019 ./:=-_\"'é", min_size=1, max_size=12)
_FAULTS = st.one_of(
    st.builds(NodeFault, kind=st.sampled_from(["hang", "stall", "datacheck", "nomeasurement"])),
    st.builds(
        NodeFault,
        kind=st.just("slow"),
        bus_bandwidth_gbps=_FIGURE,
        tflops_per_gpu=st.none() | _FIGURE,
        step_time_ms=st.none() | _FIGURE,
    ),
    st.builds(
        NodeFault,
        kind=st.sampled_from(["crash", "transient"]),
        exit_code=st.none() | st.integers(min_value=1, max_value=255),
        after_seconds=st.none() | _SECONDS,
        reason=st.none() | _TEXT,
    ),
    st.builds(NodeFault, kind=st.just("notready"), after_seconds=st.none() | _SECONDS),
    st.builds(
        NodeFault,
        kind=st.just("health"),
        after_seconds=st.none() | _SECONDS,
        taint=st.builds(
            Taint,
            key=_TEXT,
            effect=st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
            value=st.none() | st.text(alphabet="abcXYZ019 ./:=-_é", max_size=12),
        ),
    ),
    st.builds(
        NodeFault,
        kind=st.just("health"),
        condition=st.builds(
            NodeCondition,
            type=_TEXT,
            status=st.sampled_from(["True", "False", "Unknown"]),
            reason=st.none() | _TEXT,
            message=st.none() | st.text(alphabet="abcXYZ019 ./:=-_é", max_size=12),
        ),
    ),
)


_LINKS = st.lists(
    st.builds(
        LinkFault,
        between=st.tuples(_NAME, _NAME).filter(lambda pair: pair[0] != pair[1]),
        exit_code=st.none() | st.integers(min_value=1, max_value=255),
        after_seconds=st.none() | _SECONDS,
    ),
    max_size=4,
    unique_by=lambda link: frozenset(link.between),
).map(tuple)


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    defaults=st.builds(
        Defaults, duration_seconds=_SECONDS, bus_bandwidth_gbps=_FIGURE, tflops_per_gpu=_FIGURE, step_time_ms=_FIGURE
    ),
    nodes=st.dictionaries(_NAME, _FAULTS, max_size=5),
    links=_LINKS,
)
def test_any_valid_plan_round_trips_through_yaml(
    defaults: Defaults, nodes: dict[str, NodeFault], links: tuple[LinkFault, ...]
) -> None:
    plan = FaultPlan(defaults=defaults, nodes=nodes, links=links)
    assert load_fault_plan(plan.to_yaml()) == plan


# Each bad plan with the (path, kind) pairs it must report, in document order.
BAD_PLANS = [
    pytest.param(
        "nodes: {gpu-node-3: {fault: crash, exitCode: 0}}",
        [('nodes["gpu-node-3"].exitCode', "range")],
        id="exit-code-zero",
    ),
    pytest.param(
        "nodes: {gpu-node-3: {fault: crash, exitCode: 256}}",
        [('nodes["gpu-node-3"].exitCode', "range")],
        id="exit-code-over-255",
    ),
    pytest.param(
        "nodes: {gpu-node-3: {fault: crash, exitCode: true}}",
        [('nodes["gpu-node-3"].exitCode', "range")],
        id="exit-code-boolean",
    ),
    pytest.param(
        "nodes: {gpu-node-3: {fault: crash, exitCode: 1.5}}",
        [('nodes["gpu-node-3"].exitCode', "range")],
        id="exit-code-fraction",
    ),
    pytest.param(
        "nodes: {gpu-node-3: {fault: crash, afterSeconds: -1}}",
        [('nodes["gpu-node-3"].afterSeconds', "range")],
        id="negative-after-seconds",
    ),
    pytest.param(
        "nodes: {gpu-node-3: {fault: crash, afterSeconds: .nan}}",
        [('nodes["gpu-node-3"].afterSeconds', "range")],
        id="nan-after-seconds",
    ),
    pytest.param("faults: {}", [("faults", "unknown-field")], id="unknown-top-level-key"),
    pytest.param(
        "defaults: {duration: 3, busBandwidthGBps: 0}",
        [("defaults.duration", "unknown-field"), ("defaults.busBandwidthGBps", "range")],
        id="unknown-and-bad-default",
    ),
    pytest.param(
        "nodes: {gpu-node-3: {fault: crash, exitcode: 137}}",
        [('nodes["gpu-node-3"].exitcode', "unknown-field")],
        id="unknown-node-field-misspelt",
    ),
    pytest.param(
        "nodes: {gpu-node-3: {fault: explode}}", [('nodes["gpu-node-3"].fault', "enum")], id="unknown-fault-kind"
    ),
    pytest.param("nodes: {gpu-node-3: {exitCode: 1}}", [('nodes["gpu-node-3"]', "required")], id="fault-missing"),
    pytest.param(
        "nodes: {gpu-node-4: {fault: hang, exitCode: 1}}",
        [('nodes["gpu-node-4"].exitCode', "not-allowed")],
        id="field-not-used-by-the-kind",
    ),
    pytest.param(
        "nodes: {gpu-node-2: {fault: nomeasurement, busBandwidthGBps: 12, afterSeconds: 1}}",
        [('nodes["gpu-node-2"].busBandwidthGBps', "not-allowed"), ('nodes["gpu-node-2"].afterSeconds', "not-allowed")],
        id="nomeasurement-takes-no-field",
    ),
    pytest.param(
        "nodes: {gpu-node-5: {fault: slow}}", [('nodes["gpu-node-5"]', "required")], id="slow-without-a-figure"
    ),
    pytest.param(
        "nodes: {gpu-node-5: {fault: slow, busBandwidthGBps: -12}}",
        [('nodes["gpu-node-5"].busBandwidthGBps', "range")],
        id="negative-bandwidth",
    ),
    pytest.param(
        "nodes: {gpu-node-7: {fault: health}}", [('nodes["gpu-node-7"]', "one-of")], id="health-without-a-signal"
    ),
    pytest.param(
        "nodes: {gpu-node-7: {fault: health, taint: {key: k, effect: NoSchedule},"
        " condition: {type: T, status: 'True'}}}",
        [('nodes["gpu-node-7"]', "one-of")],
        id="health-with-two-signals",
    ),
    pytest.param(
        "nodes: {gpu-node-7: {fault: health, taint: {key: k, effect: NoScheduleNow, color: red}}}",
        [('nodes["gpu-node-7"].taint.color', "unknown-field"), ('nodes["gpu-node-7"].taint.effect', "enum")],
        id="taint-bad-effect-and-unknown-field",
    ),
    pytest.param(
        "nodes: {gpu-node-7: {fault: health, taint: {effect: NoSchedule}}}",
        [('nodes["gpu-node-7"].taint.key', "required")],
        id="taint-without-key",
    ),
    pytest.param(
        "nodes: {gpu-node-7: {fault: health, condition: {type: GpuUnhealthy, status: true}}}",
        [('nodes["gpu-node-7"].condition.status', "enum")],
        id="condition-status-unquoted",
    ),
    pytest.param("nodes: [gpu-node-3]", [("nodes", "type")], id="nodes-not-a-map"),
    pytest.param("nodes: {gpu-node-3: crash}", [('nodes["gpu-node-3"]', "type")], id="node-not-a-map"),
    pytest.param("nodes: {3: {fault: hang}}", [('nodes["3"]', "node-name")], id="node-name-not-a-string"),
    pytest.param("- a list\n", [("<document>", "type")], id="document-not-a-map"),
    pytest.param("nodes: {gpu-node-3: {fault: [}\n", [("<document>", "syntax")], id="not-yaml"),
    pytest.param("nodes: {}\n---\nnodes: {}\n", [("<document>", "documents")], id="two-documents"),
    pytest.param("links: {between: [a, b]}", [("links", "type")], id="links-not-a-list"),
    pytest.param("links: [[a, b]]", [("links[0]", "type")], id="link-not-a-map"),
    pytest.param("links: [{exitCode: 3}]", [("links[0].between", "required")], id="link-without-between"),
    pytest.param("links: [{between: a-b}]", [("links[0].between", "type")], id="between-not-a-list"),
    pytest.param("links: [{between: [a]}]", [("links[0].between", "type")], id="between-one-domain"),
    pytest.param("links: [{between: [a, b, c]}]", [("links[0].between", "type")], id="between-three-domains"),
    pytest.param("links: [{between: [a, 0]}]", [("links[0].between", "type")], id="between-a-number"),
    pytest.param("links: [{between: ['', b]}]", [("links[0].between", "type")], id="between-an-empty-domain"),
    pytest.param("links: [{between: [a, a]}]", [("links[0].between", "same-domain")], id="between-the-same-domain"),
    pytest.param(
        "links: [{between: [a, b]}, {between: [c, a]}, {between: [b, a]}]",
        [("links[2].between", "duplicate")],
        id="the-same-link-listed-twice",
    ),
    pytest.param(
        "links: [{between: [a, b], exitCode: 0, afterSeconds: -1, node: gpu-node-3}]",
        [("links[0].node", "unknown-field"), ("links[0].exitCode", "range"), ("links[0].afterSeconds", "range")],
        id="bad-link-fields",
    ),
    pytest.param(
        "links: [{between: [a, a]}, {between: [a]}]\nnodes: {gpu-node-3: {fault: stall, afterSeconds: 1}}\n",
        [
            ("links[0].between", "same-domain"),
            ("links[1].between", "type"),
            ('nodes["gpu-node-3"].afterSeconds', "not-allowed"),
        ],
        id="every-link-error-reported-in-document-order",
    ),
    pytest.param(
        "nodes:\n  gpu-node-9: {fault: crash, exitCode: 0}\n  gpu-node-1: {fault: slow}\ndefaults: {stepTimeMs: 0}\n",
        [
            ('nodes["gpu-node-9"].exitCode', "range"),
            ('nodes["gpu-node-1"]', "required"),
            ("defaults.stepTimeMs", "range"),
        ],
        id="every-error-reported",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_PLANS)
def test_a_bad_plan_is_refused_with_every_problem_named_by_its_path(text: str, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(FaultPlanError) as raised:
        load_fault_plan(text)
    assert [(format_path(error.path), error.kind) for error in raised.value.errors] == expected


def test_the_errors_read_like_the_products_own_input_errors() -> None:
    with pytest.raises(FaultPlanError) as raised:
        load_fault_plan("nodes: {gpu-node-3: {fault: crash, exitCode: 0}}")
    assert isinstance(raised.value, DocumentError)
    assert str(raised.value) == 'nodes["gpu-node-3"].exitCode: must be an integer 1..255, got 0'
    with pytest.raises(FaultPlanError) as raised:
        load_fault_plan("nodes: {gpu-node-4: {fault: hang, exitCode: 1}}", source="plan.yaml")
    assert (
        str(raised.value)
        == "plan.yaml: nodes[\"gpu-node-4\"].exitCode: not used by fault 'hang', which takes: afterSeconds"
    )


def test_a_link_error_names_the_domains_it_wants() -> None:
    with pytest.raises(FaultPlanError) as raised:
        load_fault_plan("links: [{between: [sim-cluster.0, sim-cluster.0]}, {}]")
    assert str(raised.value).splitlines() == [
        "links[0].between: must name two different NVLink domains, got 'sim-cluster.0' twice",
        "links[1].between: is required: the two NVLink domains (nvidia.com/gpu.clique values) it joins",
    ]


def test_every_fault_kind_is_accepted_in_its_minimal_form() -> None:
    minimal = {
        "slow": "{fault: slow, stepTimeMs: 1}",
        "health": "{fault: health, taint: {key: k, effect: NoSchedule}}",
    }
    for kind in FAULT_KINDS:
        text = minimal.get(kind, f"{{fault: {kind}}}")
        assert load_fault_plan(f"nodes: {{n: {text}}}").fault_for("n").kind == kind
