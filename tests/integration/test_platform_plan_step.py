"""The plan step on a real API server: Nodes with a cloud's providerID and labels get that platform's arms in
the TrainingRuntime it creates, the plan records them and the step's log names them; Nodes without the GPU
product label get their architecture from the DRA driver's ResourceSlices (`resource.k8s.io/v1`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import RESOURCE_SLICES, TRAINING_RUNTIMES
from nvcre_argo.plan.model import PlanError, PlatformChoice
from tests.integration.steps_support import NodeSet
from tests.integration.test_steps import ALL_REDUCE, RUNTIME, make_step

P5 = {"node.kubernetes.io/instance-type": "p5.48xlarge"}


def test_the_plan_step_applies_the_aws_efa_arm_to_nodes_with_an_aws_provider_id(
    kube: KubeClient, nodes: NodeSet
) -> None:
    for index in range(2):
        nodes.add(f"n{index}", provider_id=f"aws:///us-east-1a/i-0{index}", labels=P5)
    step = make_step(kube, nodes, ALL_REDUCE)

    plan = step.plan()

    assert plan.platform == PlatformChoice(
        name="aws", source="detected", instance_type="p5.48xlarge", arms=("aws-efa-nccl-tests",)
    )
    assert "platform aws (detected, instance type p5.48xlarge); platform arms applied: aws-efa-nccl-tests" in step.lines
    runtime = kube.get(TRAINING_RUNTIMES, RUNTIME, step.namespace)
    assert runtime is not None
    worker = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    container = worker["containers"][0]
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32  # the CRD keeps int-or-string as sent
    assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]


def test_nodes_on_two_platforms_fail_the_plan_step(kube: KubeClient, nodes: NodeSet) -> None:
    nodes.add("n0", provider_id="aws:///us-east-1a/i-00")
    nodes.add("n1", provider_id="gce://p/us-central1-a/n1")
    step = make_step(kube, nodes, ALL_REDUCE)

    with pytest.raises(PlanError, match=r"heterogeneous platforms detected: aws .*, gcp "):
        step.plan()
    assert kube.get(TRAINING_RUNTIMES, RUNTIME, step.namespace) is None


@pytest.fixture
def slices(kube: KubeClient) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    for name in created:
        kube.delete(RESOURCE_SLICES, name)


def gpu_slice(name: str, node: str, product: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{index}", "attributes": {"productName": {"string": product}, "type": {"string": "gpu"}}}
                for index in range(4)
            ],
        },
    }


def test_label_less_nodes_get_their_architecture_from_the_dra_resource_slices(
    kube: KubeClient, nodes: NodeSet, slices: list[str]
) -> None:
    for short in ("n0", "n1"):
        name = nodes.add(short, product=None, gpus="4")
        manifest = gpu_slice(f"{name}-gpu", name, "NVIDIA GB300")
        kube.create(manifest)
        slices.append(manifest["metadata"]["name"])
    step = make_step(kube, nodes, ALL_REDUCE, {"enableMNNVL": False})

    plan = step.plan()

    assert plan.architecture == "gb300"
    assert "no GPU product label on any node: GPU architecture gb300 from DRA ResourceSlices" in step.lines
