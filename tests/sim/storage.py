"""Static shared storage for the simulated cluster: one StorageClass and a pool of pre-made PersistentVolumes.

Why static: the cluster runs no storage provisioner (no CSI driver, no external-provisioner), so a claim is
bound only to a volume that already exists. The StorageClass says exactly that
(`kubernetes.io/no-provisioner`) with `volumeBindingMode: Immediate`, so the real kube-controller-manager's
PersistentVolume binder binds a claim of that class as soon as it is created, to a volume with its class,
its access modes and at least its request, before any pod uses it (a `WaitForFirstConsumer` class would
make the binding wait for the scheduler, one more moving part with nothing to gain here).

Why `nfs` with server 127.0.0.1: the API server accepts the volume source without any node plugin, the
binder needs none, and no address outside 127.0.0.0/8 appears. Nothing ever mounts it: the scheduler only
checks that the claim is bound and that the volume has no node affinity that excludes the node; workload
pods are played, not run, and get no volume materialised (their content is the sim kubelet's checkpoint
store, `tests/sim/checkpoints.py`); a pod that really runs here is refused a claim volume loudly
(`tests/sim/volumes.py`). A `hostPath` source would work as well, but it names a directory of this machine.

Why `persistentVolumeReclaimPolicy: Retain`: each volume serves one claim. When the claim is deleted the
volume becomes Released and is never bound again, so no test can ever meet another test's data through a
reused volume (the checkpoint store is keyed by claim anyway). `Delete` would make the controller-manager
look for a deleter for the volume: an NFS volume has none, so every deleted claim would leave a Failed
volume and a warning event; a hostPath one under /tmp would be removed from this machine by the
controller-manager itself. The price of Retain is that the pool is used up: make as many volumes as the
session's claims (calling again with a larger count adds the missing ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

SHARED_STORAGE_CLASS: Final = "nvcre-sim-shared"
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
NFS_SERVER: Final = "127.0.0.1"
NFS_EXPORT: Final = "/nvcre-sim"
DEFAULT_CAPACITY: Final = "10Ti"
READ_WRITE_MANY: Final = "ReadWriteMany"
STORAGE_LABEL: Final = "sim.nvcre.nvidia.com/storage-class"


def storage_class_manifest(name: str = SHARED_STORAGE_CLASS) -> dict[str, Any]:
    """A cluster-scoped StorageClass whose claims bind at once to existing volumes only."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": NO_PROVISIONER,
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Retain",
    }


def persistent_volume_manifests(
    *,
    count: int,
    capacity: str = DEFAULT_CAPACITY,
    storage_class: str = SHARED_STORAGE_CLASS,
    access_modes: Sequence[str] = (READ_WRITE_MANY,),
) -> list[dict[str, Any]]:
    """`count` volumes of the class, `<class>-1` .. `<class>-<count>`, each with `capacity` (a quantity such as
    `10Ti`); a claim may request at most that much, and only access modes among `access_modes`."""
    if count < 1:
        raise ValueError(f"count: must be >= 1, got {count}")
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{storage_class}-{index}", "labels": {STORAGE_LABEL: storage_class}},
            "spec": {
                "storageClassName": storage_class,
                "capacity": {"storage": capacity},
                "accessModes": list(access_modes),
                "volumeMode": "Filesystem",
                "persistentVolumeReclaimPolicy": "Retain",
                "nfs": {"server": NFS_SERVER, "path": f"{NFS_EXPORT}/{storage_class}-{index}"},
            },
        }
        for index in range(1, count + 1)
    ]


def create_shared_storage(
    api: k8s.ApiClient,
    *,
    volumes: int,
    capacity: str = DEFAULT_CAPACITY,
    storage_class: str = SHARED_STORAGE_CLASS,
) -> list[str]:
    """Create the StorageClass and `volumes` PersistentVolumes (see the module docstring); objects of those
    names that exist already are kept as they are. The names of the volumes, in order."""
    storage = k8s.StorageV1Api(api)
    core = k8s.CoreV1Api(api)
    storage_class_object = k8s.V1StorageClass.from_dict(storage_class_manifest(storage_class))
    if storage_class_object is None:
        raise AssertionError("a StorageClass manifest always makes a StorageClass")
    try:
        storage.create_storage_class(storage_class_object)
    except ApiException as error:
        _keep_existing(error)
    names = []
    for manifest in persistent_volume_manifests(count=volumes, capacity=capacity, storage_class=storage_class):
        volume = k8s.V1PersistentVolume.from_dict(manifest)
        if volume is None:
            raise AssertionError("a PersistentVolume manifest always makes a PersistentVolume")
        try:
            core.create_persistent_volume(volume)
        except ApiException as error:
            _keep_existing(error)
        names.append(str(manifest["metadata"]["name"]))
    return names


def _keep_existing(error: ApiException) -> None:
    """An object of that name exists (409 AlreadyExists): keep it; anything else is a failure."""
    if error.status != 409:
        raise error
