"""The ``Record`` value: what producers append and consumers get back.

Owns only the ``Record`` type (``engine`` re-exports it as ``engine.Record``).
Must not import ``engine`` or ``tools``; imports nothing from seglog.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Header", "Record"]

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
