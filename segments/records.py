"""The ``Record`` value: what producers append and consumers get back.

Owns the ``Record`` type (``engine`` re-exports it as ``engine.Record``) and the
rule for the text it carries (:func:`text_problem`, which header keys follow and
``engine.validate`` applies to group ids too).
Must not import ``engine`` or ``tools``; imports nothing from seglog.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Header", "Record", "text_problem"]

Header = tuple[str, bytes]
"""One record header: a text key and a binary value (Kafka's record headers)."""


class Record(NamedTuple):
    """One record of a partition log.

    ``value`` and ``key`` are ``bytes`` or ``None``; ``timestamp`` is in
    milliseconds since the epoch (``None`` on append means "the append time");
    ``headers`` is a tuple of ``(str, bytes)`` pairs; ``offset`` is ``-1`` until
    the log assigns one (records returned by a read always carry their offset).

    A ``NamedTuple`` rather than a dataclass because a read builds about a
    million of them per second: ``tuple.__new__`` is the cheapest immutable value
    CPython can build, and it is still a typed, named, immutable value.
    """

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: tuple[Header, ...] = ()
    offset: int = -1


def text_problem(text: str) -> str | None:
    """What makes ``text`` unfit to be stored as a name (a header key, a group id), or ``None``.

    Stored text must be valid UTF-8, which a Python ``str`` holding a lone
    surrogate (``"\\udcff"``, what ``os.fsdecode`` makes of undecodable bytes)
    is not, and must hold no NUL, which C string APIs take for the end of the
    text. The answer completes a sentence about the text:
    ``f"header key {key!r} {problem}"``.
    """
    nul = text.find("\x00")
    if nul >= 0:
        return f"holds a NUL character at index {nul}; NUL is not allowed"
    if not text.isascii():  # O(1): CPython knows whether a str is ASCII
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"is not valid UTF-8: it holds the lone surrogate {text[exc.start]!r} at index {exc.start} "
                "(decode bytes with errors='strict' or 'replace', not 'surrogateescape')"
            )
    return None
