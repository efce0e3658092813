"""Each platform arm's TrainingRuntime (and TrainJob) submitted to a real kube-apiserver with `dryRun=All` and
`fieldValidation=Strict`, from the Node objects of tests/unit/platform_cases.py.

The unit tests validate the same objects against the Trainer CRDs offline (tests/unit/test_platform_render.py);
the API server also applies its own pod-spec validation, defaulting and unknown-field rejection to what the
arms add (sidecar init containers with `restartPolicy: Always`, resource claims, hugepages, extended resources,
annotations). The ComputeDomain itself is not dry-run: its CRD (NVIDIA's DRA driver) is not installed here.
"""

from __future__ import annotations

import pytest

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.render.trainjob import render_trainjob
from tests.integration.test_dry_run import rejections
from tests.unit.platform_cases import CASES, planned_objects


@pytest.mark.parametrize("key", list(CASES))
def test_the_api_server_accepts_each_platform_arms_runtime_and_trainjob(
    kube: KubeClient, namespace: str, key: str
) -> None:
    category, plan, objects = planned_objects(CASES[key], namespace=namespace)
    trainjob = render_trainjob(
        category,
        objects.gpu,
        name="cert-abcde-0-g0",
        namespace=namespace,
        certification="cert",
        runtime_name=objects.runtime["metadata"]["name"],
        group="g0",
        nodes=plan.groups[0].nodes,
    )

    assert rejections(kube, [objects.runtime, trainjob]) == []


def test_the_api_server_rejects_an_arm_with_a_misspelled_pod_field(kube: KubeClient, namespace: str) -> None:
    """Control: the same call must be able to fail on what an arm adds."""
    _, _, objects = planned_objects(CASES["gcp-a3-mega-h100-nccl"], namespace=namespace)
    spec = objects.runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    daemon = next(init for init in spec["initContainers"] if init["name"] == "tcpxo-daemon")
    daemon["restartPolcy"] = daemon.pop("restartPolicy")

    (problem,) = rejections(kube, [objects.runtime])

    assert "restartPolcy" in problem
