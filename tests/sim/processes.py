"""The simulated cluster's step containers, found as the local processes they are.

The sim kubelet runs each container as a process of this machine (`tests/sim/pods.py`): a step container's
first process is Argo's executor (`argoexec emissary -- nvcre-argo step <command>`), whose child runs the step.
Benchmarks read their memory from `/proc`; tests stop one with SIGTERM as a kubelet stopping the container
would (the signal goes to the container's first process, which hands it to the step). Only one simulated
cluster runs on the machine at a time (its lock), so the step processes found are that cluster's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

STEP_COMMAND: Final = ("nvcre-argo", "step")  # a step container's argv: ... nvcre-argo step <command> ...
EXECUTOR: Final = "argoexec"


@dataclass(frozen=True)
class StepProcess:
    pid: int
    command: str  # the step command: plan, run-groups, category, ...
    container_first: bool  # Argo's executor, the container's first process (not the step it runs)


def step_command(argv: Sequence[str]) -> str | None:
    """The step command (`plan`, `run-groups`, ...) a process's argv runs, or None for any other process."""
    for index in range(len(argv) - 2):
        if argv[index].endswith(STEP_COMMAND[0]) and argv[index + 1] == STEP_COMMAND[1]:
            return argv[index + 2]
    return None


def step_processes() -> list[StepProcess]:
    """Every process of a step container on this machine now."""
    found = []
    for pid in (entry for entry in os.listdir("/proc") if entry.isdigit()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
        except OSError:  # the process ended between the listing and the read
            continue
        command = step_command(argv)
        if command is not None:
            found.append(StepProcess(int(pid), command, container_first=Path(argv[0]).name == EXECUTOR))
    return found
