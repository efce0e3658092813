"""Parse nccl-tests output (`all_reduce_perf`, `all_gather_perf`, `alltoall_perf`, their `_mpi` builds).

The result table is what rank 0 prints: a header naming the columns, then one whitespace-separated row per
message size with an out-of-place half and an in-place half (`time algbw busbw #wrong` each), then footer
lines. Columns are located from the header when the log has one, so `-I 1` (per-iteration columns), `-S 1`
(timestamps), a `cputime` column and the older `error` spelling all parse; without a header the layout of
current nccl-tests is assumed (size count type redop root, then the two halves). Numbers go through
`float()`, which accepts the exponent form nccl-tests switches to for wide values (`1.2e+07`); `N/A` (the
`#wrong` column under `-c 0`) is None. Anything else (NCCL INFO lines interleaved by `NCCL_DEBUG=INFO`,
banners, truncated rows) is skipped.

Certification numbers are the peak over message sizes (the reference's BandwidthMeasurement), not the footer's
`Avg bus bandwidth`, which averages over every size swept, tiny ones included; both are kept.

Wrong values found by nccl-tests' data check (`#wrong`, summed in the footer's `Out of bounds values`) mean the
collective corrupted data: whatever its bandwidth, the run fails (`data_check_failure`). nccl-tests then exits
non-zero, but a wrapper script or an older build may not, so the log is the evidence, not the exit code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_AVG_BUS_BANDWIDTH = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)")
# `kubectl logs --timestamps` and `mpirun --tag-output` prefixes, when the collector kept them.
_PREFIXES = re.compile(r"^(\d{4}-\d\d-\d\dT\S+\s)?(\[\d+,\d+\]<std(out|err)>:)?")
NOT_AVAILABLE = "N/A"
_TIME_LABELS = ("time", "cputime")
_WRONG_LABELS = ("#wrong", "error")
# Current nccl-tests without -I/-S: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
_DEFAULT_HALVES = ((5, 6, 7, 8), (9, 10, 11, 12))


@dataclass(frozen=True)
class NcclTiming:
    """One half of a row (out-of-place or in-place); None where the log printed no number (`N/A`)."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None


@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    count: int
    data_type: str
    out_of_place: NcclTiming
    in_place: NcclTiming


@dataclass(frozen=True)
class NcclRank:
    """A `# Rank` line of the preamble: which host (pod) and device each rank ran on."""

    rank: int
    host: str
    device: int


@dataclass(frozen=True)
class NcclResult:
    rows: tuple[NcclRow, ...]
    ranks: tuple[NcclRank, ...]
    avg_bus_bandwidth_gbps: float | None
    out_of_bounds: int | None

    @property
    def bus_bandwidth_gbps(self) -> float | None:
        """Peak bus bandwidth over every message size, out-of-place and in-place."""
        return _peak(value for row in self.rows for value in (row.out_of_place.busbw_gbps, row.in_place.busbw_gbps))

    @property
    def alg_bandwidth_gbps(self) -> float | None:
        """Peak algorithm bandwidth over every message size, out-of-place and in-place."""
        return _peak(value for row in self.rows for value in (row.out_of_place.algbw_gbps, row.in_place.algbw_gbps))

    @property
    def wrong_results(self) -> int:
        """Sum of the `#wrong` columns (data-check errors); `N/A` counts as 0 (the check was off)."""
        return sum(half.wrong or 0 for row in self.rows for half in (row.out_of_place, row.in_place))

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts of the `# Rank` lines, sorted and unique."""
        return tuple(sorted({rank.host for rank in self.ranks}))


def data_check_failure(text: str) -> str | None:
    """Why an nccl-tests log proves corrupted data (its data check counted wrong values), or None when it does
    not (no wrong value, or the check was off: `N/A` under `-c 0`)."""
    result = parse_nccl_log(text)
    wrong = max(result.wrong_results, result.out_of_bounds or 0)
    if wrong == 0:
        return None
    return f"nccl-tests counted {wrong} wrong values in its data check (#wrong): the collective corrupted data"


def parse_nccl_log(text: str) -> NcclResult:
    """Every result row, rank and footer value in an nccl-tests log (an empty result when there are none)."""
    rows: list[NcclRow] = []
    ranks: list[NcclRank] = []
    average: float | None = None
    out_of_bounds: int | None = None
    layout = _Layout.default()
    for raw in text.splitlines():
        line = _PREFIXES.sub("", raw.strip(), count=1).strip()
        if not line:
            continue
        if line.startswith("#"):
            if (header := _Layout.from_header(line)) is not None:
                layout = header
            elif match := _RANK.match(line):
                ranks.append(NcclRank(int(match[1]), match[2], int(match[3])))
            elif match := _AVG_BUS_BANDWIDTH.match(line):
                average = _number(match[1])
            elif match := _OUT_OF_BOUNDS.match(line):
                out_of_bounds = int(match[1])
            continue
        if " NCCL " in f" {line} ":
            continue  # an interleaved NCCL INFO/WARN line, never a result row
        if (row := layout.parse_row(line.split())) is not None:
            rows.append(row)
    return NcclResult(tuple(rows), tuple(ranks), average, out_of_bounds)


@dataclass(frozen=True)
class _Layout:
    """Column positions of (time, algbw, busbw, #wrong) for each half; `size` and `count` lead every row."""

    type_index: int
    halves: tuple[tuple[int, int, int, int], ...]

    @classmethod
    def default(cls) -> _Layout:
        return cls(2, _DEFAULT_HALVES)

    @classmethod
    def from_header(cls, line: str) -> _Layout | None:
        labels = line.lstrip("#").split()
        if len(labels) < 2 or labels[0] != "size" or labels[1] != "count" or "busbw" not in labels:
            return None
        times = [index for index, label in enumerate(labels) if label in _TIME_LABELS]
        halves = []
        for start in times:
            window = labels[start : start + 4]
            if window[1:3] == ["algbw", "busbw"] and len(window) == 4 and window[3] in _WRONG_LABELS:
                halves.append((start, start + 1, start + 2, start + 3))
        if len(halves) != 2:
            return None
        return cls(labels.index("type") if "type" in labels else 2, tuple(halves))

    def parse_row(self, tokens: Sequence[str]) -> NcclRow | None:
        """A result row, or None for anything that is not one (INFO lines, banners, truncated rows)."""
        if len(tokens) <= max(max(half) for half in self.halves):
            return None
        size, count = _number(tokens[0]), _number(tokens[1])
        if size is None or count is None or size != int(size) or count != int(count):
            return None
        out_of_place, in_place = (self._timing(tokens, half) for half in self.halves)
        if out_of_place is None or in_place is None:
            return None
        return NcclRow(int(size), int(count), tokens[self.type_index], out_of_place, in_place)

    @staticmethod
    def _timing(tokens: Sequence[str], columns: tuple[int, int, int, int]) -> NcclTiming | None:
        cells = [tokens[index] for index in columns]
        values = [_number(cell) for cell in cells]
        if any(value is None and cell != NOT_AVAILABLE for value, cell in zip(values, cells, strict=True)):
            return None
        wrong_count = values[3]
        return NcclTiming(values[0], values[1], values[2], None if wrong_count is None else int(wrong_count))


def _number(token: str) -> float | None:
    """`float()` of a column (exponent form included); None for `N/A`, `nan` and non-numbers."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _peak(values: Iterable[float | None]) -> float | None:
    found = [value for value in values if value is not None]
    return max(found) if found else None
