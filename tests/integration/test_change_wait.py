"""The run step's pause between two polls against a real kube-apiserver: it ends on the object's first change,
sleeps the interval out when nothing changes, and never spins when the watch cannot be opened."""

from __future__ import annotations

import threading
import time

from nvcre_argo.kube.change import wait_for_change
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CONFIGMAPS

INTERVAL_S = 4.0


def _config_map(kube: KubeClient, namespace: str, name: str) -> dict[str, object]:
    return kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}})


def test_the_pause_ends_on_the_objects_first_change_and_not_on_another_objects(
    kube: KubeClient, namespace: str
) -> None:
    seen = _config_map(kube, namespace, "watched")
    _config_map(kube, namespace, "neighbour")

    def change_later() -> None:
        time.sleep(0.5)
        kube.merge_patch(CONFIGMAPS, "neighbour", {"data": {"a": "1"}}, namespace)
        time.sleep(0.5)
        kube.merge_patch(CONFIGMAPS, "watched", {"data": {"a": "1"}}, namespace)

    changer = threading.Thread(target=change_later)
    began = time.monotonic()
    changer.start()
    changed = wait_for_change(kube, CONFIGMAPS, seen, INTERVAL_S)
    took = time.monotonic() - began
    changer.join()

    assert changed
    assert 0.9 <= took < INTERVAL_S - 1, f"the pause took {took:.1f} s; the change came after 1 s"


def test_without_a_change_the_pause_lasts_the_interval(kube: KubeClient, namespace: str) -> None:
    seen = _config_map(kube, namespace, "quiet")

    began = time.monotonic()
    changed = wait_for_change(kube, CONFIGMAPS, seen, INTERVAL_S)
    took = time.monotonic() - began

    assert not changed
    assert INTERVAL_S - 0.5 <= took < INTERVAL_S + 3, f"the pause took {took:.1f} s"


class RefusingKube(KubeClient):
    """A client whose watches are refused (a role without `watch`, say)."""

    def __init__(self, kube: KubeClient) -> None:
        super().__init__(kube._api, namespace=kube.namespace)

    def open_watch(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise ApiError(403, "Forbidden", "cannot watch")


def test_a_refused_watch_sleeps_the_interval_out_instead_of_spinning(kube: KubeClient, namespace: str) -> None:
    seen = _config_map(kube, namespace, "refused")
    slept: list[float] = []

    changed = wait_for_change(RefusingKube(kube), CONFIGMAPS, seen, INTERVAL_S, sleep=slept.append)

    assert (changed, slept) == (False, [INTERVAL_S])
