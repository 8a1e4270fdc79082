"""seglog's index layer: the offset, time and aborted-transaction indexes of one segment.

Owns: ``OffsetIndex`` (``.index``), ``TimeIndex`` (``.timeindex``),
``TransactionIndex`` (``.txnindex``), ``LazyIndex``, the warm-section binary
search, and the root of the exception tree (``errors``).

Must not import: ``segments``, ``engine`` or ``tools`` (imports only point
down). Indexes take plain values (path, base offset, max index size, writable)
and never see a config object, a segment or a topic.
"""

from indexes.errors import (
    ClosedError,
    CorruptIndexError,
    CorruptionError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    InvalidTimestampError,
    SeglogError,
    StorageError,
)

__all__ = [
    "ClosedError",
    "CorruptIndexError",
    "CorruptionError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "InvalidTimestampError",
    "SeglogError",
    "StorageError",
]
