"""The run step's pause between polls when it cannot watch: an object read without a resourceVersion (a
watch from no version would start with the object as it is and end every pause at once) sleeps the interval
out without asking the API server anything. The watching paths are in tests/integration/test_change_wait.py."""

from __future__ import annotations

from typing import Any

from nvcre_argo.kube.change import wait_for_change
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.resources import CONFIGMAPS


class NoServer(KubeClient):
    """A client that must not be used."""

    def __init__(self) -> None:
        pass

    def open_watch(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no watch without a resourceVersion")


def test_an_object_without_a_version_is_not_watched_and_the_interval_is_slept_out() -> None:
    slept: list[float] = []
    seen = {"metadata": {"name": "x", "namespace": "ns"}}

    assert wait_for_change(NoServer(), CONFIGMAPS, seen, 10.0, sleep=slept.append) is False
    assert slept == [10.0]
