"""`nvcre-argo plan --kubeconfig` against a real API server: the Nodes it lists (through the target's label
selector, page by page, as the plan step lists them) give the preview a saved list of the same Nodes gives.

Nodes are cluster-scoped, so this test's Nodes carry `SELECTOR_LABEL=<namespace>` and its Certification
targets exactly that (see steps_support); a Node under another value must not appear anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from nvcre_argo.cli.main import cli
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import NODES
from nvcre_argo.yamlio import dump_yaml
from tests.harness.controlplane import Cluster
from tests.integration.steps_support import B200, SELECTOR_LABEL, NodeSet

NO_CLUSTER_ENV: dict[str, str | None] = {
    "KUBECONFIG": None,
    "KUBERNETES_SERVICE_HOST": None,
    "KUBERNETES_SERVICE_PORT": None,
}


def write_certification(directory: Path, selector: str) -> Path:
    path = directory / "cert.yaml"
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": "fleet-cert", "namespace": "nvcre"},
        "spec": {
            "target": {"nodeSelector": {SELECTOR_LABEL: selector}},
            "categories": [
                {"domain": "communication", "variant": "nccl-all-reduce", "options": {"nodesPerJob": 2}},
                {"domain": "diagnostics", "variant": "dcgm-level4"},
            ],
        },
    }
    path.write_text(dump_yaml(document), encoding="utf-8")
    return path


def plan(*args: str) -> Result:
    result = CliRunner().invoke(cli, ["plan", *args], env=NO_CLUSTER_ENV, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_plan_on_the_cluster_is_the_plan_of_the_same_nodes_saved_to_a_file(
    kube: KubeClient, nodes: NodeSet, control_plane: Cluster, tmp_path: Path
) -> None:
    for short in ("n0", "n1", "n2"):
        nodes.add(short)
    nodes.add("cordoned", unschedulable=True)
    nodes.add("b200", product=B200)
    nodes.add("small", gpus="4")
    nodes.add("elsewhere", selector=f"{nodes.prefix}-other")  # another target's node
    cert = write_certification(tmp_path, nodes.namespace)

    live = plan(str(cert), "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
    # What `kubectl get nodes -o yaml` saves: every Node of the cluster, whole, in a List.
    saved, _ = kube.list(NODES)
    nodes_file = tmp_path / "nodes.yaml"
    nodes_file.write_text(dump_yaml({"apiVersion": "v1", "kind": "List", "items": saved}), encoding="utf-8")
    offline = plan(str(cert), "--nodes", str(nodes_file), "-o", "json")

    assert live.stdout == offline.stdout
    document = json.loads(live.stdout)
    all_reduce, dcgm = document["categories"]
    assert all_reduce["candidates"] == nodes.names(["b200", "cordoned", "n0", "n1", "n2", "small"])
    assert all_reduce["selected"] == nodes.names(["n0", "n1", "n2"])
    assert {nodes.short(item["node"]): item["reason"] for item in all_reduce["excluded"]} == {
        "b200": "MinorityGPUArchitecture",
        "cordoned": "Cordoned",
        "small": "InsufficientGPUs",
    }
    # Chunks of 2 over 3 nodes: g0 = n0, n1; g1-overflow = n2 and n0 borrowed. 2 x 16 GPUs x 1h.
    assert [[nodes.short(name) for name in group["nodes"]] for group in all_reduce["groups"]] == [
        ["n0", "n1"],
        ["n0", "n2"],
    ]
    assert all_reduce["gpuHours"] == {"upperBound": 32.0, "nominal": None}
    # dcgm-level4: one group per node; 3 x 8 GPUs x 2h, nominal 3 x 8 GPUs x 1.5h.
    assert len(dcgm["trainJobs"]) == 3
    assert dcgm["gpuHours"] == {"upperBound": 48.0, "nominal": 36.0}
    assert nodes.name("elsewhere") not in live.stdout

    live_text = plan(str(cert), "--kubeconfig", str(control_plane.kubeconfig))
    offline_text = plan(str(cert), "--nodes", str(nodes_file))
    assert live_text.stdout == offline_text.stdout
    assert live_text.stdout.endswith(
        "total: at most 80 GPU-hours; nominal 36 GPU-hours for the 1 of 2 with a nominal duration\n"
    )
