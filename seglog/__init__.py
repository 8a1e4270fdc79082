"""seglog: an asyncio-native, embeddable log-segment storage engine modelled on Apache Kafka's storage layer.

The one import package of the distribution. Its subpackages are the layers, and imports only point
down: ``seglog.tools`` → ``seglog.server`` → ``seglog.engine`` → ``seglog.segments`` →
``seglog.indexes``. The public
API is re-exported here::

    from seglog import Engine, LogConfig, Record

    async with Engine.open("data") as engine:
        await engine.create_topic("orders", partitions=3, exist_ok=True)
        log = engine.log("orders", 0)
        res = await log.append([Record(b"v", key=b"k")])
        got = await log.read(res.first_offset)
"""

from seglog.engine import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AbortedTransaction,
    AppendResult,
    ConsumerRecord,
    Engine,
    FetchResult,
    GroupConsumer,
    Isolation,
    LogConfig,
    OffsetAndTimestamp,
    PartitionLog,
    Record,
    RecordMetadata,
    RecoveryProgress,
    TopicPartition,
    errors,
    run,
)

__version__ = "0.4.0"

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
    "__version__",
    "errors",
    "run",
]
