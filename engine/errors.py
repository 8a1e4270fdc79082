"""Every exception seglog raises, in one place.

The tree (``SeglogError`` at the root) is drawn in ``indexes/errors.py``; this
module re-exports the index and segment errors and defines the engine's own.
Catch :class:`SeglogError` for "anything seglog refused or could not do".
"""

from __future__ import annotations

from seglog.indexes.errors import (
    ClosedError,
    CorruptIndexError,
    CorruptionError,
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
from seglog.segments.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    SegmentOffsetOverflowError,
    UnsupportedFormatError,
)

__all__ = [
    "ClosedError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptionError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidConfigError",
    "InvalidIndexSizeError",
    "InvalidOffsetError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "LogDirLockedError",
    "OffsetOutOfRangeError",
    "ReadOnlyIndexError",
    "RecordTooLargeError",
    "SeglogError",
    "SegmentOffsetOverflowError",
    "SlotOutOfRangeError",
    "StorageError",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
    "UnsupportedFormatError",
]


class InvalidConfigError(SeglogError, ValueError):
    """A ``LogConfig`` value outside its allowed range, or an unknown config key."""


class InvalidRecordError(SeglogError, TypeError, ValueError):
    """A record or batch that cannot be appended: wrong types, empty batch, bad headers."""


class InvalidTopicError(SeglogError, ValueError):
    """A topic name that breaks Kafka's rules (``[A-Za-z0-9._-]``, 1-249 chars, not ``.``/``..``)."""


class TopicExistsError(SeglogError):
    """``create_topic`` for a topic that already exists."""


class UnknownTopicOrPartitionError(SeglogError, LookupError):
    """A topic or partition that does not exist in this log directory."""


class OffsetOutOfRangeError(SeglogError, LookupError):
    """A fetch offset below the log start offset or above the log end offset."""


class LogDirLockedError(SeglogError):
    """Another ``Engine`` (in this or another process) holds the log directory's lock."""
