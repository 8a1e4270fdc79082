"""ListOffsets (key 2), versions 1-7: an offset for a timestamp, or the earliest/latest/max-timestamp offset.

Per partition, ``timestamp`` is Kafka's: -1 the latest offset (the high
watermark; the last stable offset under ``read_committed``, isolation level 1,
version 2 on: the first offset of the oldest transaction still open there),
-2 the earliest (the log start offset), -3 (version 7) the
first record holding the largest timestamp, and a time in ms the earliest
offset whose record timestamp is at least that, even when producers sent
timestamps out of order. When no record is that late the answer is offset -1
and timestamp -1 without an error, as in Kafka.

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from seglog.engine import LATEST_TIMESTAMP, MAX_TIMESTAMP
from seglog.engine.errors import SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import LEADER_EPOCH, Broker, error_code_of, stable_offset
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 2
MIN_VERSION: Final = 1
MAX_VERSION: Final = 7
_READ_COMMITTED: Final = 1  # Kafka's IsolationLevel.READ_COMMITTED

log = logging.getLogger("seglog.server")


async def handle(broker: Broker, request: DecodedRequest) -> ListOffsetsResponse:
    read_committed = int(getattr(request.body, "isolation_level", 0)) == _READ_COMMITTED
    topics = []
    for topic in request.body.topics or ():
        answers = [
            await _answer(broker, topic.name, int(p.partition_index), int(p.timestamp), request.api_version,
                          read_committed)
            for p in topic.partitions or ()
        ]
        topics.append(ListOffsetsTopicResponse(name=TopicName(topic.name), partitions=tuple(answers)))
    return ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


async def _answer(
    broker: Broker, topic: str, partition: int, timestamp: int, version: int, read_committed: bool
) -> ListOffsetsPartitionResponse:
    def answer(code: ErrorCode, offset: int = -1, found_timestamp: int = -1) -> ListOffsetsPartitionResponse:
        return ListOffsetsPartitionResponse(
            partition_index=i32(partition),
            error_code=code,
            timestamp=i64(found_timestamp),
            offset=i64(offset),
            leader_epoch=i32(LEADER_EPOCH if code == ErrorCode.none else -1),
        )

    if timestamp == MAX_TIMESTAMP and version < 7:
        return answer(ErrorCode.unsupported_version)
    try:
        plog = broker.log_of(topic, partition)
        if read_committed and timestamp == LATEST_TIMESTAMP:
            return answer(ErrorCode.none, await stable_offset(plog))
        found = await plog.offset_for_timestamp(timestamp)
    except SeglogError as exc:
        code = error_code_of(exc)
        log.warning("list offsets of %s-%d for %d failed (%s): %s", topic, partition, timestamp, code.name, exc)
        return answer(code)
    if found is None:
        return answer(ErrorCode.none)
    return answer(ErrorCode.none, found.offset, found.timestamp)
