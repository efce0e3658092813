"""Node objects of each platform, as the API returns them (providerID, the GPU Operator's and the cloud's
labels, allocatable devices), and the category each is planned for: shared by the golden render tests
(tests/unit/test_platform_render.py) and the server-side dry-run (tests/integration/test_platform_dry_run.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre_argo.plan.planner import plan_category
from nvcre_argo.plan.platform import category_arms
from nvcre_argo.render.planned import PlannedObjects, render_planned_objects
from nvcre_argo.resolve.category import ResolvedCategory
from tests.unit.test_plan import GPU_PRESENT, resolve

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
GB200 = "NVIDIA-GB200"
GB300 = "NVIDIA-GB300"
L40 = "NVIDIA-L40"
RTX_PRO_6000 = "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARM64_TAINT = {"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# A target that selects its nodes by their GPU taint: the pods then tolerate exactly the selected taints plus
# the platform's own (the default target tolerates everything, which hides what a platform needs).
GPU_TAINT_TARGET = {"nodeSelector": GPU_PRESENT, "taintSelectors": [GPU_TAINT]}


@dataclass(frozen=True)
class PlatformCase:
    provider_id: str
    product: str
    gpus: str
    labels: dict[str, str]
    entry: dict[str, str]
    allocatable: dict[str, str]
    expected_platform: str
    taints: tuple[dict[str, str], ...] = ()
    target: dict[str, Any] | None = None


def _case(
    provider_id: str,
    product: str,
    expected: str,
    *,
    gpus: str = "8",
    labels: dict[str, str] | None = None,
    entry: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    taints: tuple[dict[str, str], ...] = (),
    target: dict[str, Any] | None = None,
) -> PlatformCase:
    return PlatformCase(
        provider_id, product, gpus, labels or {}, entry or ALL_REDUCE, allocatable or {}, expected, taints, target
    )


CASES: dict[str, PlatformCase] = {
    "aws-p5-h100-nccl": _case(
        "aws:///us-east-1a/i-0{index}",
        H100,
        "aws",
        labels={INSTANCE_TYPE: "p5.48xlarge"},
        allocatable={"vpc.amazonaws.com/efa": "32"},
    ),
    "aws-p5-h100-training": _case(
        "aws:///us-east-1a/i-0{index}", H100, "aws", labels={INSTANCE_TYPE: "p5.48xlarge"}, entry=NEMOTRON
    ),
    "aws-p4d-a100-nccl": _case("aws:///us-east-1b/i-1{index}", A100, "aws", labels={INSTANCE_TYPE: "p4d.24xlarge"}),
    "aws-p6e-gb200-nccl": _case(
        "aws:///us-east-1a/i-2{index}", GB200, "aws", gpus="4", labels={INSTANCE_TYPE: "p6e-gb200.36xlarge"}
    ),
    "gcp-a3-mega-h100-nccl": _case(
        "gce://proj/us-central1-a/gke-a3mega-{index}", H100, "gcp", labels={INSTANCE_TYPE: "a3-megagpu-8g"}
    ),
    "gcp-a4x-gb200-nccl": _case(
        "gce://proj/us-central1-a/gke-a4x-{index}", GB200, "gcp", gpus="4", labels={INSTANCE_TYPE: "a4x-highgpu-4g"}
    ),
    "azure-nd-h100-v5-nccl": _case(
        "azure:///subscriptions/0/resourceGroups/mc/providers/Microsoft.Compute/virtualMachineScaleSets/gpu/"
        "virtualMachines/{index}",
        H100,
        "azure",
        labels={INSTANCE_TYPE: "Standard_ND96isr_H100_v5"},
        allocatable={"nvidia.com/mlnxnics": "8"},
    ),
    "oci-h100-nccl": _case("ocid1.instance.oc1.iad.gpu{index}", H100, "oci", labels={INSTANCE_TYPE: "BM.GPU.H100.8"}),
    "oci-gb300-nccl": _case(
        "ocid1.instance.oc1.iad.gb{index}", GB300, "oci", gpus="4", labels={INSTANCE_TYPE: "BM.GPU.GB300.4"}
    ),
    "onprem-bcm-gb200-rdma-ib": _case("", GB200, "onprem", gpus="4", allocatable={"rdma/ib": "8"}),
    "onprem-metal3-h100-is-mistral": _case("metal3://capi/bmh/gpu-{index}", H100, "mistral"),
    "gcp-a4x-gb300-training": _case(
        "gce://proj/us-central1-b/gke-a4x-{index}",
        GB300,
        "gcp",
        gpus="4",
        labels={INSTANCE_TYPE: "a4x-highgpu-4g"},
        entry=NEMOTRON,
        taints=(ARM64_TAINT, GPU_TAINT),
        target=GPU_TAINT_TARGET,
    ),
    "gcp-g4-rtxpro6000-nccl": _case(
        "gce://proj/us-central1-b/gke-g4-{index}", RTX_PRO_6000, "gcp", labels={INSTANCE_TYPE: "g4-standard-384"}
    ),
    "togetherai-kubevirt-h100-nccl": _case(
        "kubevirt://vm-gpu-{index}",
        H100,
        "togetherai",
        labels={"node-role.together.ai/worker": ""},
        allocatable={"nvidia.com/mlnxnics": "8"},
    ),
    "togetherai-kubevirt-h100-training": _case(
        "kubevirt://vm-gpu-{index}", H100, "togetherai", labels={"node-role.together.ai/worker": ""}, entry=NEMOTRON
    ),
    "mistral-metal3-gb300-nccl": _case(
        "metal3://capi/bmh/gb-{index}",
        GB300,
        "mistral",
        gpus="4",
        allocatable={"rdma/ib": "1"},
        taints=(ARM64_TAINT, GPU_TAINT),
        target=GPU_TAINT_TARGET,
    ),
    "forge-l40-nccl": _case(
        "", L40, "forge", labels={"nke.nvidia.com/site-name": "sjc4"}, allocatable={"nvidia.com/mlnxnics": "4"}
    ),
    "forge-gb200-nccl": _case("", GB200, "forge", gpus="4", labels={"nke.nvidia.com/site-name": "sjc4"}),
}


def case_nodes(case: PlatformCase, count: int = 2) -> list[dict[str, Any]]:
    nodes = []
    for index in range(count):
        labels = {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": case.product,
            "kubernetes.io/hostname": f"gpu-{index}",
            **case.labels,
        }
        spec: dict[str, Any] = {"providerID": case.provider_id.format(index=index)} if case.provider_id else {}
        if case.taints:
            spec["taints"] = [dict(taint) for taint in case.taints]
        allocatable = {"cpu": "190", "nvidia.com/gpu": case.gpus, **case.allocatable}
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"gpu-{index}", "labels": labels},
                "spec": spec,
                "status": {"allocatable": allocatable},
            }
        )
    return nodes


def planned_objects(
    case: PlatformCase, *, namespace: str | None = "nvcre"
) -> tuple[ResolvedCategory, Any, PlannedObjects]:
    """Plan the case's nodes and render its run-time objects exactly as the plan step does."""
    category = resolve(case.entry, target=case.target)
    nodes = case_nodes(case)
    plan = plan_category(nodes, category, arms=category_arms(category))
    objects = render_planned_objects(
        category, plan, name="cert-abcde-0-runtime", namespace=namespace, num_nodes=len(nodes)
    )
    return category, plan, objects
