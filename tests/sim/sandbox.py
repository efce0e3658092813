"""Run one container of a simulated pod: a private filesystem view, the pod's user, then exec.

The sim kubelet starts this file with the system Python under ``unshare --mount --propagation private``, so
every mount made here lives and dies with the container's process. It builds a root the way a container
runtime would, from a spec the kubelet wrote:

- a fresh tmpfs as ``/``, with the host's system directories (``/usr``, ``/etc``, ...) and the "image" (the
  directories the kubelet maps the container's image to) bind-mounted read-only at fixed paths;
- a private ``/dev`` (a tmpfs holding only the usual character devices) and private ``/tmp`` and ``/run``;
- the pod's volumes bind-mounted at their ``mountPath``s, read-only where the pod says so;
- ``readOnlyRootFilesystem`` honoured by remounting that root read-only once every mount point exists, so a
  step that writes outside its volumes fails here exactly as it would on a cluster;
- ``runAsUser``/``runAsGroup``/``fsGroup`` honoured by dropping to those ids before ``exec``;
- the pod's own network namespace, shared by its containers, with only a loopback interface, so what a
  pod binds (a watcher's ``0.0.0.0:8080``) stays inside the pod, as on a cluster.

The pod's network namespace is held by its "pause" process (``network`` mode below), which is also the pod's
one way out: it listens on the pod's ``127.0.0.1:<apiserver port>`` and relays each connection over a Unix
socket (file paths cross network namespaces) to the kubelet, which connects to the real API server. TLS
passes through untouched, so the pod verifies the API server's certificate as it would in a cluster.

Deliberately stdlib-only and free of project imports: it runs as root inside the new mount namespace, before
any of the container's own code, and must not depend on the virtualenv it may be about to hide.
Usage: ``unshare --net --uts --pid --fork -- python3 sandbox.py network PORT SOCKET HOSTNAME`` (prints ``ready`` once
listening), then per container ``nsenter --net=... --uts=... --pid=... -- unshare --mount --propagation private --
python3 sandbox.py container SPEC.json`` with the pause process's namespaces.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import json
import os
import socket
import stat
import struct
import sys
import threading
from pathlib import Path
from typing import Any

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
EXIT_CANNOT_START = 128
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
RELAY_CHUNK = 65536

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if value is None else value.encode() for value in (source, target, fstype, data)]
    if _libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target} ({fstype or 'bind'}): {os.strerror(errno)}")


def _mount_point(path: Path, like: Path | None) -> None:
    """Create the directory (or empty file, when binding a file) that a mount will cover."""
    if like is not None and not like.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    else:
        path.mkdir(parents=True, exist_ok=True)


def _bind(root: Path, source: str, target: str, *, read_only: bool) -> None:
    destination = root / target.lstrip("/")
    _mount_point(destination, Path(source))
    _mount(source, str(destination), None, MS_BIND | MS_REC)
    if read_only:
        _mount(None, str(destination), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)


def _private_dev(root: Path) -> None:
    dev = root / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", str(dev), "tmpfs", MS_NOSUID, "mode=755")
    for name in DEVICES:
        host = Path("/dev") / name
        if host.exists() and stat.S_ISCHR(host.stat().st_mode):
            (dev / name).touch()
            _mount(str(host), str(dev / name), None, MS_BIND)
    (dev / "shm").mkdir()
    _mount("tmpfs", str(dev / "shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")


def build_root(spec: dict[str, Any]) -> Path:
    """Mount the container's filesystem view under ``spec["root"]`` and return it."""
    root = Path(spec["root"])
    root.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", str(root), "tmpfs", MS_NOSUID, "mode=755")
    _bind(root, "/proc", "/proc", read_only=False)
    _private_dev(root)
    for directory in ("tmp", "run"):
        (root / directory).mkdir(exist_ok=True)
        (root / directory).chmod(0o1777)
    # The image's directories and the pod's volumes, shallowest first, so a deeper mount is never hidden by a
    # shallower one: a pod's emptyDir at /tmp must not hide a checkout of this repository under /tmp that
    # stands in for the image's files (the image binds keep their host paths: the venv's scripts name them).
    binds = [(source, target, True) for source, target in spec["host_binds"]]
    binds += [(source, target, bool(read_only)) for source, target, read_only in spec["volume_binds"]]
    for source, target, read_only in sorted(binds, key=lambda item: item[1].rstrip("/").count("/")):
        _bind(root, source, target, read_only=read_only)
    if spec["readonly_root"]:
        _mount(None, str(root), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    return root


def loopback_up() -> None:
    """Bring up ``lo`` in the new network namespace (it starts down), as a runtime's network setup does."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(RELAY_CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _relay(client: socket.socket, unix_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(unix_path)
    except OSError:
        client.close()
        upstream.close()
        return
    threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
    _pump(client, upstream)


def serve_pod_network(port: int, unix_path: str, hostname: str) -> None:
    """The pod's pause process: its host name is the pod's, ``lo`` is up, and ``127.0.0.1:port`` is relayed
    to the kubelet's Unix socket."""
    socket.sethostname(hostname)
    loopback_up()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    print("ready", flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, unix_path), daemon=True).start()


def enter(spec: dict[str, Any]) -> None:
    """Build the root, chroot, drop to the pod's user, and exec the container's command."""
    root = build_root(spec)
    os.chroot(root)
    os.chdir(spec["workdir"] or "/")
    if spec["gid"] is not None:
        os.setgroups(spec["groups"])
        os.setgid(spec["gid"])
    if spec["uid"] is not None:
        os.setuid(spec["uid"])
    argv: list[str] = spec["argv"]
    os.execvpe(argv[0], argv, spec["env"])


def main(argv: list[str]) -> int:
    if argv[1] == "network":
        serve_pod_network(int(argv[2]), argv[3], argv[4])
        return 0
    # The container's own process group, which the kubelet signals: nsenter, which forked this process into
    # the pod's PID namespace, must not get the container's SIGTERM (it would die and leave it running).
    os.setpgid(0, 0)
    spec = json.loads(Path(argv[2]).read_text(encoding="utf-8"))
    try:
        enter(spec)
    except OSError as error:  # what a runtime reports as a failed container start
        print(f"sim container runtime: cannot start container: {error}", file=sys.stderr, flush=True)
        return EXIT_CANNOT_START
    return EXIT_CANNOT_START  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
