"""The kubelet's end of the pods' way to the API server: a Unix socket relayed to ``127.0.0.1:<port>``.

Each simulated pod has its own network namespace (tests/sim/sandbox.py), which cannot reach the host's
loopback where the API server listens; a Unix socket path can be reached from any network namespace. Bytes
are relayed unchanged (the TLS session is between the pod and the API server).
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import threading
from pathlib import Path

CHUNK = 65536


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def serve_api_relay(path: Path, port: int) -> socketserver.ThreadingUnixStreamServer:
    """Relay every connection on the Unix socket ``path`` to ``127.0.0.1:port``, in daemon threads."""

    class Relay(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            client: socket.socket = self.request
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
            except OSError:
                return
            upstream.settimeout(None)
            with upstream:
                back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
                back.start()
                _pump(client, upstream)
                back.join()

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socketserver.ThreadingUnixStreamServer(str(path), Relay)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="api-relay", daemon=True).start()
    return server
