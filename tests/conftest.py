"""Session-wide test settings: where syrupy keeps its snapshots.

Why a conftest: the project layout keeps reviewed snapshots in one top-level `snapshots/` folder, not in
`__snapshots__` folders scattered next to the tests, so a reviewer finds every pinned output in one place. The
folder mirrors `tests/` (a test in `tests/unit/test_x.py` has its snapshots in `snapshots/unit/test_x.ambr`),
so two test directories can never share a snapshot file. `make snapshots` rewrites them there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.amber import AmberSnapshotExtension
from syrupy.location import PyTestLocation

TESTS = Path(__file__).resolve().parent
SNAPSHOTS = TESTS.parent / "snapshots"


class TopLevelAmberExtension(AmberSnapshotExtension):
    """The Amber format, stored under `snapshots/<test directory relative to tests/>/`."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        relative = Path(test_location.filepath).resolve().parent.relative_to(TESTS)
        return str(SNAPSHOTS / relative)


@pytest.fixture
def snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's `snapshot`, writing to and reading from the top-level `snapshots/` folder."""
    return snapshot.use_extension(TopLevelAmberExtension)
