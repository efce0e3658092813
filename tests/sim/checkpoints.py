"""Megatron-LM checkpoints on the simulated cluster: which pods save, where the saves land, and the store.

A checkpointing Megatron pod says so in its main container's env (plain `value` entries, never parsed from
the command line, which only forwards them to `--save`/`--load`/`--save-interval`):

    ENABLE_CHECKPOINT  "true" (anything else: no checkpointing at all)
    SAVE_INTERVAL      iterations between saves, a positive integer
    CHECKPOINT_DIR     the run's checkpoint directory, an absolute path

A pod missing `SAVE_INTERVAL` or `CHECKPOINT_DIR` (or with a value that is not a positive integer or not an
absolute path) does not checkpoint either: a real run would stop on its arguments, and the sim should not
make up what it would have done.

Where a save lands decides whether a restart can resume from it, and that is what the product must get
right. The kernel resolves a path to the deepest mount covering it, so does `checkpoint_location`: a save is
kept only when that mount is a `persistentVolumeClaim` volume mounted read-write. The directory on an
emptyDir, on the container's own filesystem, behind a read-only mount or on a generic ephemeral volume is
lost with the pod: the save is still printed (Megatron does not know), and nothing is stored, which is what
makes a missing or wrong mount detectable by a resumed run that starts from scratch.

Why an in-memory store and not files: workload pods are played, not run (`tests/sim/player.py`); no volume
is materialised for them, so nothing could write a file. The store stands for the content of every claim:
one object per sim kubelet process, owned by the kubelet and handed to the player, keyed by (namespace,
claim, the directory's path inside the claim). The path is relative to the claim's root, so a `subPath`
mount is part of it: two pods mounting one claim at different subPaths never see each other's checkpoints,
and two mounting it at different mount paths do when their directories are the same place on the claim.
It lives as long as the kubelet process, i.e. the simulated cluster: a deleted claim's checkpoints are
unreachable anyway (a new claim of the same name in a new namespace is another key, and the static volumes
of `tests/sim/storage.py` are never bound twice).
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Final

from tests.sim.podspec import expand

ENABLE_CHECKPOINT: Final = "ENABLE_CHECKPOINT"
SAVE_INTERVAL: Final = "SAVE_INTERVAL"
CHECKPOINT_DIR: Final = "CHECKPOINT_DIR"


@dataclass(frozen=True)
class CheckpointSettings:
    """What a checkpointing pod asked for: save every `save_interval` iterations into `directory` (as given,
    which is what Megatron prints)."""

    directory: str
    save_interval: int

    @property
    def path(self) -> PurePosixPath:
        """The directory with `.`, `..` and repeated or trailing slashes resolved, as the kernel finds it."""
        return PurePosixPath(posixpath.normpath(self.directory))


@dataclass(frozen=True)
class CheckpointLocation:
    """Where a pod's checkpoints persist: `path` inside claim `claim` of `namespace` (`.` for its root)."""

    namespace: str
    claim: str
    path: PurePosixPath


def checkpoint_settings(container: Mapping[str, Any]) -> CheckpointSettings | None:
    """The container's checkpoint settings, from its plain env; None when it does not checkpoint."""
    env = _plain_env(container)
    if env.get(ENABLE_CHECKPOINT) != "true":
        return None
    interval, directory = env.get(SAVE_INTERVAL, ""), env.get(CHECKPOINT_DIR, "")
    if not interval.isdigit() or int(interval) < 1 or not directory.startswith("/"):
        return None
    return CheckpointSettings(directory, int(interval))


def checkpoint_location(pod: Mapping[str, Any]) -> CheckpointLocation | None:
    """Where the pod's main (first) container's saves persist; None when it does not checkpoint or its
    checkpoint directory is not on a claim it mounts read-write (see the module docstring)."""
    containers = pod.get("spec", {}).get("containers") or [{}]
    container: Mapping[str, Any] = containers[0]
    settings = checkpoint_settings(container)
    if settings is None:
        return None
    covering = [
        mount
        for mount in container.get("volumeMounts") or []
        if settings.path.is_relative_to(posixpath.normpath(str(mount.get("mountPath", ""))))
    ]
    if not covering:
        return None
    mount = max(covering, key=lambda item: len(PurePosixPath(posixpath.normpath(item["mountPath"])).parts))
    volume: Mapping[str, Any] = next(
        (item for item in pod["spec"].get("volumes") or [] if item.get("name") == mount.get("name")), {}
    )
    claim = volume.get("persistentVolumeClaim") or {}
    if not claim.get("claimName") or mount.get("readOnly") or claim.get("readOnly"):
        return None
    inside = settings.path.relative_to(posixpath.normpath(mount["mountPath"]))
    sub_path = mount.get("subPath") or expand(str(mount.get("subPathExpr") or ""), _plain_env(container))
    path = PurePosixPath(posixpath.normpath(PurePosixPath(sub_path or ".") / inside))
    return CheckpointLocation(str(pod["metadata"]["namespace"]), str(claim["claimName"]), path)


def _plain_env(container: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(item["name"]): str(item["value"])
        for item in container.get("env") or []
        if "name" in item and isinstance(item.get("value"), str)
    }


class CheckpointStore:
    """The checkpoints saved on the cluster's claims, per location, in save order; thread-safe (every pod
    is played in its own thread). `latest` is what Megatron's `latest_checkpointed_iteration.txt` holds: the
    iteration of the last save, which a resumed run loads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._saved: dict[CheckpointLocation, list[int]] = {}

    def record(self, location: CheckpointLocation, iteration: int) -> None:
        with self._lock:
            self._saved.setdefault(location, []).append(iteration)

    def latest(self, location: CheckpointLocation) -> int | None:
        with self._lock:
            saved = self._saved.get(location)
            return saved[-1] if saved else None

    def saved(self, location: CheckpointLocation) -> tuple[int, ...]:
        with self._lock:
            return tuple(self._saved.get(location, ()))

    def locations(self) -> tuple[CheckpointLocation, ...]:
        """Every location a checkpoint was saved to, in the order of their first save."""
        with self._lock:
            return tuple(self._saved)
