"""What every API handler shares: the engine, the advertised address, topic auto-creation, error codes.

seglog serves as a one-node Kafka cluster: node 0 at the advertised address
leads every partition (replicas and in-sync replicas are ``[0]``, leader epoch
0). Topics a client names in Metadata or Produce are created on first use when
auto-creation is on (Kafka's ``auto.create.topics.enable``, on by default, with
``num.partitions`` partitions).

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from dataclasses import dataclass, field
from typing import Final

from kio.schema.errors import ErrorCode

from seglog.engine import Engine, PartitionLog, errors
from seglog.engine.validate import validate_topic
from seglog.segments.kafka_batch import KafkaBatchError
from seglog.server.errors import KafkaProtocolError
from seglog.server.limits import DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS, DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS
from seglog.server.records import batch_error

__all__ = ["NODE_ID", "Broker", "error_code_of", "stable_offset"]

log = logging.getLogger("seglog.server")

NODE_ID: Final = 0  # the one node of the cluster seglog serves as
LEADER_EPOCH: Final = 0


@dataclass(slots=True)
class Broker:
    """The server-wide state handlers read: the engine, the advertised address and the topic policy."""

    engine: Engine
    host: str
    port: int
    auto_create: bool = True
    auto_create_partitions: int = 1
    cluster_id: str = field(default="")
    api_versions: tuple[tuple[int, int, int], ...] = ()
    """``(api_key, min_version, max_version)`` of every API served, as ApiVersions lists them."""
    group_min_session_timeout_ms: int = DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS
    group_max_session_timeout_ms: int = DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS
    _creating: dict[str, asyncio.Future[None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.cluster_id:
            # Stable for a log directory (Kafka's cluster id is a base64 UUID of 22 characters).
            digest = uuid.uuid5(uuid.NAMESPACE_URL, f"seglog:{self.engine.path.resolve()}")
            self.cluster_id = base64.urlsafe_b64encode(digest.bytes).decode().rstrip("=")

    async def ensure_topic(self, topic: str, *, allow_create: bool = True) -> ErrorCode:
        """``ErrorCode.none`` when ``topic`` exists (auto-created here if allowed), else why not.

        Concurrent callers naming the same new topic share one creation.
        """
        try:
            validate_topic(topic)
        except errors.InvalidTopicError:
            return ErrorCode.invalid_topic_exception
        if self._exists(topic):
            return ErrorCode.none
        if not (self.auto_create and allow_create):
            return ErrorCode.unknown_topic_or_partition
        pending = self._creating.get(topic)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._creating[topic] = pending
            try:
                await self.engine.create_topic(topic, partitions=self.auto_create_partitions)
                log.info("auto-created topic %s with %d partition(s)", topic, self.auto_create_partitions)
            except errors.TopicExistsError:
                pass
            except errors.SeglogError as exc:
                log.warning("auto-creating topic %s failed: %s", topic, exc)
                pending.set_result(None)
                return error_code_of(exc)
            finally:
                del self._creating[topic]
                if not pending.done():
                    pending.set_result(None)
        else:
            await asyncio.shield(pending)
        return ErrorCode.none if self._exists(topic) else ErrorCode.unknown_topic_or_partition

    def _exists(self, topic: str) -> bool:
        try:
            self.engine.partitions_for(topic)  # a dict look-up (topics() sorts every name)
        except errors.UnknownTopicOrPartitionError:
            return False
        return True


    def log_of(self, topic: str, partition: int) -> PartitionLog:
        """The partition log; raises ``UnknownTopicOrPartitionError`` like ``Engine.log``."""
        return self.engine.log(topic, partition)


async def stable_offset(plog: PartitionLog) -> int:
    """The partition's last stable offset, exact: its producer state loaded first (if nothing had yet)."""
    await plog.load_producer_state()
    return plog.last_stable_offset


def error_code_of(exc: BaseException) -> ErrorCode:
    """The Kafka error code a client gets for ``exc`` (Kafka's own mapping where one exists)."""
    if isinstance(exc, KafkaBatchError):  # a produced batch refused before it was stored
        return ErrorCode(batch_error(exc).error_code)
    if isinstance(exc, KafkaProtocolError):
        return ErrorCode(exc.error_code)
    if isinstance(exc, errors.ProducerError):
        # The producer errors (and the transaction coordinator's) name their Kafka error; kio's names are
        # Kafka's in lower case.
        code: ErrorCode = getattr(ErrorCode, exc.kafka_code.lower(), ErrorCode.unknown_server_error)
        return code
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return ErrorCode.unknown_server_error


_CODES: Final[tuple[tuple[type[BaseException], ErrorCode], ...]] = (
    (errors.UnknownTopicOrPartitionError, ErrorCode.unknown_topic_or_partition),
    (errors.OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (errors.RecordTooLargeError, ErrorCode.message_too_large),
    (errors.InvalidTopicError, ErrorCode.invalid_topic_exception),
    (errors.TopicExistsError, ErrorCode.topic_already_exists),
    (errors.InvalidConfigError, ErrorCode.invalid_config),
    (errors.InvalidRecordError, ErrorCode.invalid_record),
    # A partition closed under the request: its topic was deleted (or the server is stopping).
    (errors.ClosedError, ErrorCode.unknown_topic_or_partition),
    (errors.StorageError, ErrorCode.kafka_storage_error),
    (errors.CorruptionError, ErrorCode.kafka_storage_error),
)
