"""Which groups a shared runner starts, and what a waiting group's node says (pure; the runner's loop against a
real API server is `tests/integration/test_shared_runner.py`)."""

from __future__ import annotations

from nvcre_argo.steps.group_nodes import GroupNode
from nvcre_argo.steps.shared_runner import startable, waiting_message

ITEMS = ["g0", "g1", "g2", "g3", "g4"]


def nodes(**phases: str) -> dict[str, GroupNode]:
    return {item: GroupNode(item, f"wf-{item}", phase) for item, phase in phases.items()}


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
