"""The small immutable values the public API returns: append, fetch and lookup results.

``Record`` itself is defined by the segment layer (it is what a batch encodes)
and re-exported by ``engine``.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple, TypeAlias

from seglog.segments.records import Record

__all__ = [
    "ISOLATION_LEVELS",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "NO_TIMESTAMP",
    "AbortedTransaction",
    "AppendResult",
    "FetchResult",
    "Isolation",
    "OffsetAndTimestamp",
    "RecordMetadata",
]

# Kafka's ListOffsets sentinels (ListOffsetsRequest.EARLIEST_TIMESTAMP etc.).
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
NO_TIMESTAMP: Final = -1  # Kafka's RecordBatch.NO_TIMESTAMP


Isolation: TypeAlias = Literal["read_uncommitted", "read_committed"]
"""Kafka's ``isolation.level``: what a read returns of transactions (see ``PartitionLog.read``)."""
ISOLATION_LEVELS: Final = ("read_uncommitted", "read_committed")


class AbortedTransaction(NamedTuple):
    """An aborted transaction overlapping a fetched range (Kafka's FetchResponse ``AbortedTransaction``).

    A reader of batches skips the transactional batches of ``producer_id``
    from ``first_offset`` up to that producer's abort marker.
    """

    producer_id: int
    first_offset: int


class AppendResult(NamedTuple):
    """What one ``PartitionLog.append`` stored: one batch of consecutive offsets.

    ``log_append_time`` is the broker-side time written into the batch when the
    topic uses ``LogAppendTime``, else -1 (Kafka's ProduceResponse field).
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int = NO_TIMESTAMP
    log_start_offset: int = 0

    @property
    def record_count(self) -> int:
        return self.last_offset - self.first_offset + 1


class FetchResult(NamedTuple):
    """Records read from one partition, from the requested offset on, in offset order.

    ``next_offset`` is where the next read should start; ``high_watermark`` is the
    log end offset when the read was served (every offset below it is readable);
    ``log_start_offset`` the first live offset.
    """

    records: list[Record]
    next_offset: int
    high_watermark: int
    log_start_offset: int


class OffsetAndTimestamp(NamedTuple):
    """The answer of ``offset_for_timestamp``: an offset and the timestamp of its record.

    For the ``LATEST_TIMESTAMP`` and ``EARLIEST_TIMESTAMP`` sentinels the
    timestamp is -1, as in Kafka's ListOffsets response.
    """

    offset: int
    timestamp: int


class RecordMetadata(NamedTuple):
    """Where ``Engine.produce`` put a record (Kafka's producer ``RecordMetadata``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
