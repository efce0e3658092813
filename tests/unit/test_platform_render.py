"""Each platform arm's rendered TrainingRuntime, from Node objects with that platform's providerID and labels.

The objects are planned and rendered by the functions the plan step calls (`plan_category` with the built-in
arms, then `render_planned_objects`), validated strictly against the pinned Trainer CRDs, pinned by a
reviewed snapshot, and checked for the facts of docs/platforms.md that make the fabric work (EFA devices and
`FI_PROVIDER=efa`, the TCPXO sidecar and networks, InfiniBand/RoCE NICs and GID index, the ComputeDomain
claim). The same objects go to a real API server in tests/integration/test_platform_dry_run.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nvcre_argo.render import pods
from nvcre_argo.render.trainjob import render_trainjob
from tests.support.crd_schemas import validation_errors
from tests.unit.platform_cases import CASES, PlatformCase, planned_objects


def worker(runtime: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The `node` replicated job's pod spec and its first container (the GPU worker of every entry)."""
    job = next(job for job in pods.replicated_jobs(runtime["spec"]) if job["name"] == "node")
    spec = pods.pod_spec(job)
    return spec, spec["containers"][0]


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


@pytest.fixture(params=list(CASES), ids=list(CASES))
def case(request: pytest.FixtureRequest) -> PlatformCase:
    return CASES[request.param]


def test_the_plan_records_the_detected_platform_and_the_applied_arms(case: PlatformCase) -> None:
    _, plan, _ = planned_objects(case)

    assert plan.platform is not None
    assert plan.platform.name == case.expected_platform
    assert plan.platform.source == "detected"


def test_the_rendered_runtime_validates_strictly_against_the_trainer_crd(case: PlatformCase) -> None:
    category, plan, objects = planned_objects(case)
    trainjob = render_trainjob(
        category,
        objects.gpu,
        name="cert-abcde-0-g0",
        namespace="nvcre",
        certification="cert",
        runtime_name=objects.runtime["metadata"]["name"],
        group="g0",
        nodes=plan.groups[0].nodes,
    )

    assert validation_errors("TrainingRuntime", objects.runtime) == []
    assert validation_errors("TrainJob", trainjob) == []


def test_the_rendered_runtime_matches_the_reviewed_snapshot(case: PlatformCase, snapshot: Any) -> None:
    _, plan, objects = planned_objects(case)

    assert {
        "platform": plan.platform,
        "runtime": objects.runtime,
        "computeDomain": objects.compute_domain,
    } == snapshot


def test_no_container_lists_an_environment_variable_twice(case: PlatformCase) -> None:
    """The API server rejects duplicate env names in some paths; two values would also be ambiguous."""
    _, _, objects = planned_objects(case)
    for _, spec in [(None, pods.pod_spec(job)) for job in pods.replicated_jobs(objects.runtime["spec"])]:
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            names = [item["name"] for item in container.get("env", [])]
            assert len(names) == len(set(names)), container["name"]


# --- what makes each fabric work (docs/platforms.md (b0)-(b9)) --------------------------------------------------


def test_aws_p5_nccl_uses_32_efa_devices_the_efa_provider_and_the_ofi_image_with_its_mpirun() -> None:
    category, plan, objects = planned_objects(CASES["aws-p5-h100-nccl"])
    _, container = worker(objects.runtime)

    assert plan.platform is not None
    assert plan.platform.arms == ("aws-efa-nccl-tests",)
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32
    assert container["resources"]["requests"]["vpc.amazonaws.com/efa"] == 32
    assert env_of(container)["FI_PROVIDER"] == "efa"
    assert env_of(container)["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert "efa" in container["image"]
    assert "ofiv" in container["image"]
    trainjob = render_trainjob(
        category,
        objects.gpu,
        name="j",
        namespace="nvcre",
        certification="cert",
        runtime_name="r",
        group="g0",
        nodes=("gpu-0", "gpu-1"),
    )
    command, args = trainjob["spec"]["trainer"]["command"], trainjob["spec"]["trainer"]["args"]
    assert command[-1] == "/opt/amazon/openmpi/bin/mpirun"
    assert "/opt/nccl-tests/build/all_reduce_perf" in args
    assert not any("rm -rf /opt/amazon" in part for part in [*command, *args])
    forwarded = {args[index + 1] for index, item in enumerate(args) if item == "-x"}
    assert {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME"} <= forwarded


def test_aws_p5_training_gets_the_p5_cpu_and_memory_and_efa() -> None:
    _, _, objects = planned_objects(CASES["aws-p5-h100-training"])
    _, container = worker(objects.runtime)

    assert container["resources"]["limits"].items() >= {"cpu": "192", "memory": "1800Gi"}.items()
    assert container["resources"]["requests"].items() >= {"cpu": "128", "memory": "1200Gi"}.items()
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32


def test_a_cpu_limit_the_user_set_beats_the_p5_arm_and_the_defaults_do_not() -> None:
    from nvcre_argo.plan.planner import plan_category
    from nvcre_argo.plan.platform import category_arms
    from nvcre_argo.render.planned import render_planned_objects
    from tests.unit.platform_cases import NEMOTRON, case_nodes
    from tests.unit.test_plan import resolve

    category = resolve({**NEMOTRON, "options": {"resources": {"limits": {"cpu": "150"}}}})
    plan = plan_category(case_nodes(CASES["aws-p5-h100-training"]), category, arms=category_arms(category))
    container = worker(render_planned_objects(category, plan, name="r", namespace="n", num_nodes=2).runtime)[1]

    assert container["resources"]["limits"]["cpu"] == "150"
    assert container["resources"]["limits"]["memory"] == "1800Gi"
    assert container["resources"]["requests"]["cpu"] == "128"


def test_aws_p4d_requests_the_4_efa_devices_it_has() -> None:
    _, _, objects = planned_objects(CASES["aws-p4d-a100-nccl"])

    assert worker(objects.runtime)[1]["resources"]["limits"]["vpc.amazonaws.com/efa"] == 4


def test_aws_gb200_has_efa_hugepages_and_the_compute_domain_claim() -> None:
    _, _, objects = planned_objects(CASES["aws-p6e-gb200-nccl"])
    spec, container = worker(objects.runtime)

    assert container["resources"]["limits"]["hugepages-2Mi"] == "10256Mi"
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == 4
    assert env_of(container)["FI_EFA_FORK_SAFE"] == "1"
    assert spec["resourceClaims"] == [
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "cert-abcde-0-runtime-channel"}
    ]
    assert container["resources"]["claims"] == [{"name": "compute-domain-channel"}]
    assert objects.compute_domain is not None
    assert objects.compute_domain["spec"] == {
        "numNodes": 2,
        "channel": {"allocationMode": "Single", "resourceClaimTemplate": {"name": "cert-abcde-0-runtime-channel"}},
    }


def test_gcp_a3_mega_runs_the_tcpxo_daemon_beside_the_worker_on_eight_gpu_nics() -> None:
    _, _, objects = planned_objects(CASES["gcp-a3-mega-h100-nccl"])
    spec, container = worker(objects.runtime)
    annotations = pods.pod_template(
        next(job for job in pods.replicated_jobs(objects.runtime["spec"]) if job["name"] == "node")
    )["metadata"]["annotations"]

    (daemon,) = [init for init in spec["initContainers"] if init["name"] == "tcpxo-daemon"]
    assert daemon["restartPolicy"] == "Always"
    assert "tcpgpudmarxd" in daemon["image"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert [item["network"] for item in json.loads(annotations["networking.gke.io/interfaces"])] == [
        "default",
        *[f"gpu-nic{index}" for index in range(8)],
    ]
    assert env_of(container)["NCCL_FASTRAK_IFNAME"] == ",".join(f"eth{index}" for index in range(1, 9))
    assert {"mountPath": "/usr/local/nvidia", "name": "nvidia-install-dir-host", "readOnly": True} in container[
        "volumeMounts"
    ]


def test_gcp_a4x_requests_the_four_rdma_networks() -> None:
    _, _, objects = planned_objects(CASES["gcp-a4x-gb200-nccl"])
    limits = worker(objects.runtime)[1]["resources"]["limits"]

    assert [key for key in limits if key.startswith("networking.gke.io.networks/")] == [
        f"networking.gke.io.networks/rdma-{index}" for index in range(4)
    ]


def test_azure_requests_the_infiniband_nics_and_locks_memory() -> None:
    _, _, objects = planned_objects(CASES["azure-nd-h100-v5-nccl"])
    container = worker(objects.runtime)[1]

    assert container["resources"]["limits"]["nvidia.com/mlnxnics"] == 8
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    assert env_of(container)["NCCL_IB_QPS_PER_CONNECTION"] == "4"


def test_oci_repeats_the_sriov_network_once_per_nic_with_rocev2_gid_3() -> None:
    _, _, objects = planned_objects(CASES["oci-h100-nccl"])
    job = next(job for job in pods.replicated_jobs(objects.runtime["spec"]) if job["name"] == "node")
    container = worker(objects.runtime)[1]

    networks = pods.pod_template(job)["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
    assert networks == ",".join(["network-operator/sriov-net"] * 8)
    assert env_of(container)["NCCL_IB_GID_INDEX"] == "3"
    assert env_of(container)["NCCL_IB_TC"] == "41"


def test_oci_gb300_uses_four_nics_and_the_node_topology_file() -> None:
    _, _, objects = planned_objects(CASES["oci-gb300-nccl"])
    container = worker(objects.runtime)[1]

    assert container["resources"]["limits"]["nvidia.com/mlnxnics"] == 4
    assert env_of(container)["NCCL_TOPO_FILE"] == "/etc/nccl/topo.xml"


def test_onprem_requests_the_one_nic_resource_found_on_every_node() -> None:
    _, plan, objects = planned_objects(CASES["onprem-bcm-gb200-rdma-ib"])

    assert plan.platform is not None
    assert plan.platform.nic_resource == "rdma/ib"
    assert worker(objects.runtime)[1]["resources"]["limits"]["rdma/ib"] == 8
    assert "NCCL_IB_HCA" not in env_of(worker(objects.runtime)[1])


def test_metal3_nodes_are_detected_as_mistral_and_get_no_shipped_arm() -> None:
    _, plan, objects = planned_objects(CASES["onprem-metal3-h100-is-mistral"])

    assert plan.platform is not None
    assert (plan.platform.name, plan.platform.arms) == ("mistral", ())
    assert "NCCL_IB_HCA" not in env_of(worker(objects.runtime)[1])


def node_job(runtime: dict[str, Any]) -> dict[str, Any]:
    return next(job for job in pods.replicated_jobs(runtime["spec"]) if job["name"] == "node")


def test_gcp_a3_mega_sets_the_catalog_fastrak_environment_with_googles_protocol_and_nvls_tree_chunk() -> None:
    _, _, objects = planned_objects(CASES["gcp-a3-mega-h100-nccl"])
    env = env_of(worker(objects.runtime)[1])

    assert env["NCCL_PROTO"] == "Simple,LL128"
    assert env["NCCL_NVLSTREE_MAX_CHUNKSIZE"] == "131072"
    assert env["NCCL_NET_GDR_LEVEL"] == "PIX"
    assert env["NCCL_FASTRAK_NUM_FLOWS"] == "2"
    assert env["NCCL_FASTRAK_USE_LLCM"] == "1"
    assert "NCCL_ALGO" not in env
    assert "NCCL_NVLS_ENABLE" not in env


def test_gcp_a4x_annotates_the_job_template_and_the_pod_and_tolerates_arm64_gpu_nodes() -> None:
    _, _, objects = planned_objects(CASES["gcp-a4x-gb300-training"])
    job = node_job(objects.runtime)
    spec, container = worker(objects.runtime)

    job_annotations = pods.job_template(job)["metadata"]["annotations"]
    assert job_annotations == pods.pod_template(job)["metadata"]["annotations"]
    assert [item["network"] for item in json.loads(job_annotations["networking.gke.io/interfaces"])] == [
        "default",
        *[f"rdma-{index}" for index in range(4)],
    ]
    assert env_of(container)["NCCL_NET_GDR_LEVEL"] == "5"
    assert {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]


def test_gcp_g4_runs_nccl_over_tcp_with_system_wide_p2p_on_eight_gpus() -> None:
    _, plan, objects = planned_objects(CASES["gcp-g4-rtxpro6000-nccl"])
    container = worker(objects.runtime)[1]

    assert plan.platform is not None
    assert plan.platform.arms == ("gcp-g4-tcp", "gcp-g4-p2p-8-gpus")
    assert env_of(container)["NCCL_IB_DISABLE"] == "1"
    assert env_of(container)["NCCL_P2P_LEVEL"] == "SYS"
    assert not [key for key in container["resources"]["limits"] if "networks" in key or "mlnxnics" in key]


def test_togetherai_requests_its_nics_and_pins_the_exact_hca_list_in_nccl_tests_and_training() -> None:
    for key in ("togetherai-kubevirt-h100-nccl", "togetherai-kubevirt-h100-training"):
        _, _, objects = planned_objects(CASES[key])
        container = worker(objects.runtime)[1]

        assert container["resources"]["limits"]["nvidia.com/mlnxnics"] == 8, key
        assert env_of(container)["NCCL_IB_HCA"].startswith("=mlx5_7:1,"), key
        assert env_of(container)["NCCL_IB_QPS_PER_CONNECTION"] == "2", key


def test_mistral_gb300_requests_one_shared_ib_device_and_tolerates_arm64_beside_the_target_taint() -> None:
    _, plan, objects = planned_objects(CASES["mistral-metal3-gb300-nccl"])
    spec, container = worker(objects.runtime)

    assert plan.platform is not None
    assert plan.platform.arms == ("gb-compute-domain", "mistral-gb300-ib")
    assert container["resources"]["limits"]["rdma/ib"] == 1
    assert container["resources"]["requests"]["rdma/ib"] == 1
    assert env_of(container)["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"
    assert spec["tolerations"] == [
        {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]


def test_a_target_that_tolerates_everything_makes_the_platform_tolerations_redundant() -> None:
    from dataclasses import replace

    _, _, objects = planned_objects(replace(CASES["mistral-metal3-gb300-nccl"], target=None))

    assert worker(objects.runtime)[0]["tolerations"] == [{"operator": "Exists"}]


def test_forge_l40_uses_its_four_ib_nics_with_gid_3_and_keeps_mpi_on_tcp() -> None:
    _, _, objects = planned_objects(CASES["forge-l40-nccl"])
    container = worker(objects.runtime)[1]

    assert container["resources"]["limits"]["nvidia.com/mlnxnics"] == 4
    assert env_of(container)["NCCL_IB_GID_INDEX"] == "3"
    assert env_of(container)["UCX_TLS"] == "tcp"


def test_forge_gb200_pins_the_launchers_mpi_bootstrap_to_tcp_on_eth0() -> None:
    category, plan, objects = planned_objects(CASES["forge-gb200-nccl"])
    launcher = next(job for job in pods.replicated_jobs(objects.runtime["spec"]) if job["name"] == "launcher")
    env = env_of(pods.pod_spec(launcher)["containers"][0])

    assert {key: env[key] for key in env if key.startswith("OMPI_MCA_")} == {
        "OMPI_MCA_coll_ucc_enable": "0",
        "OMPI_MCA_coll_hcoll_enable": "0",
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "tcp,self",
        "OMPI_MCA_btl_tcp_if_include": "eth0",
        "OMPI_MCA_oob": "tcp",
        "OMPI_MCA_oob_tcp_if_include": "eth0",
    }
    trainjob = render_trainjob(
        category,
        objects.gpu,
        name="j",
        namespace="n",
        certification="c",
        runtime_name="r",
        group="g0",
        nodes=plan.groups[0].nodes,
    )
    args = trainjob["spec"]["trainer"]["args"]
    forwarded = {args[index + 1] for index, item in enumerate(args) if item == "-x"}
    assert {"UCX_TLS", "UCX_NET_DEVICES"} <= forwarded


def test_user_options_and_the_gang_scheduler_apply_after_the_platform_arms() -> None:
    from nvcre_argo.plan.planner import plan_category
    from nvcre_argo.plan.platform import category_arms
    from nvcre_argo.render.planned import render_planned_objects
    from tests.unit.platform_cases import ALL_REDUCE, case_nodes
    from tests.unit.test_plan import resolve

    category = resolve(
        {**ALL_REDUCE, "options": {"image": "registry.example.com/mine:1"}},
        gangScheduler={"schedulerName": "kai-scheduler"},
    )
    plan = plan_category(case_nodes(CASES["aws-p5-h100-nccl"]), category, arms=category_arms(category))
    objects = render_planned_objects(category, plan, name="r", namespace="nvcre", num_nodes=2)
    spec, container = worker(objects.runtime)

    assert container["image"] == "registry.example.com/mine:1"
    assert spec["schedulerName"] == "kai-scheduler"
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32


def test_aws_loopback_runs_the_nccl_tests_binary_of_the_image_the_arm_puts_in() -> None:
    """The arm replaces the image of every communication entry, single-node loopback included, so the binary
    path must follow it (the NGC path does not exist in the aws-ofi-nccl image)."""
    from nvcre_argo.plan.planner import plan_category
    from nvcre_argo.plan.platform import category_arms
    from nvcre_argo.render.planned import render_planned_objects
    from tests.unit.platform_cases import case_nodes
    from tests.unit.test_plan import resolve

    category = resolve({"domain": "communication", "variant": "nccl-loopback"})
    plan = plan_category(case_nodes(CASES["aws-p5-h100-nccl"]), category, arms=category_arms(category))
    objects = render_planned_objects(category, plan, name="r", namespace="n", num_nodes=1)
    trainjob = render_trainjob(
        category, objects.gpu, name="j", namespace="n", certification="c", runtime_name="r", group="g0", nodes=["gpu-0"]
    )

    assert "efa" in worker(objects.runtime)[1]["image"]
    assert trainjob["spec"]["trainer"]["command"] == ["/opt/nccl-tests/build/all_reduce_perf"]
