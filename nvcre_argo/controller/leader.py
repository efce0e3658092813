"""Leader election on a coordination.k8s.io Lease, so two watcher replicas never both write.

The holder renews the Lease every `renew_seconds`; another replica takes it over only after the Lease has
not changed for `leaseDurationSeconds`, as measured by the replica's own monotonic clock from the moment it
first saw the current record. This is client-go's rule (leaderelection: `observedTime`), and the reason for
it: comparing the holder's `renewTime` with our wall clock would let a replica whose clock runs ahead (or a
holder whose clock runs behind) take over a Lease that is being renewed. Only changes are compared, never
the times written in them, so clock skew between nodes does not matter. A freshly started replica therefore
waits a full lease duration before taking over a Lease held by someone else, as client-go's does.

Every write to the Lease carries the resourceVersion it read, so two candidates racing for an expired Lease
cannot both win. A leader that has not renewed within its renew deadline (two thirds of the lease, on the
monotonic clock) stops leading (the process exits and is restarted), so it stops before a standby may take
over; Lease requests are tried once each, never retried past that deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nvcre_argo.kube.client import Backoff, KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import LEASES

log = logging.getLogger(__name__)
MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class LeaseSettings:
    name: str
    namespace: str
    identity: str
    lease_seconds: int = 15
    renew_seconds: float = 5.0
    retry_seconds: float = 2.0


@dataclass(frozen=True)
class Observation:
    """The Lease record as last seen, and when it was first seen so (on our monotonic clock)."""

    record: tuple[Any, ...]
    seen_at: float


def lease_record(lease: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies one renewal of the Lease: any write by the holder changes it."""
    spec = lease.get("spec") or {}
    keys = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions")
    return tuple(spec.get(key) for key in keys)


def observe(previous: Observation | None, lease: Mapping[str, Any], now: float) -> Observation:
    """The observation after reading `lease` at monotonic time `now`: the clock restarts only on a change."""
    record = lease_record(lease)
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def lease_is_free(lease: Mapping[str, Any], identity: str, observation: Observation, now: float) -> bool:
    """Free when unheld, held by us, or unchanged for its whole duration since we first saw it (pure).

    As client-go: the Lease is valid while `seen_at + leaseDurationSeconds > now`."""
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    if not holder or holder == identity:
        return True
    duration = int(spec.get("leaseDurationSeconds") or 0)
    return not observation.seen_at + duration > now


class LeaderElector:
    def __init__(
        self,
        kube: KubeClient,
        settings: LeaseSettings,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube.with_backoff(Backoff(attempts=1))
        self._settings = settings
        self._clock = clock  # only for the times written into the Lease, which other tools display
        self._monotonic = monotonic  # for every decision
        self._observed: Observation | None = None
        self.leading = threading.Event()

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True while we hold the Lease."""
        settings = self._settings
        stamp = self._clock().strftime(MICRO)
        lease = self._kube.get(LEASES, settings.name, settings.namespace)
        if lease is not None:
            self._observed = observe(self._observed, lease, self._monotonic())
        try:
            if lease is None:
                self._kube.create(
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": settings.name, "namespace": settings.namespace},
                        "spec": {
                            "holderIdentity": settings.identity,
                            "leaseDurationSeconds": settings.lease_seconds,
                            "acquireTime": stamp,
                            "renewTime": stamp,
                            "leaseTransitions": 0,
                        },
                    }
                )
                return True
            assert self._observed is not None
            if not lease_is_free(lease, settings.identity, self._observed, self._monotonic()):
                return False
            spec = lease.setdefault("spec", {})
            if spec.get("holderIdentity") != settings.identity:
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
                spec["acquireTime"] = stamp
            spec |= {
                "holderIdentity": settings.identity,
                "leaseDurationSeconds": settings.lease_seconds,
                "renewTime": stamp,
            }
            self._kube.replace(lease)
            return True
        except ApiError as error:
            if error.conflict or error.already_exists:
                return False  # someone else wrote first
            raise

    def run(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Acquire (waiting as long as needed), then keep renewing until `stop`; call `on_lost` on loss."""
        settings = self._settings
        while not stop.is_set() and not self.leading.is_set():
            if self._attempt():
                self.leading.set()
                log.info("became the leader (Lease %s/%s)", settings.namespace, settings.name)
            else:
                stop.wait(settings.retry_seconds)
        last_renewal = self._monotonic()
        while not stop.wait(settings.renew_seconds):
            if self._attempt():
                last_renewal = self._monotonic()
            elif renew_deadline_passed(last_renewal, self._monotonic(), settings.lease_seconds):
                log.error("lost the Lease %s/%s; stopping", settings.namespace, settings.name)
                self.leading.clear()
                on_lost()
                return

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except ApiError as error:
            log.warning("leader election: %s", error)
            return False


def renew_deadline_passed(last_renewal: float, now: float, lease_seconds: float) -> bool:
    """A leader that has not renewed for two thirds of the lease stops leading, before anyone may take over."""
    return now - last_renewal > lease_seconds * 2 / 3
