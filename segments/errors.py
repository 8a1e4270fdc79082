"""Errors of the segment layer (batch framing, segment files).

Subclasses of the tree rooted at ``seglog.indexes.errors.SeglogError``; re-exported by
``seglog.engine.errors``. Imports only ``seglog.indexes.errors``.
"""

from __future__ import annotations

from seglog.indexes.errors import CorruptionError, IndexOffsetOverflowError, SeglogError

__all__ = ["CorruptRecordError", "RecordTooLargeError", "SegmentOffsetOverflowError", "UnsupportedFormatError"]


class CorruptRecordError(CorruptionError):
    """A record batch failed a check: length bounds, magic, CRC-32C, record count or offsets."""


class RecordTooLargeError(SeglogError, ValueError):
    """A batch larger than ``max_message_bytes``; nothing was written."""


class SegmentOffsetOverflowError(IndexOffsetOverflowError):
    """A batch whose offsets cannot be stored relative to the segment's base offset."""


class UnsupportedFormatError(SeglogError):
    """A segment holds valid batches of an older seglog format this version cannot read.

    Recovery raises it instead of truncating: the bytes are intact (their CRC
    holds), only unreadable here, so nothing is cut.
    """
