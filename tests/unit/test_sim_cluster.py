"""The simulated cluster's start-up rules that do not need a cluster: the controller manager's API budget and
when a node counts as ready for pods."""

from __future__ import annotations

from types import SimpleNamespace

from tests.sim.cluster import controller_manager_qps, node_heartbeat, schedulable, scheduler_qps


def _node(*, ready: str = "True", taints: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(
        status=SimpleNamespace(conditions=[SimpleNamespace(type="Ready", status=ready)]),
        spec=SimpleNamespace(taints=[SimpleNamespace(key=key, effect="NoSchedule") for key in taints]),
    )


def test_the_controller_managers_budget_is_its_default_below_600_nodes_then_grows_with_them() -> None:
    assert controller_manager_qps(17) == (20, 30)
    assert controller_manager_qps(599) == (20, 30)
    assert controller_manager_qps(1025) == (51, 102)
    assert controller_manager_qps(4097) == (204, 408)


def test_the_scheduler_keeps_its_default_rate_until_a_large_cluster_needs_more() -> None:
    assert scheduler_qps(17) == (50, 100)
    assert scheduler_qps(1025) == (51, 102)
    assert scheduler_qps(4097) == (204, 408)


def test_a_ready_node_is_schedulable_only_without_the_not_ready_taints() -> None:
    assert schedulable(_node())
    assert schedulable(_node(taints=("nvidia.com/gpu",)))
    assert not schedulable(_node(taints=("node.kubernetes.io/not-ready",)))
    assert not schedulable(_node(taints=("node.kubernetes.io/unreachable",)))
    assert not schedulable(_node(ready="Unknown"))


def test_a_large_cluster_renews_its_leases_less_often_and_waits_longer_for_a_late_one() -> None:
    assert node_heartbeat(257) == (10.0, None)
    for nodes in (1025, 4097):
        large = node_heartbeat(nodes)
        assert large.grace_seconds is not None
        assert large.renew_seconds < large.grace_seconds / 3
    # The longest Lease pass measured at 4,096 nodes took 140 s: a renewal late by that much is still in time.
    huge = node_heartbeat(4097)
    assert huge.grace_seconds is not None
    assert huge.renew_seconds + 140 < huge.grace_seconds
