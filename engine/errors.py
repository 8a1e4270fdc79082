"""Every exception seglog raises, in one place.

The tree (``SeglogError`` at the root) is drawn in ``indexes/errors.py``; this
module re-exports the index and segment errors and defines the engine's own.
Catch :class:`SeglogError` for "anything seglog refused or could not do".
"""

from __future__ import annotations

from typing import ClassVar

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
from seglog.segments.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    SegmentOffsetOverflowError,
    UnsupportedFormatError,
)

__all__ = [
    "ClosedError",
    "CommitFailedError",
    "ConcurrentTransactionsError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "CorruptionError",
    "FileReplacedError",
    "GroupError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidConfigError",
    "InvalidIndexSizeError",
    "InvalidOffsetError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    "LogDirLockedError",
    "NonEmptyGroupError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerError",
    "ProducerFencedError",
    "ReadOnlyIndexError",
    "RecordTooLargeError",
    "SeglogError",
    "SegmentOffsetOverflowError",
    "SlotOutOfRangeError",
    "StorageError",
    "TopicExistsError",
    "TransactionError",
    "UnknownTopicOrPartitionError",
    "UnsupportedFormatError",
]


# The three errors of a caller's argument are TypeError and ValueError both: one rule can be broken
# by the type (a bool where an int is wanted) or by the value (an offset beyond int64), and a
# generic ``except TypeError`` or ``except ValueError`` should catch either.


class InvalidConfigError(SeglogError, TypeError, ValueError):
    """A ``LogConfig`` value of the wrong type or outside its allowed range, or an unknown config key."""


class InvalidRecordError(SeglogError, TypeError, ValueError):
    """A record, batch or call argument that cannot be used.

    Wrong types, an empty batch, bad headers, an offset or timestamp outside
    int64 or its call's range, or a consumer group id that breaks the rules of
    ``engine.validate``.
    """


class InvalidTopicError(SeglogError, TypeError, ValueError):
    """A topic name that breaks Kafka's rules (``[A-Za-z0-9._-]``, 1-249 chars, not ``.``/``..``),
    or a partition number that is not an int in [0, 1,000,000)."""


class TopicExistsError(SeglogError):
    """``create_topic`` for a topic that already exists."""


class UnknownTopicOrPartitionError(SeglogError, LookupError):
    """A topic or partition that does not exist in this log directory."""


class OffsetOutOfRangeError(SeglogError, LookupError):
    """A fetch offset below the log start offset or above the log end offset."""


class LogDirLockedError(SeglogError):
    """Another ``Engine`` (in this or another process) holds the log directory's lock."""


class GroupError(SeglogError):
    """The group coordinator refused a consumer-group call; ``code`` is Kafka's name for the reason.

    ``code`` is one of Kafka's error names (``"REBALANCE_IN_PROGRESS"``,
    ``"UNKNOWN_MEMBER_ID"``, ``"ILLEGAL_GENERATION"``, ...), what a Kafka client
    would have been answered.
    """

    def __init__(self, message: str, code: str = "UNKNOWN_SERVER_ERROR") -> None:
        super().__init__(message)
        self.code = code


class CommitFailedError(GroupError):
    """A group consumer's commit refused because the group rebalanced: its partitions may be another's now.

    The records since the last successful commit will be read again by
    whichever member owns their partitions after the rebalance.
    """


class NonEmptyGroupError(GroupError):
    """A commit, reset or deletion outside the group's members while the group has active members.

    Kafka refuses the same (``UNKNOWN_MEMBER_ID`` to a commit without a
    member id, ``NON_EMPTY_GROUP`` to a deletion): stop the group's consumers first.
    """


class ProducerError(SeglogError):
    """A producer's batch that the partition's producer state refuses (Kafka's idempotent producer), or a
    producer's call that the transaction coordinator refuses (:class:`TransactionError`).

    Nothing of the batch is written. ``kafka_code`` is the name of the error a
    Kafka client is answered with.
    """

    kafka_code: ClassVar[str] = "UNKNOWN_SERVER_ERROR"


class InvalidProducerEpochError(ProducerError):
    """A batch from an epoch older than one the partition already holds for its producer id.

    A newer instance of the producer (the same producer id with a bumped epoch)
    has written since: this one is a zombie and is fenced (Kafka's
    ``INVALID_PRODUCER_EPOCH``).
    """

    kafka_code = "INVALID_PRODUCER_EPOCH"


class OutOfOrderSequenceError(ProducerError):
    """A batch whose first sequence number does not follow the producer's last one in the partition.

    The producer skipped a sequence (a batch before this one was lost), or
    retried a batch older than the five the partition remembers, or started a
    new epoch at a sequence other than 0 (Kafka's ``OUT_OF_ORDER_SEQUENCE_NUMBER``).
    """

    kafka_code = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidTxnStateError(ProducerError):
    """A non-transactional batch from a producer whose transaction in the partition is still open, or a
    transaction call that does not fit the transaction's state (ending one that was never begun, committing
    one whose abort has begun) (Kafka's ``INVALID_TXN_STATE``)."""

    kafka_code = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(ProducerError):
    """A transaction marker from a coordinator epoch older than the one that wrote the producer's last marker
    (Kafka's ``TRANSACTION_COORDINATOR_FENCED``): a newer coordinator took over."""

    kafka_code = "TRANSACTION_COORDINATOR_FENCED"


class CorruptSnapshotError(CorruptionError):
    """A producer-state snapshot (``<offset>.snapshot``) that fails its CRC-32C or its checks.

    Never raised to a caller of the engine: such a snapshot is ignored with a
    warning, and the producer state is rebuilt from the ``.log`` files.
    """


class ProducerFencedError(InvalidProducerEpochError):
    """A transactional producer whose epoch is not its transactional id's current one (Kafka's ``PRODUCER_FENCED``).

    Another producer with the same transactional id has started since (or the
    coordinator aborted this one's transaction past its timeout, bumping the
    epoch): this one must stop; a new one calls ``init_producer_id`` again.
    """

    kafka_code = "PRODUCER_FENCED"


class TransactionError(ProducerError):
    """The transaction coordinator refused a call; ``kafka_code`` names Kafka's answer to it."""


class ConcurrentTransactionsError(TransactionError):
    """The transactional id is between two states (its previous transaction is still being committed or aborted).

    Retry shortly (Kafka clients do so by themselves): ``CONCURRENT_TRANSACTIONS``.
    """

    kafka_code = "CONCURRENT_TRANSACTIONS"


class InvalidProducerIdMappingError(TransactionError):
    """A transactional id unknown to the coordinator, or held by another producer id
    (``INVALID_PRODUCER_ID_MAPPING``): call ``init_producer_id`` with the transactional id first."""

    kafka_code = "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(TransactionError, ValueError):
    """A transaction timeout that is not a positive number of ms up to the coordinator's maximum
    (``INVALID_TRANSACTION_TIMEOUT``; Kafka's ``transaction.max.timeout.ms``, 15 minutes by default)."""

    kafka_code = "INVALID_TRANSACTION_TIMEOUT"
