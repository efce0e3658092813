"""Leader election on a coordination.k8s.io Lease, so two watcher replicas never both write.

The holder renews the Lease every `renew_seconds`; another replica takes it over only after
`lease_seconds` without renewal. Every write to the Lease carries the resourceVersion it read, so two
candidates racing for an expired Lease cannot both win. A leader that has not renewed within its renew
deadline (two thirds of the lease) stops leading (the process exits and is restarted), so it stops before a
standby may take over; Lease requests are tried once each, never retried past that deadline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre_argo.kube.client import ApiError, Backoff, KubeClient
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


def _parse(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    for layout in (MICRO, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(stamp, layout).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def lease_is_free(lease: dict[str, Any], identity: str, now: datetime) -> bool:
    """Free when unheld, held by us, or not renewed within its duration (pure)."""
    spec = lease.get("spec", {})
    holder = spec.get("holderIdentity")
    if not holder or holder == identity:
        return True
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or 0)
    return renewed is None or now > renewed + timedelta(seconds=duration)


class LeaderElector:
    def __init__(
        self, kube: KubeClient, settings: LeaseSettings, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self._kube = kube.with_backoff(Backoff(attempts=1))
        self._settings = settings
        self._clock = clock
        self.leading = threading.Event()

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True while we hold the Lease."""
        settings, now = self._settings, self._clock()
        stamp = now.strftime(MICRO)
        lease = self._kube.get(LEASES, settings.name, settings.namespace)
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
            if not lease_is_free(lease, settings.identity, now):
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
        last_renewal = self._clock()
        while not stop.wait(settings.renew_seconds):
            if self._attempt():
                last_renewal = self._clock()
            elif (self._clock() - last_renewal).total_seconds() > settings.lease_seconds * 2 / 3:
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
