"""Go-style durations as the API spells them (`1h`, `90m`, `1h30m`, `500ms`)."""

from __future__ import annotations

import re

_PART = re.compile(r"([0-9]+)(ms|h|m|s)")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_seconds(text: str) -> int:
    """Whole seconds (rounded up, never 0 for a positive duration) of a `^([0-9]+(h|m|s|ms))+$` duration."""
    total = sum(int(amount) * _SECONDS[unit] for amount, unit in _PART.findall(text))
    whole = int(total)
    return whole + 1 if total > whole else whole
