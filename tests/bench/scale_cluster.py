"""A 10,000-node GPU cluster made of synthetic Node objects on the real API server, and ways to count what a
step asks of that server.

The Nodes look like what kubelet, GPU Feature Discovery, the GPU operator and Node Feature Discovery leave on a
DGX-class H100 node: about 80 labels, the device plugin's allocatable GPUs, five conditions, node info and the
50 images kubelet reports by default (`--node-status-max-images`). Their size is the point: a plan step or a
health check that lists Nodes pays for every byte of them, so lean test Nodes would flatter both. Names are 42
characters, as in the issue that set the targets.

Objects are created with plain keep-alive HTTPS from a thread pool (pre-encoded JSON, no client-side model
walk): setting up 10,000 Nodes is the benchmark's fixture, not what it measures, so it must be quick.

Requests are counted twice, on both ends: `CountingApiClient` records every request the product's
`KubeClient` sends, and `server_request_counts` reads the API server's own `apiserver_request_total`, so a
figure does not depend on trusting either side alone.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from nvcre_argo.kube.client import KubeClient

GPU_PRESENT = "nvidia.com/gpu.present"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
IMAGES_PER_NODE = 50
CREATE_WORKERS = 12

# What Node Feature Discovery labels on a Sapphire Rapids host (a subset).
_CPU_FLAGS = (
    "ADX",
    "AESNI",
    "AMXBF16",
    "AMXINT8",
    "AMXTILE",
    "AVX",
    "AVX2",
    "AVX512BF16",
    "AVX512BITALG",
    "AVX512BW",
    "AVX512CD",
    "AVX512DQ",
    "AVX512F",
    "AVX512FP16",
    "AVX512IFMA",
    "AVX512VBMI",
    "AVX512VBMI2",
    "AVX512VL",
    "AVX512VNNI",
    "AVX512VPOPCNTDQ",
    "AVXVNNI",
    "FMA3",
    "GFNI",
    "VAES",
)


def node_name(index: int) -> str:
    """42 characters: region, pool, rack (eight nodes each) and slot."""
    return f"dgx-h100-80gb-use1a-pool01-rack{index // 8:04d}-node{index % 8:02d}"


def _labels(name: str) -> dict[str, str]:
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "node-role.kubernetes.io/gpu-worker": "",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": "us-east-1a",
        GPU_PRESENT: "true",
        "nvidia.com/gpu.product": GPU_PRODUCT,
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.machine": "DGX-H100",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "90",
        "nvidia.com/cuda.driver.rev": "07",
        "nvidia.com/cuda.driver-version.full": "550.90.07",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/gfd.timestamp": "1764547200",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mps.capable": "false",
        "feature.node.kubernetes.io/kernel-version.full": "5.15.0-1063-nvidia",
        "feature.node.kubernetes.io/kernel-version.major": "5",
        "feature.node.kubernetes.io/kernel-version.minor": "15",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/pci-15b3.present": "true",
        "feature.node.kubernetes.io/rdma.available": "true",
        "feature.node.kubernetes.io/rdma.capable": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
        "feature.node.kubernetes.io/cpu-model.family": "6",
        "feature.node.kubernetes.io/cpu-model.id": "143",
        "feature.node.kubernetes.io/memory-numa": "true",
        "feature.node.kubernetes.io/network-sriov.capable": "true",
        "feature.node.kubernetes.io/storage-nonrotationaldisk": "true",
    }
    for component in (
        "container-toolkit",
        "dcgm",
        "dcgm-exporter",
        "device-plugin",
        "driver",
        "gpu-feature-discovery",
        "mig-manager",
        "node-status-exporter",
        "operator-validator",
    ):
        labels[f"nvidia.com/gpu.deploy.{component}"] = "true"
    for flag in _CPU_FLAGS:
        labels[f"feature.node.kubernetes.io/cpu-cpuid.{flag}"] = "true"
    return labels


def _images(index: int) -> list[dict[str, Any]]:
    """What kubelet reports: a digest and a tag per image, largest first; distinct per node, as pulls differ."""
    images = []
    for number in range(IMAGES_PER_NODE):
        digest = f"{(index * 7919 + number * 104729) % (1 << 64):016x}" * 4
        repository = f"nvcr.io/nvidia/bench-workload-{number:02d}"
        images.append(
            {
                "names": [f"{repository}@sha256:{digest}", f"{repository}:24.{number % 12 + 1:02d}-py3"],
                "sizeBytes": 9_000_000_000 - number * 150_000_000,
            }
        )
    return images


def synthetic_node(index: int) -> dict[str, Any]:
    """One DGX-class H100 Node as the API server would hold it after kubelet registered it."""
    name = node_name(index)
    resources = {
        "cpu": "192",
        "ephemeral-storage": "28486691640Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "2113393232Ki",
        "nvidia.com/gpu": "8",
        "pods": "110",
        "rdma/rdma_shared_device_a": "63",
    }
    heartbeat = "2026-12-01T00:00:00Z"
    conditions = [
        {"type": kind, "status": "False", "reason": f"Kubelet{reason}", "message": message}
        for kind, reason, message in (
            ("MemoryPressure", "HasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "HasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "HasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    )
    for condition in conditions:
        condition |= {"lastHeartbeatTime": heartbeat, "lastTransitionTime": heartbeat}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": _labels(name),
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid,kernel-version,pci-10de.present,rdma",
            },
        },
        "spec": {
            "podCIDR": f"10.{index // 65536 % 256}.{index // 256 % 256}.0/24",
            "providerID": f"aws:///us-east-1a/i-{index:017x}",
        },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.200.{index // 256 % 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"ec2{index:05x}-0000-4000-8000-{index:012x}",
                "bootID": f"{index * 31:08x}-0000-4000-8000-000000000000",
                "kernelVersion": "5.15.0-1063-nvidia",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.20",
                "kubeletVersion": "v1.30.4",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": _images(index),
        },
    }


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach the API server, read from a kubeconfig (token user, inlined CA)."""

    host: str
    port: int
    token: str
    context: ssl.SSLContext

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Endpoint:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        cluster = config["clusters"][0]["cluster"]
        server = urlsplit(cluster["server"])
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        return cls(str(server.hostname), int(server.port or 443), config["users"][0]["user"]["token"], context)

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=120)


def create_all(endpoint: Endpoint, objects: Iterable[tuple[str, bytes]], *, workers: int = CREATE_WORKERS) -> int:
    """POST every (path, JSON body) with `workers` keep-alive connections; returns the bytes sent. Raises on
    the first answer that is not 201."""
    local = threading.local()

    def post(item: tuple[str, bytes]) -> int:
        path, body = item
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = endpoint.connection()
        headers = {
            "Authorization": f"Bearer {endpoint.token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read()
        if response.status != 201:
            raise RuntimeError(f"POST {path}: HTTP {response.status}: {answer[:500]!r}")
        return len(body)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="create") as pool:
        return sum(pool.map(post, objects))


def encoded(path: str, manifests: Iterable[dict[str, Any]]) -> Iterator[tuple[str, bytes]]:
    for manifest in manifests:
        yield path, json.dumps(manifest, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    body_bytes: int = 0  # compact JSON of the body sent, 0 without one
    body_name: str = ""  # the body's metadata.name, for writes the server refused


class CountingApiClient(k8s_client.ApiClient):
    """The kubernetes client the product's `KubeClient` wraps, recording every request it sends, so a step run
    in-process can be charged request by request (the answer still comes from the real API server)."""

    def __init__(self, configuration: k8s_client.Configuration) -> None:
        super().__init__(configuration)
        self.requests: list[Request] = []
        self.lock = threading.Lock()

    def call_api(
        self, method: str, url: str, header_params: Any = None, body: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        parts = urlsplit(url)
        size, name = 0, ""
        if body is not None:
            size = len(json.dumps(body, separators=(",", ":")).encode())
            name = str(((body.get("metadata") or {}) if isinstance(body, dict) else {}).get("name", ""))
        with self.lock:
            self.requests.append(Request(method, parts.path, parts.query, size, name))
        return super().call_api(method, url, header_params, body, *args, **kwargs)


class TimedKubeClient(KubeClient):
    """The product's client, adding up the seconds its requests take (sending, waiting, reading and decoding
    the answer), so a step's time splits into the API server's share and its own computing."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        super().__init__(api_client)
        self.request_seconds = 0.0

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        began = time.perf_counter()
        try:
            return super().request(method, path, **kwargs)
        finally:
            self.request_seconds += time.perf_counter() - began


def counting_kube(kubeconfig: Path) -> tuple[TimedKubeClient, CountingApiClient]:
    """The product's client over a recording transport: (client, recorder)."""
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=configuration
    )
    api = CountingApiClient(configuration)
    return TimedKubeClient(api), api


_METRIC = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def server_request_counts(get: Callable[[str], tuple[int, str]]) -> Counter[tuple[str, str]]:
    """The API server's own count of resource requests, by (verb, resource[/subresource]), from /metrics
    (`get` is the control plane's authenticated GET). Non-resource requests (/metrics itself) are left out."""
    status, text = get("/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics: HTTP {status}")
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        match = _METRIC.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match.group(1)))
        resource = labels.get("resource", "")
        if not resource:
            continue
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[(labels.get("verb", ""), resource)] += round(float(match.group(2)))
    return counts


@contextmanager
def output_lock(directory: Path) -> Iterator[None]:
    """The step outputs' fixed directory is shared by every process on this machine (the integration tests
    lock it the same way): hold it while a step subprocess writes there."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".test-lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
