"""The sim kubelet's containers are confined as a container runtime would confine them.

A step that only works because the rig runs it as root, or because it writes outside its volumes, would pass
here and fail on a cluster; these checks keep the rig honest. No cluster is needed, only root (CI and the
developers' machines run as root) for the mount namespace. The last check reads what every process of the
running cluster listens on: loopback addresses only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.sim.cluster import SimCluster
from tests.sim.sandbox import EXIT_CANNOT_START

SANDBOX = Path(__file__).resolve().parents[1] / "sim" / "sandbox.py"
SYSTEM = [["/usr", "/usr"], ["/bin", "/bin"], ["/lib", "/lib"], ["/etc", "/etc"]]
SYSTEM += [[path, path] for path in ("/lib64", "/sbin") if Path(path).exists()]


def run_in_sandbox(
    tmp_path: Path, script: str, *, readonly_root: bool, uid: int | None = 65532, argv: list[str] | None = None
) -> tuple[int, str]:
    volume = tmp_path / "volume"
    volume.mkdir(exist_ok=True)
    volume.chmod(0o777)
    spec = {
        "root": str(tmp_path / "root"),
        "host_binds": SYSTEM,
        "volume_binds": [[str(volume), "/tmp/scratch", False]],
        "readonly_root": readonly_root,
        "uid": uid,
        "gid": uid,
        "groups": [] if uid is None else [uid],
        "workdir": "/",
        "argv": argv or ["sh", "-c", script],
        "env": {"PATH": "/usr/bin:/bin"},
    }
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    unshare = ["unshare", "--mount", "--propagation", "private", "--"]
    proc = subprocess.run(
        [*unshare, sys.executable, str(SANDBOX), "container", str(spec_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_the_container_runs_as_the_pod_user_not_root(tmp_path: Path) -> None:
    code, output = run_in_sandbox(tmp_path, "id -u; id -g", readonly_root=False)
    assert (code, output.split()) == (0, ["65532", "65532"])


def test_a_read_only_root_refuses_writes_outside_the_volumes(tmp_path: Path) -> None:
    code, output = run_in_sandbox(tmp_path, "echo x > /tmp/outside", readonly_root=True)
    assert code != 0
    assert "Read-only file system" in output


def test_volumes_stay_writable_under_a_read_only_root_and_reach_the_host(tmp_path: Path) -> None:
    code, output = run_in_sandbox(tmp_path, "echo kept > /tmp/scratch/out", readonly_root=True)
    assert code == 0, output
    assert (tmp_path / "volume" / "out").read_text(encoding="utf-8") == "kept\n"


def test_the_host_filesystem_outside_the_binds_is_invisible(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("host only", encoding="utf-8")
    _, output = run_in_sandbox(tmp_path, f"cat {tmp_path / 'secret'}; ls /dev", readonly_root=False)
    assert "host only" not in output
    assert set(output.split()) >= {"null", "zero", "urandom"}
    assert "sda" not in output.split()


def test_a_command_that_does_not_exist_fails_to_start_with_a_clear_message(tmp_path: Path) -> None:
    code, output = run_in_sandbox(tmp_path, "", readonly_root=False, argv=["/no/such/program"])
    assert code == EXIT_CANNOT_START
    assert "cannot start container" in output
    assert "No such file or directory" in output


def test_every_server_of_the_simulated_cluster_listens_on_loopback_only(sim: SimCluster) -> None:
    found = sim.listeners()
    names = {listener.port for listener in found}
    assert len(names) >= 8, f"expected the API server, etcd, the controllers and the kubelet, found {found}"
    assert [listener for listener in found if not listener.loopback] == []


def test_a_volume_over_a_directory_does_not_hide_the_image_files_below_it(tmp_path: Path) -> None:
    """The sim's "image" is this checkout at its host path, which may lie under /tmp (CI clones there); a pod's
    emptyDir at /tmp (the watcher has one) must not hide it, as a volume never hides a deeper mount."""
    image = tmp_path / "image"
    image.mkdir()
    (image / "marker").write_text("from the image", encoding="utf-8")
    volume = tmp_path / "tmp-volume"
    volume.mkdir()
    volume.chmod(0o777)
    spec = {
        "root": str(tmp_path / "root"),
        "host_binds": [*SYSTEM, [str(image), str(image)]],
        "volume_binds": [[str(volume), "/tmp", False]],
        "readonly_root": True,
        "uid": 65532,
        "gid": 65532,
        "groups": [65532],
        "workdir": "/",
        "argv": ["sh", "-c", f"cat {image / 'marker'} && echo scratch > /tmp/written"],
        "env": {"PATH": "/usr/bin:/bin"},
    }
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    proc = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            sys.executable,
            str(SANDBOX),
            "container",
            str(spec_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "from the image"), proc.stderr
    assert (volume / "written").read_text(encoding="utf-8") == "scratch\n"
