"""The kubelet's log endpoint, so ``kubectl logs`` (the ``pods/log`` API) works for every simulated pod.

The API server proxies ``GET pods/log`` to ``https://<node InternalIP>:<kubeletEndpoint port>/containerLogs/
<namespace>/<pod>/<container>``; every simulated node advertises 127.0.0.1 and this server's port. Supports
``tailLines``, ``limitBytes`` and ``follow`` (streams until the container has stopped), which is what the
product's steps, Argo's controller and Argo's UI ask for. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FOLLOW_POLL_SECONDS = 0.3

# (namespace, pod, container) -> (log file, whether the container is still running), or None if unknown.
LogLookup = Callable[[str, str, str], tuple[Path, Callable[[], bool]] | None]


def select(text: bytes, *, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """The part of a log the query asks for: the last ``tailLines`` lines, then at most ``limitBytes``."""
    if tail_lines is not None:
        lines = text.splitlines(keepends=True)
        text = b"".join(lines[-tail_lines:]) if tail_lines > 0 else b""
    if limit_bytes is not None:
        text = text[:limit_bytes]
    return text


def _handler(lookup: LogLookup) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            del format, args  # access logs would only add noise to the kubelet's log

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            if len(parts) != 4 or parts[0] != "containerLogs":
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            found = lookup(parts[1], parts[2], parts[3])
            if found is None:
                self.send_error(HTTPStatus.NOT_FOUND, f"container {parts[3]} of pod {parts[1]}/{parts[2]} not found")
                return
            path, running = found
            query = urllib.parse.parse_qs(url.query)
            tail = int(query["tailLines"][0]) if "tailLines" in query else None
            limit = int(query["limitBytes"][0]) if "limitBytes" in query else None
            follow = query.get("follow", ["false"])[0] == "true"
            body = select(path.read_bytes() if path.exists() else b"", tail_lines=tail, limit_bytes=limit)
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/plain")
            if not follow:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._stream(path, body, running)

        def _stream(self, path: Path, first: bytes, running: Callable[[], bool]) -> None:
            offset = path.stat().st_size if path.exists() else 0
            self._chunk(first)
            while running():
                time.sleep(FOLLOW_POLL_SECONDS)
                size = path.stat().st_size if path.exists() else 0
                if size > offset:
                    with path.open("rb") as handle:
                        handle.seek(offset)
                        self._chunk(handle.read(size - offset))
                    offset = size
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def serve_logs(port: int, cert: str, key: str, lookup: LogLookup) -> ThreadingHTTPServer:
    """Start the HTTPS log endpoint on 127.0.0.1:``port`` in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(lookup))
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="log-server", daemon=True).start()
    return server
