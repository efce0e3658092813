"""Sanitising the end of a pod log, so it can be carried in a failed node's or an iteration's message.

Why: a log tail is stored in result ConfigMaps and read by people, so it must be bounded in bytes, cut on a
character boundary, and free of control characters (ANSI colour codes, carriage returns) that would garble
what they read; those are escaped rather than dropped, so nothing is hidden.
"""

from __future__ import annotations

DEFAULT_LOG_LIMIT_BYTES = 4096
_KEEP = frozenset("\n\t")


def sanitize_log_tail(text: str, limit_bytes: int = DEFAULT_LOG_LIMIT_BYTES) -> str:
    """The end of `text`, at most `limit_bytes` UTF-8 bytes once escaped, never cutting a character or an
    escape in half. Control characters other than newline and tab become `\\xNN` (C0, DEL, C1), and lone
    surrogates `\\udNNN`, so terminal escapes and carriage returns cannot garble what a person reads."""
    if limit_bytes < 0:
        raise ValueError(f"limit_bytes must be >= 0, got {limit_bytes}")
    pieces: list[str] = []
    budget = limit_bytes
    for character in reversed(text):
        piece = _escape(character)
        size = len(piece.encode("utf-8"))
        if size > budget:
            break
        pieces.append(piece)
        budget -= size
    return "".join(reversed(pieces))


def _escape(character: str) -> str:
    code = ord(character)
    if character in _KEEP:
        return character
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return character
