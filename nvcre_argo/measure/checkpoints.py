"""Megatron-LM's checkpoint lines: which iteration a run last saved, and which one it resumed from.

Megatron prints (rank 0, `megatron/training/checkpointing.py`)

    saving checkpoint at iteration      20 to /mnt/checkpoints/run-g0 in torch_dist format
      successfully saved checkpoint from iteration      20 to /mnt/checkpoints/run-g0 [ t 1/1, p 1/1 ]
     loading distributed checkpoint from /mnt/checkpoints/run-g0 at iteration 20
      successfully loaded checkpoint from /mnt/checkpoints/run-g0 [ t 1/1, p 1/1 ] at iteration 20

Only the "successfully" lines count: a save that was started but never finished (the workload died while
writing) is no checkpoint to resume from. Older releases say `saved checkpoint at iteration`; both match.
"""

from __future__ import annotations

import re

_SAVED = re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(\d+)")
_LOADED = re.compile(r"successfully loaded checkpoint from .*? at iteration\s+(\d+)")


def last_saved_iteration(text: str) -> int | None:
    """The iteration of the newest checkpoint the log says was saved completely, or None."""
    found = [int(match.group(1)) for match in _SAVED.finditer(text)]
    return max(found) if found else None


def loaded_iteration(text: str) -> int | None:
    """The iteration the run resumed from (its checkpoint load line), or None when it started afresh."""
    match = _LOADED.search(text)
    return int(match.group(1)) if match else None
