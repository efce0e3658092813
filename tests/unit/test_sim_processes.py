"""How the simulated cluster's step containers are recognised among the machine's processes."""

from __future__ import annotations

import subprocess
import sys

from tests.sim.processes import step_command, step_processes


def test_a_step_process_is_known_by_its_step_command() -> None:
    argv = ["/venv/bin/python", "/venv/bin/nvcre-argo", "step", "run-groups", "--x"]
    assert step_command(argv) == "run-groups"
    assert step_command(["/var/run/argo/argoexec", "emissary", "--", "nvcre-argo", "step", "plan"]) == "plan"
    assert step_command(["/venv/bin/python", "-m", "tests.sim.kubelet"]) is None
    assert step_command(["/venv/bin/nvcre-argo", "step"]) is None


def test_the_running_step_processes_are_found_with_their_command() -> None:
    # A process whose argv reads like a step's (the script never runs a step: `-c` runs the sleep). Read once
    # it has said so: until its exec, a new process's argv is still the forking test's.
    code = "import time; print('started', flush=True); time.sleep(30)"
    argv = [sys.executable, "-c", code, "nvcre-argo", "step", "probe"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline() == "started\n"
            found = [item for item in step_processes() if item.pid == process.pid]
        finally:
            process.kill()
    assert [(item.command, item.container_first) for item in found] == [("probe", False)]
