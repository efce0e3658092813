"""Which TCP addresses a set of processes listens on, from /proc (what ``ss -ltnp`` shows, without ss).

The rig's promise is that every server it starts binds a loopback address only; this makes the promise
checkable. Only the caller's network namespace is read (the simulated pods have their own).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    address: str
    port: int
    pid: int

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback


def _decode(hex_address: str) -> tuple[str, int]:
    """``0100007F:1F90`` → ("127.0.0.1", 8080); IPv6 addresses are four little-endian 32-bit words."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1])), int(port, 16)
    words = b"".join(raw[index : index + 4][::-1] for index in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words)), int(port, 16)


def _listening_inodes() -> dict[str, tuple[str, int]]:
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text(encoding="ascii").splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN:
                found[fields[9]] = _decode(fields[1])
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for entry in os.scandir(f"/proc/{pid}/fd"):
            target = os.readlink(entry.path)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        pass
    return inodes


def group_members(pgids: Iterable[int]) -> list[int]:
    """Every live process whose process group is one of ``pgids``."""
    wanted = set(pgids)
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) in wanted:
                    members.append(int(entry.name))
            except ProcessLookupError:
                continue
    return members


def listeners(pids: Iterable[int]) -> list[Listener]:
    """The listening TCP sockets the processes hold, sorted."""
    table = _listening_inodes()
    found = {Listener(*table[inode], pid=pid) for pid in pids for inode in _socket_inodes(pid) if inode in table}
    return sorted(found, key=lambda item: (item.address, item.port, item.pid))
