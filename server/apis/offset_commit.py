"""OffsetCommit (key 8), versions 2-8: commit a group's offsets into the group store.

The same store as ``Engine.commit_offset`` and library consumers'
``commit()``: durable (fdatasynced) before the answer. The coordinator's rules
decide (Kafka's): a member commits with its member id and generation; a
commit with generation -1 and no member id (an ``assign()``-only consumer)
is accepted while the group has no members and answered ``UNKNOWN_MEMBER_ID``
otherwise; ``REBALANCE_IN_PROGRESS`` while the group waits for its leader's
assignment. Per partition: ``UNKNOWN_TOPIC_OR_PARTITION`` for a partition
that does not exist, ``OFFSET_METADATA_TOO_LARGE`` for metadata above 4096
UTF-8 bytes (Kafka's ``offset.metadata.max.bytes``), ``OFFSET_OUT_OF_RANGE``
for a negative offset. Versions 2-4's retention time is ignored: offsets are
kept until their group or topic is deleted. A group store that cannot write
answers ``COORDINATOR_NOT_AVAILABLE``, which clients retry.

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

from seglog.engine.errors import SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import code, group_id_problem, plan_offset_commit
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 8
MIN_VERSION: Final = 2
MAX_VERSION: Final = 8

log = logging.getLogger("seglog.server")


async def handle(broker: Broker, request: DecodedRequest) -> OffsetCommitResponse:
    body = request.body
    group = body.group_id
    plan = plan_offset_commit(broker, body.topics)
    if group_id_problem(group):
        outcome = ErrorCode.invalid_group_id
    else:
        try:
            outcome = code(await broker.engine.coordinator.commit_offsets(
                group, plan.offsets, metadata=plan.metadata, member_id=body.member_id or "",
                generation_id=int(body.generation_id_or_member_epoch),
                group_instance_id=getattr(body, "group_instance_id", None),
            ))
        except SeglogError as exc:
            log.error("commit of group %s failed: %s", group, exc)
            outcome = ErrorCode.coordinator_not_available
    return OffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=plan.answer_topics(outcome, OffsetCommitResponseTopic, OffsetCommitResponsePartition),
    )
