"""The simulated cluster's static shared storage (`tests/sim/storage.py`): the manifests a claim binds to.

The binding itself is the real kube-controller-manager's and is exercised on the simulated cluster; here the
manifests are checked against what its binder matches on (class, capacity, access modes), against what the
typed client sends, and for addresses outside loopback.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.sim.storage import persistent_volume_manifests, storage_class_manifest


def test_the_storage_class_binds_claims_at_once_to_existing_volumes_only() -> None:
    assert storage_class_manifest("shared") == {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "shared"},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Retain",
    }


def test_each_volume_is_a_retained_read_write_many_volume_of_the_class_with_the_given_capacity() -> None:
    volumes = persistent_volume_manifests(count=3, capacity="10Ti", storage_class="shared")
    assert [volume["metadata"]["name"] for volume in volumes] == ["shared-1", "shared-2", "shared-3"]
    for volume in volumes:
        spec = volume["spec"]
        assert (spec["storageClassName"], spec["capacity"], spec["accessModes"]) == (
            "shared",
            {"storage": "10Ti"},
            ["ReadWriteMany"],
        )
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert "nodeAffinity" not in spec  # every node may run a pod of the claim
    assert len({json.dumps(volume["spec"]["nfs"], sort_keys=True) for volume in volumes}) == 3


def test_other_access_modes_can_be_offered() -> None:
    (volume,) = persistent_volume_manifests(count=1, access_modes=("ReadWriteMany", "ReadWriteOnce"))
    assert volume["spec"]["accessModes"] == ["ReadWriteMany", "ReadWriteOnce"]


def test_a_pool_of_no_volume_is_refused() -> None:
    with pytest.raises(ValueError, match="count: must be >= 1, got 0"):
        persistent_volume_manifests(count=0)


@pytest.mark.parametrize(
    ("model", "manifest"),
    [
        pytest.param(k8s.V1StorageClass, storage_class_manifest(), id="storage-class"),
        pytest.param(k8s.V1PersistentVolume, persistent_volume_manifests(count=1)[0], id="persistent-volume"),
    ],
)
def test_the_typed_client_sends_exactly_the_manifest(model: Any, manifest: dict[str, Any]) -> None:
    """`create_shared_storage` goes through the client's typed models; no field may be lost on the way."""
    sent = k8s.ApiClient().sanitize_for_serialization(model.from_dict(manifest))  # type: ignore[no-untyped-call]
    assert sent == manifest


def test_no_address_outside_loopback_appears() -> None:
    text = json.dumps([storage_class_manifest(), *persistent_volume_manifests(count=4)])
    addresses = re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", text)
    assert addresses  # the NFS server is named by address
    assert all(ipaddress.IPv4Address(address) in ipaddress.IPv4Network("127.0.0.0/8") for address in addresses)
