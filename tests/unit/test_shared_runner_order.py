"""Which groups a shared runner starts, and what it writes to the group nodes (pure; the runner's loop against a
real API server is `tests/integration/test_shared_runner.py`)."""

from __future__ import annotations

from datetime import UTC, datetime

from nvcre_argo.steps.group_nodes import GroupNode
from nvcre_argo.steps.group_step import GroupStepOutcome
from nvcre_argo.steps.shared_runner import node_changes, startable, waiting_message

ITEMS = ["g0", "g1", "g2", "g3", "g4"]


AT = datetime(2026, 12, 2, 15, 30, 0, tzinfo=UTC)
WAITING = waiting_message(2)
PASSED = GroupStepOutcome(True, "", "busBandwidthGBps=452.1", "0")
FAILED = GroupStepOutcome(False, "TrainJob/wf-g0 failed", "", "1")


def nodes(**phases: str) -> dict[str, GroupNode]:
    return {item: GroupNode(item, f"wf-{item}", phase) for item, phase in phases.items()}


def waiting(**phases: str) -> dict[str, GroupNode]:
    """Nodes that show the waiting message."""
    return {item: GroupNode(item, f"wf-{item}", phase, WAITING) for item, phase in phases.items()}


def test_without_a_limit_every_running_node_not_started_starts_in_the_fan_outs_order() -> None:
    read = nodes(g3="Running", g0="Running", g1="Succeeded", g2="Running")
    assert startable(ITEMS, read, {"g2"}, free=None) == ["g0", "g3"]


def test_with_a_limit_only_the_free_slots_start_first_in_order() -> None:
    read = nodes(g0="Running", g1="Running", g2="Running", g3="Running", g4="Running")
    assert startable(ITEMS, read, {"g0"}, free=2) == ["g1", "g2"]
    assert startable(ITEMS, read, {"g0"}, free=0) == []
    assert startable(ITEMS, read, {"g0"}, free=-1) == [], "more running than the limit starts none"


def test_a_group_whose_node_argo_has_not_run_yet_waits() -> None:
    assert startable(ITEMS, nodes(g0="Pending", g1="Running"), set(), free=None) == ["g1"]


def test_the_waiting_message_names_the_limit() -> None:
    assert waiting_message(8) == "waiting for a slot: at most 8 group(s) run at once (maxConcurrent)"


def test_a_completed_group_gets_its_outcome_and_the_others_only_what_changes() -> None:
    read = {**nodes(g0="Running", g1="Running", g2="Succeeded"), **waiting(g3="Running")}
    changes = node_changes(read, {"g0": FAILED}, running={"g1"}, limit=2, at=AT)
    assert changes == {
        "wf-g0": {
            "phase": "Failed",
            "finishedAt": "2026-12-02T15:30:00Z",
            "message": "TrainJob/wf-g0 failed",
            "outputs": {
                "parameters": [
                    {"name": "measurements", "value": "", "valueFrom": {"supplied": {}}},
                    {"name": "failed-nodes", "value": "1", "valueFrom": {"supplied": {}}},
                ]
            },
        }
    }, "g1 runs with no message, g2 is final, g3 already says it waits: nothing for them"


def test_a_group_that_starts_or_completes_loses_its_waiting_message() -> None:
    read = waiting(g0="Running", g1="Running")
    changes = node_changes(read, {"g0": PASSED}, running={"g1"}, limit=2, at=AT)
    assert changes["wf-g0"]["message"] is None, "a passed group has no message of its own: the waiting one goes"
    assert changes["wf-g0"]["phase"] == "Succeeded"
    assert changes["wf-g1"] == {"message": None}


def test_a_group_waiting_for_a_slot_says_so_once_and_only_under_a_limit() -> None:
    read = nodes(g0="Running", g1="Running")
    assert node_changes(read, {}, running={"g0"}, limit=2, at=AT) == {"wf-g1": {"message": WAITING}}
    assert node_changes(read, {}, running={"g0"}, limit=None, at=AT) == {}, "no limit: nothing waits for a slot"
    assert node_changes(waiting(g1="Running"), {}, running=set(), limit=2, at=AT) == {}, "written once"
