"""The run step's pause between polls, without a server: an object read without a resourceVersion (a watch
from no version would start with the object as it is and end every pause at once) sleeps the interval out
without asking the API server anything, and a BOOKMARK (the server sends one shortly before a watch's timeout)
is not a change. The watching paths against a real server are in tests/integration/test_change_wait.py."""

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


class BookmarkOnly(KubeClient):
    """A client whose watch brings a BOOKMARK and then ends, as a real server's does near its timeout."""

    def __init__(self) -> None:
        pass

    def open_watch(self, *args: Any, **kwargs: Any) -> Any:
        return FinishedStream([("BOOKMARK", {"metadata": {"resourceVersion": "8"}})])


class FinishedStream(list[tuple[str, dict[str, Any]]]):
    def close(self) -> None:
        pass


def test_a_bookmark_does_not_end_the_pause_as_a_change() -> None:
    slept: list[float] = []
    seen = {"metadata": {"name": "x", "namespace": "ns", "resourceVersion": "7"}}

    assert wait_for_change(BookmarkOnly(), CONFIGMAPS, seen, 10.0, clock=lambda: 0.0, sleep=slept.append) is False
    assert slept == [10.0]
