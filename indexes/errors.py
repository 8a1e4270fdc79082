"""The root of seglog's exception tree and the errors of the index layer.

Every exception seglog raises derives from :class:`SeglogError`. The root lives
here, in the lowest layer, so that every layer above can subclass it;
``seglog.engine.errors`` re-exports the whole tree. The tree keeps three causes apart:
*you closed it* (:class:`ClosedError`), *the disk failed* (:class:`StorageError`)
and *the bytes are wrong* (:class:`CorruptionError`)::

    SeglogError
    ├── ClosedError                    use of a closed index, segment, log or engine
    ├── StorageError                   the OS failed an I/O call (wraps the OSError)
    ├── CorruptionError                bytes read from disk are not what was written
    │   ├── CorruptIndexError          an index failed its sanity check
    │   ├── CorruptRecordError         (segments) a batch failed length/CRC/offset checks
    │   ├── FileReplacedError          a file reopened by name is not the one seglog had open
    │   └── CorruptSnapshotError       (engine) a producer-state snapshot failed its CRC or checks
    ├── InvalidOffsetError             an index append whose offset does not increase
    ├── InvalidTimestampError          a time-index append whose timestamp decreases
    ├── IndexFullError                 an append to a full index
    ├── IndexOffsetOverflowError       an offset not representable relative to the base
    │   └── SegmentOffsetOverflowError (segments) a batch that does not fit the segment
    ├── InvalidIndexSizeError          an index size below one entry, or too small for its entries
    ├── SlotOutOfRangeError            ``entry(n)`` for a slot the index does not have
    ├── ReadOnlyIndexError             a change to an index opened read-only
    ├── RecordTooLargeError            (segments) a batch over max_message_bytes
    ├── UnsupportedFormatError         (segments) intact batches of an older format (v1)
    ├── (engine) InvalidConfigError, InvalidRecordError, InvalidTopicError,
    │   TopicExistsError, UnknownTopicOrPartitionError, OffsetOutOfRangeError,
    │   LogDirLockedError, GroupError (CommitFailedError, NonEmptyGroupError),
    │   ProducerError (InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError)
    └── (tools) WorkloadError              a recorded workload that breaks its format

Errors caused by a caller's argument also derive from the matching builtin
(``ValueError``, ``TypeError``, ``LookupError``) so that generic handlers work.

This module imports nothing from seglog.
"""

from __future__ import annotations

import io

__all__ = [
    "ClosedError",
    "CorruptIndexError",
    "CorruptionError",
    "FileReplacedError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidIndexSizeError",
    "InvalidOffsetError",
    "InvalidTimestampError",
    "ReadOnlyIndexError",
    "SeglogError",
    "SlotOutOfRangeError",
    "StorageError",
]


class SeglogError(Exception):
    """Base class of every exception seglog raises."""


class ClosedError(SeglogError):
    """An object was used after it was closed (an index, a segment, a log, the engine)."""


class StorageError(SeglogError):
    """The operating system failed an I/O call; ``__cause__`` holds the ``OSError``.

    Nothing already stored is lost by such a failure: the write that failed is
    not acknowledged and is cut off again by recovery.
    """


class CorruptionError(SeglogError):
    """Bytes read from disk are not what seglog wrote (torn, flipped or foreign)."""


class CorruptIndexError(CorruptionError):
    """An index file failed its sanity check; it is rebuilt from its ``.log``."""


class FileReplacedError(CorruptionError):
    """A file whose descriptor was closed to stay within the open-file budget changed before its reopen.

    The path names another file now (another inode), or a file seglog writes
    lost bytes it had written. Nothing is read from it; reopening the log
    directory runs the checks of an open on every file.
    """


class InvalidOffsetError(SeglogError, ValueError):
    """An index append whose offset is not above the last entry's offset."""


class InvalidTimestampError(SeglogError, ValueError):
    """A time-index append whose timestamp is below the last entry's timestamp."""


class IndexFullError(SeglogError):
    """An append to an index that has no free slot; the segment must roll."""


class IndexOffsetOverflowError(SeglogError, ValueError):
    """An offset that cannot be stored relative to the base offset as an int32."""


class InvalidIndexSizeError(SeglogError, ValueError):
    """An index size below one entry (new file, reset) or too small for the entries it holds (resize)."""


class SlotOutOfRangeError(SeglogError, IndexError):
    """``entry(n)`` for a slot at or beyond the number of entries."""


class ReadOnlyIndexError(SeglogError, io.UnsupportedOperation):
    """An append, truncation or resize of an index opened with ``writable=False``."""
