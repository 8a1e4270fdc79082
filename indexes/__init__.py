"""seglog's index layer: the offset, time and aborted-transaction indexes of one segment.

Owns: ``OffsetIndex`` (``.index``), ``TimeIndex`` (``.timeindex``),
``TransactionIndex`` (``.txnindex``), ``LazyIndex``, their entry values
(``OffsetPosition``, ``TimestampOffset``, ``AbortedTxn``), the warm-section
binary search (``seglog.indexes.search``), the root of the exception tree
(``seglog.indexes.errors``), and ``FileOps`` (``seglog.indexes.fileops``): the
system calls of every seglog file, one method each, the fault-injection seam
the segment layer re-exports; and the process's open-file budget
(``seglog.indexes.handles``), which index and segment files give their
descriptors back to while idle.

Must not import: ``segments``, ``engine`` or ``tools`` (imports only point
down). Indexes take plain values (path, base offset, max index size, writable,
and the ``FileOps`` their file's calls go through) and never see a config
object, a segment or a topic. Everything here is
synchronous; the segment layer runs it on an executor thread when it touches
the disk, and every index takes its own lock so that is safe.
"""

from seglog.indexes.abstract import AbstractIndex
from seglog.indexes.errors import (
    ClosedError,
    CorruptIndexError,
    CorruptionError,
    FileReplacedError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidIndexSizeError,
    InvalidOffsetError,
    InvalidTimestampError,
    ReadOnlyIndexError,
    SeglogError,
    SlotOutOfRangeError,
    StorageError,
)
from seglog.indexes.lazy_index import LazyIndex
from seglog.indexes.offset_index import OffsetIndex, OffsetPosition
from seglog.indexes.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from seglog.indexes.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

__all__ = [
    "NO_TIMESTAMP",
    "AbortedTxn",
    "AbstractIndex",
    "ClosedError",
    "CorruptIndexError",
    "CorruptionError",
    "FileReplacedError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidIndexSizeError",
    "InvalidOffsetError",
    "InvalidTimestampError",
    "LazyIndex",
    "OffsetIndex",
    "OffsetPosition",
    "ReadOnlyIndexError",
    "SeglogError",
    "SlotOutOfRangeError",
    "StorageError",
    "TimeIndex",
    "TimestampOffset",
    "TransactionIndex",
    "TxnIndexSearchResult",
]
