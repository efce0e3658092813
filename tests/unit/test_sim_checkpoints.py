"""Which training pods of the simulated cluster checkpoint, where their saves persist, and how the player
resumes a restarted pod from them (`tests/sim/checkpoints.py`, `tests/sim/player.py`).

The player is exercised with the real `PodRunner` and the real store; only the API server it reports pod
status to is replaced by a recorder (unit tests start no control plane).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from nvcre_argo.measure.megatron import parse_megatron_log
from tests.sim.checkpoints import (
    CheckpointLocation,
    CheckpointSettings,
    CheckpointStore,
    checkpoint_location,
    checkpoint_settings,
)
from tests.sim.config import KubeletConfig
from tests.sim.player import play_workload
from tests.sim.pods import PodRunner
from tests.sim.workload import COMPLETION_INDEX

DIRECTORY = "/mnt/checkpoints/wf-abc-g0"
CHECKPOINTING = {"ENABLE_CHECKPOINT": "true", "SAVE_INTERVAL": "15", "CHECKPOINT_DIR": DIRECTORY}
PVC = {"persistentVolumeClaim": {"claimName": "checkpoints"}}
EMPTY_DIR: dict[str, Any] = {"emptyDir": {}}


def env_of(values: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in values.items()]


def training_pod(
    *,
    env: Mapping[str, str] = CHECKPOINTING,
    mounts: Mapping[str, tuple[str, Mapping[str, Any]]] | None = None,
    mount_options: Mapping[str, Any] | None = None,
    name: str = "train",
    rank: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """A one-node Megatron pod; `mounts` maps volume names to (mountPath, volume source), by default the
    `checkpoints` claim at /mnt/checkpoints. `mount_options` are added to every mount (subPath, readOnly).
    `rank` (node rank, number of nodes) makes it one pod of a multi-node run instead: its completion index
    and torchrun's `PET_NNODES`."""
    chosen = {"ckpt": ("/mnt/checkpoints", PVC)} if mounts is None else mounts
    annotations = {} if rank is None else {COMPLETION_INDEX: str(rank[0])}
    if rank is not None:
        env = {**env, "PET_NNODES": str(rank[1])}
    return {
        "metadata": {
            "name": name,
            "namespace": "cert-ns",
            "uid": f"uid-{name}",
            "labels": {},
            "annotations": annotations,
        },
        "spec": {
            "nodeName": "gpu-node-1",
            "containers": [
                {
                    "name": "node",
                    "image": "nvcr.io/nvidia/pytorch:25.08-py3",
                    "command": ["/bin/bash", "-c", "exec torchrun pretrain_gpt.py --log-interval 5"],
                    "env": env_of(env),
                    "volumeMounts": [
                        {"name": volume, "mountPath": path, **(mount_options or {})}
                        for volume, (path, _) in chosen.items()
                    ],
                }
            ],
            "volumes": [{"name": volume, **copy.deepcopy(dict(source))} for volume, (_, source) in chosen.items()],
        },
        "status": {"phase": "Pending"},
    }


# --------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, CheckpointSettings(DIRECTORY, 15), id="checkpointing"),
        pytest.param({"CHECKPOINT_DIR": DIRECTORY + "/"}, CheckpointSettings(DIRECTORY + "/", 15), id="slash"),
        pytest.param({"ENABLE_CHECKPOINT": "false"}, None, id="disabled"),
        pytest.param({"ENABLE_CHECKPOINT": "True"}, None, id="not-exactly-true"),
        pytest.param({"SAVE_INTERVAL": "0"}, None, id="interval-0"),
        pytest.param({"SAVE_INTERVAL": "ten"}, None, id="interval-not-a-number"),
        pytest.param({"CHECKPOINT_DIR": "checkpoints/wf"}, None, id="relative-directory"),
        pytest.param({"CHECKPOINT_DIR": ""}, None, id="empty-directory"),
    ],
)
def test_only_enable_checkpoint_true_with_an_interval_and_an_absolute_directory_checkpoints(
    changes: dict[str, str], expected: CheckpointSettings | None
) -> None:
    container = {"name": "node", "env": env_of({**CHECKPOINTING, **changes})}
    settings = checkpoint_settings(container)
    assert settings == expected
    if settings is not None:
        assert settings.path == PurePosixPath(DIRECTORY)


def test_a_checkpoint_env_taken_from_a_config_map_is_not_read() -> None:
    """The contract is plain `value` entries; a reference the sim cannot resolve means no checkpointing."""
    env: list[dict[str, Any]] = [*env_of({"ENABLE_CHECKPOINT": "true", "SAVE_INTERVAL": "15"})]
    env.append({"name": "CHECKPOINT_DIR", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "dir"}}})
    assert checkpoint_settings({"name": "node", "env": env}) is None


# --------------------------------------------------------------------------------------------- location


def located(path: str) -> CheckpointLocation:
    return CheckpointLocation("cert-ns", "checkpoints", PurePosixPath(path))


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(training_pod(), located("wf-abc-g0"), id="claim-at-a-prefix"),
        pytest.param(training_pod(mounts={"ckpt": (DIRECTORY, PVC)}), located("."), id="claim-at-the-directory"),
        pytest.param(training_pod(mounts={"ckpt": ("/mnt/checkpoints/", PVC)}), located("wf-abc-g0"), id="slash"),
        pytest.param(training_pod(mounts={"ckpt": ("/", PVC)}), located("mnt/checkpoints/wf-abc-g0"), id="root"),
        pytest.param(
            training_pod(mount_options={"subPath": "runs"}), located("runs/wf-abc-g0"), id="sub-path-is-part-of-the-key"
        ),
        pytest.param(
            training_pod(env={**CHECKPOINTING, "RUN": "r7"}, mount_options={"subPathExpr": "runs/$(RUN)"}),
            located("runs/r7/wf-abc-g0"),
            id="sub-path-expression",
        ),
        pytest.param(
            training_pod(mounts={"work": ("/mnt", EMPTY_DIR), "ckpt": ("/mnt/checkpoints", PVC)}),
            located("wf-abc-g0"),
            id="claim-inside-an-empty-dir",
        ),
        pytest.param(training_pod(mounts={"ckpt": ("/mnt/checkpoints", EMPTY_DIR)}), None, id="empty-dir"),
        pytest.param(training_pod(mounts={}), None, id="not-mounted"),
        pytest.param(
            training_pod(mounts={"ckpt": ("/mnt/check", PVC)}), None, id="a-string-prefix-is-not-a-path-prefix"
        ),
        pytest.param(
            training_pod(mounts={"ckpt": ("/mnt/checkpoints/other", PVC)}), None, id="claim-beside-the-directory"
        ),
        pytest.param(
            training_pod(mounts={"ckpt": ("/mnt", PVC), "scratch": ("/mnt/checkpoints", EMPTY_DIR)}),
            None,
            id="an-empty-dir-over-the-claim-hides-it",
        ),
        pytest.param(training_pod(mount_options={"readOnly": True}), None, id="read-only-mount"),
        pytest.param(
            training_pod(
                mounts={
                    "ckpt": (
                        "/mnt/checkpoints",
                        {"persistentVolumeClaim": {"claimName": "checkpoints", "readOnly": True}},
                    )
                }
            ),
            None,
            id="read-only-claim",
        ),
        pytest.param(
            training_pod(mounts={"ckpt": ("/mnt/checkpoints", {"ephemeral": {"volumeClaimTemplate": {}}})}),
            None,
            id="ephemeral-claim",
        ),
        pytest.param(training_pod(env={**CHECKPOINTING, "ENABLE_CHECKPOINT": "false"}), None, id="not-checkpointing"),
    ],
)
def test_saves_persist_only_on_a_claim_that_is_the_deepest_writable_mount_of_the_directory(
    pod: dict[str, Any], expected: CheckpointLocation | None
) -> None:
    assert checkpoint_location(pod) == expected


# --------------------------------------------------------------------------------------------- store


def test_the_store_keeps_each_location_s_saves_in_order_and_loads_the_last() -> None:
    store = CheckpointStore()
    first, other = located("wf-abc-g0"), located("wf-abc-g1")
    assert (store.latest(first), store.saved(first), store.locations()) == (None, (), ())
    for iteration in (10, 20):
        store.record(first, iteration)
    store.record(other, 5)
    assert (store.latest(first), store.saved(first)) == (20, (10, 20))
    assert (store.latest(other), store.locations()) == (5, (first, other))
    elsewhere = CheckpointLocation("another-ns", "checkpoints", PurePosixPath("wf-abc-g0"))
    assert store.latest(elsewhere) is None


# --------------------------------------------------------------------------------------------- the player


class RecordingCore:
    """The API server as far as a played pod uses it: status patches, recorded."""

    def __init__(self) -> None:
        self.phases: list[str] = []

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        del name, namespace
        self.phases.append(body["status"]["phase"])


class CountingKubelet:
    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}

    def mark(self, node: str, namespace: str, change: Mapping[str, Any]) -> None:
        raise AssertionError(f"no node is marked here: {node} {namespace} {change}")

    def next_attempt(self, namespace: str, node: str) -> int:
        attempt = self.attempts.get(node, 0)
        self.attempts[node] = attempt + 1
        return attempt

    def attempts_so_far(self, namespace: str, node: str) -> int:
        return self.attempts.get(node, 0)


def kubelet_config(workdir: Path) -> KubeletConfig:
    return KubeletConfig(
        kubeconfig="",
        workdir=str(workdir),
        apiserver_port=0,
        log_port=0,
        log_cert="",
        log_key="",
        nodes=[],
        images={},
        host_binds=[],
        sandbox_python="",
    )


def played_log(pod: dict[str, Any], store: CheckpointStore, kubelet: CountingKubelet, workdir: Path) -> str:
    """Play the pod to its end as the sim kubelet does; its main container's log. A short run: 0.2 s."""
    core = RecordingCore()
    runner = PodRunner(pod=pod, config=kubelet_config(workdir), core=core, pod_ip="127.1.0.1", play=None)  # type: ignore[arg-type]
    play_workload(runner, plan_text="defaults: {durationSeconds: 0.2}", kubelet=kubelet, checkpoints=store)
    assert core.phases[-1] == "Succeeded"
    return runner.containers[0].log_path.read_text(encoding="utf-8")


def test_a_restarted_pod_resumes_from_the_checkpoint_its_predecessor_saved_on_the_claim(tmp_path: Path) -> None:
    """`--train-iters` 20 (the sim's default), `--log-interval` 5, saves every 15: the first run saves at 15,
    the restart loads 15 and trains 20 only."""
    store, kubelet = CheckpointStore(), CountingKubelet()
    first = played_log(training_pod(name="train-a"), store, kubelet, tmp_path)
    assert "could not find the metadata file /mnt/checkpoints/wf-abc-g0/latest_checkpointed_iteration.txt" in first
    assert [record.iteration for record in parse_megatron_log(first).records] == [1, 5, 10, 15, 20]
    assert store.saved(located("wf-abc-g0")) == (15,)
    second = played_log(training_pod(name="train-b"), store, kubelet, tmp_path)
    assert " loading distributed checkpoint from /mnt/checkpoints/wf-abc-g0 at iteration 15\n" in second
    assert [record.iteration for record in parse_megatron_log(second).records] == [20]
    assert store.saved(located("wf-abc-g0")) == (15,)  # nothing more was due


def test_a_pod_whose_checkpoint_directory_is_on_an_empty_dir_prints_its_saves_and_keeps_none(tmp_path: Path) -> None:
    store, kubelet = CheckpointStore(), CountingKubelet()
    on_empty_dir = {"ckpt": ("/mnt/checkpoints", EMPTY_DIR)}
    first = played_log(training_pod(name="train-a", mounts=on_empty_dir), store, kubelet, tmp_path)
    assert "successfully saved checkpoint from iteration      15 to /mnt/checkpoints/wf-abc-g0" in first
    assert store.locations() == ()
    second = played_log(training_pod(name="train-b", mounts=on_empty_dir), store, kubelet, tmp_path)
    assert "will not load any checkpoints and will start from random" in second
    assert [record.iteration for record in parse_megatron_log(second).records] == [1, 5, 10, 15, 20]


def test_in_a_two_node_run_only_rank_0_s_pod_stores_the_saves_and_the_restarted_pair_resumes_from_them(
    tmp_path: Path,
) -> None:
    """Megatron saves from global rank 0 (the first node's pod) and logs training from the last rank: of the
    two pods on one claim, only rank 0's stores anything, and the restarted pair loads it."""
    store, kubelet = CheckpointStore(), CountingKubelet()
    last = played_log(training_pod(name="train-1-a", rank=(1, 2)), store, kubelet, tmp_path)
    assert "checkpoint" not in last
    assert [record.iteration for record in parse_megatron_log(last).records] == [1, 5, 10, 15, 20]
    assert store.locations() == ()
    first = played_log(training_pod(name="train-0-a", rank=(0, 2)), store, kubelet, tmp_path)
    assert "could not find the metadata file /mnt/checkpoints/wf-abc-g0/latest_checkpointed_iteration.txt" in first
    assert "successfully saved checkpoint from iteration      15 to /mnt/checkpoints/wf-abc-g0" in first
    assert parse_megatron_log(first).records == ()
    assert store.saved(located("wf-abc-g0")) == (15,)
    first = played_log(training_pod(name="train-0-b", rank=(0, 2)), store, kubelet, tmp_path)
    last = played_log(training_pod(name="train-1-b", rank=(1, 2)), store, kubelet, tmp_path)
    assert " loading distributed checkpoint from /mnt/checkpoints/wf-abc-g0 at iteration 15\n" in first
    assert "checkpoint" not in last
    assert [record.iteration for record in parse_megatron_log(last).records] == [20]
    assert store.saved(located("wf-abc-g0")) == (15,)  # nothing more was due
