"""The encoding every result ConfigMap shares: deterministic gzip, base64 `binaryData`, the record label's
values, the one error type, and the type check that reading a decoded JSON document is built on.

Why one module: the records (`nodes`, `diagnose`, `group`) differ in layout but not in how their bytes are
stored, so that part is written once. Gzip is at best compression with a zero timestamp and no file name, so
the same record always gives the same bytes (a re-run of the record step writes an identical object and the
update is a no-op).
"""

from __future__ import annotations

import base64
import gzip
import io
from collections.abc import Mapping
from typing import Any, Final

from nvcre_argo.errors import NvcreError

# Values of the `nvcre.nvidia.com/record` label: which kind of record a step's ConfigMap holds.
RECORD_PLAN: Final = "plan"
RECORD_GROUP_RESULT: Final = "group-result"


class ResultsError(NvcreError):
    """ConfigMap data that is not in the documented layout."""


def base64_text(data: bytes) -> str:
    """`binaryData` values are base64 text."""
    return base64.b64encode(data).decode("ascii")


def gzip_bytes(payload: bytes) -> bytes:
    """Deterministic gzip: level 9, mtime 0, no file name (GzipFile writes OS byte 255 on every platform)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buffer, mtime=0) as stream:
        stream.write(payload)
    return buffer.getvalue()


def gunzip_bytes(data: bytes, key: str) -> bytes:
    """The inverse of `gzip_bytes`; ResultsError naming `key` when `data` is not gzip."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError) as error:
        raise ResultsError(f"{key}: not gzip data: {error}") from None


def configmap_binary(configmap: Mapping[str, Any], key: str) -> bytes | None:
    """`binaryData[key]` decoded from base64; None when the ConfigMap has no such key."""
    encoded = (configmap.get("binaryData") or {}).get(key)
    if not encoded:
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError as error:
        raise ResultsError(f"{key}: not base64 data: {error}") from None


def expect_type(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """`value` when it is of `kind` (a bool is not a number here), else a ResultsError naming `where`."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(item.__name__ for item in kinds)
        raise ResultsError(f"{where}: expected {expected}, got {type(value).__name__}")
    return value
