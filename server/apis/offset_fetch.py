"""OffsetFetch (key 9), versions 1-7: a group's committed offsets, from the group store.

Answered whatever the group's state (Kafka does the same: a group may use
Kafka only to store offsets). A partition without a committed offset gets
offset -1 and no error. From version 2, a null topic list asks for every
partition the group committed, and errors are also reported at the top.
Committed leader epochs are not kept: -1 (version 5 on).
With ``require_stable`` (version 7, KIP-447) a partition with a
transactional commit still pending (its transaction has not ended) is
answered ``UNSTABLE_OFFSET_COMMIT``, which the client retries: a consumer that
starts while a transaction commits its offsets waits for the outcome instead
of reading from the older offset.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7.response import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import group_id_problem
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 9
MIN_VERSION: Final = 1
MAX_VERSION: Final = 7


async def handle(broker: Broker, request: DecodedRequest) -> OffsetFetchResponse:
    body = request.body
    group = body.group_id
    invalid = group_id_problem(group)
    wanted: dict[str, list[int]] = {}
    if body.topics is None:
        if not invalid:
            for topic, partition in sorted(broker.engine.coordinator.committed_partitions(group)):
                wanted.setdefault(topic, []).append(partition)
    else:
        for topic in body.topics:
            wanted.setdefault(topic.name, []).extend(int(p) for p in topic.partition_indexes or ())
    coordinator = broker.engine.coordinator
    unstable = coordinator.pending_partitions(group) if not invalid and getattr(body, "require_stable", False) else ()
    topics = []
    for name, partitions in wanted.items():
        answers = []
        for partition in partitions:
            if (name, partition) in unstable:
                answers.append(OffsetFetchResponsePartition(
                    partition_index=i32(partition), committed_offset=i64(-1), committed_leader_epoch=i32(-1),
                    metadata="", error_code=ErrorCode.unstable_offset_commit,
                ))
                continue
            found = None if invalid else coordinator.committed(group, name, partition)
            offset, metadata = found if found is not None else (-1, "")
            answers.append(OffsetFetchResponsePartition(
                partition_index=i32(partition), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
                metadata=metadata, error_code=ErrorCode.invalid_group_id if invalid else ErrorCode.none,
            ))
        topics.append(OffsetFetchResponseTopic(name=TopicName(name), partitions=tuple(answers)))
    return OffsetFetchResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        error_code=ErrorCode.invalid_group_id if invalid else ErrorCode.none,
    )
