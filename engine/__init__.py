"""seglog's public async API: a log directory of topics, partitions and segments.

Owns: ``Engine`` (a log directory), ``PartitionLog``, ``LogConfig``, ``Record``
and the result types, the exception tree (``seglog.engine.errors``), recovery and
checkpoints, retention, consumer groups (the group coordinator, the group
store, ``GroupConsumer``), and the read-only, offline views of a directory used
by the tools and the Spark source (``seglog.engine.offline``).

Must not import: ``tools``. Everything ``tools`` needs is exported here.

    from seglog.engine import Engine, LogConfig, Record

    async with Engine.open("data") as engine:
        await engine.create_topic("orders", partitions=3)
        log = engine.log("orders", 0)
        res = await log.append([Record(b"v", key=b"k")])
        got = await log.read(res.first_offset)
"""

from seglog.engine import errors
from seglog.engine.config import LogConfig
from seglog.engine.consumer import ConsumerRecord, GroupConsumer, TopicPartition
from seglog.engine.engine import Engine, RecoveryProgress
from seglog.engine.log import PartitionLog
from seglog.engine.results import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AbortedTransaction,
    AppendResult,
    FetchResult,
    Isolation,
    OffsetAndTimestamp,
    RecordMetadata,
)
from seglog.engine.runner import run
from seglog.segments.records import Record

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AbortedTransaction",
    "AppendResult",
    "ConsumerRecord",
    "Engine",
    "FetchResult",
    "GroupConsumer",
    "Isolation",
    "LogConfig",
    "OffsetAndTimestamp",
    "PartitionLog",
    "Record",
    "RecordMetadata",
    "RecoveryProgress",
    "TopicPartition",
    "errors",
    "run",
]
