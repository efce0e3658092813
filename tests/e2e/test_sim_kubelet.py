"""The sim kubelet keeps the kubelet's promises that Argo and the steps rely on.

Pods are created directly (no Workflow), with the step image, so each check isolates one promise:
activeDeadlineSeconds ends a pod as DeadlineExceeded, a pod waits for a volume's ConfigMap that does not
exist yet (as the kubelet does, rather than failing it), a deletion is finished only after the containers
stopped (and within the grace period), a container's exit code and termination message reach the pod
status, and a pod's log is readable through the API (pods/log).
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.sim import scenario
from tests.sim.cluster import SimCluster

STEP_IMAGE = "nvcre-argo:0.1.0"
TIMEOUT_S = 60


def make_pod(namespace: str, name: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": 65532, "runAsNonRoot": True},
            "containers": [{"name": "main", "image": STEP_IMAGE, "command": ["sh", "-c", script]}],
            **spec,
        },
    }


def pod_status(core: k8s.CoreV1Api, namespace: str, name: str) -> k8s.V1PodStatus | None:
    try:
        return core.read_namespaced_pod(name, namespace).status
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def wait_phase(core: k8s.CoreV1Api, namespace: str, name: str, phases: tuple[str, ...]) -> k8s.V1PodStatus:
    found: k8s.V1PodStatus = scenario.wait_for(
        f"pod {name} to reach {phases}",
        lambda: (status := pod_status(core, namespace, name)) is not None and status.phase in phases and status,
        timeout_s=TIMEOUT_S,
        describe=lambda: str(pod_status(core, namespace, name)),
    )
    return found


def test_a_container_exit_code_termination_message_and_log_reach_the_api(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    del sim
    core = k8s.CoreV1Api(api)
    script = "echo hello from $(id -u); echo 'why it failed' > /dev/termination-log; exit 3"
    core.create_namespaced_pod(namespace, make_pod(namespace, "exits", script))

    status = wait_phase(core, namespace, "exits", ("Failed",))
    (container,) = status.container_statuses
    assert container.state.terminated.exit_code == 3
    assert container.state.terminated.message == "why it failed\n"
    assert core.read_namespaced_pod_log("exits", namespace, container="main") == "hello from 65532\n"


def test_active_deadline_seconds_ends_a_running_pod(sim: SimCluster, api: k8s.ApiClient, namespace: str) -> None:
    del sim
    core = k8s.CoreV1Api(api)
    core.create_namespaced_pod(namespace, make_pod(namespace, "slow", "sleep 600", activeDeadlineSeconds=2))

    status = wait_phase(core, namespace, "slow", ("Failed",))
    assert status.reason == "DeadlineExceeded", status.message


def test_a_pod_whose_config_map_appears_later_waits_for_it_and_then_runs(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    del sim
    core = k8s.CoreV1Api(api)
    volume = {"name": "settings", "configMap": {"name": "late"}}
    mount = {"name": "settings", "mountPath": "/settings"}
    pod = make_pod(namespace, "patient", "cat /settings/greeting", volumes=[volume])
    pod["spec"]["containers"][0]["volumeMounts"] = [mount]
    core.create_namespaced_pod(namespace, pod)
    time.sleep(2)
    assert pod_status(core, namespace, "patient").phase == "Pending"

    core.create_namespaced_config_map(namespace, {"metadata": {"name": "late"}, "data": {"greeting": "hello"}})
    status = wait_phase(core, namespace, "patient", ("Succeeded", "Failed"))
    assert status.phase == "Succeeded", status.container_statuses
    assert core.read_namespaced_pod_log("patient", namespace) == "hello"


def test_a_deleted_pod_is_removed_only_after_its_container_stopped_within_the_grace_period(
    sim: SimCluster, api: k8s.ApiClient, namespace: str
) -> None:
    del sim
    core = k8s.CoreV1Api(api)
    # The container ignores SIGTERM, so only the kubelet's SIGKILL at the end of the grace period stops it.
    pod = make_pod(namespace, "stubborn", "trap '' TERM; echo up; while true; do sleep 1; done")
    core.create_namespaced_pod(namespace, pod)
    wait_phase(core, namespace, "stubborn", ("Running",))
    scenario.wait_for(
        "the container to start",
        lambda: "up" in core.read_namespaced_pod_log("stubborn", namespace),
        timeout_s=TIMEOUT_S,
        describe=lambda: "no output",
    )

    began = time.monotonic()
    core.delete_namespaced_pod("stubborn", namespace, grace_period_seconds=3)
    scenario.wait_for(
        "the pod object to go",
        lambda: pod_status(core, namespace, "stubborn") is None,
        timeout_s=TIMEOUT_S,
        describe=lambda: str(pod_status(core, namespace, "stubborn")),
    )
    took = time.monotonic() - began
    assert 3 <= took < 15, f"the pod went after {took:.1f} s; expected the 3 s grace period, then SIGKILL"


def _ready(core: k8s.CoreV1Api, node: str) -> str:
    conditions = core.read_node(node).status.conditions or []
    return next((item.status for item in conditions if item.type == "Ready"), "-")


def test_a_node_the_lifecycle_controller_marked_unknown_is_reported_ready_again(
    sim: SimCluster, api: k8s.ApiClient
) -> None:
    """What the node lifecycle controller writes when a node's Lease is late (on a loaded machine, the sim
    kubelet's renewals of a thousand Leases can be): Ready Unknown. A kubelet's next status update says Ready
    again, and so does the sim kubelet, or the node stays unreachable-tainted and its pods are evicted."""
    core = k8s.CoreV1Api(api)
    node = next(spec.name for spec in reversed(sim.nodes) if spec.gpus)  # the last: tests use the first first
    unknown = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped"}
    core.patch_node_status(node, {"status": {"conditions": [unknown]}})
    assert _ready(core, node) == "Unknown"

    scenario.wait_for(
        f"node {node} to be Ready again",
        lambda: _ready(core, node) == "True",
        timeout_s=TIMEOUT_S,
        describe=lambda: f"Ready is {_ready(core, node)}",
    )
    scenario.wait_for(
        f"the node lifecycle controller to lift node {node}'s unreachable taints",
        lambda: not [t for t in core.read_node(node).spec.taints or [] if t.key == "node.kubernetes.io/unreachable"],
        timeout_s=TIMEOUT_S,
        describe=lambda: str(core.read_node(node).spec.taints),
    )
