"""TxnOffsetCommit (key 28), versions 0-3: commit a consumer group's offsets inside a transaction.

The offsets are written to the group store as the producer's pending commit:
durable, invisible to OffsetFetch until the transaction commits, dropped if
it aborts (``seglog.engine.transactions``, ``seglog.engine.groups``). The
group must have been added with AddOffsetsToTxn (else ``INVALID_TXN_STATE``).
From version 3 the consumer's member id and generation are checked as
OffsetCommit checks them (``UNKNOWN_MEMBER_ID``, ``ILLEGAL_GENERATION``,
``FENCED_INSTANCE_ID``); without them the commit is accepted whatever the
group's state. Per partition: ``UNKNOWN_TOPIC_OR_PARTITION`` for a
partition that does not exist, ``OFFSET_METADATA_TOO_LARGE`` above 4096
bytes of metadata.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v3.response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

from seglog.engine.coordinator import CommitMember
from seglog.engine.errors import GroupError, SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import group_id_problem, plan_offset_commit
from seglog.server.apis._txn import txn_error_code
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 28
MIN_VERSION: Final = 0
MAX_VERSION: Final = 3
_FENCED_FROM: Final = 3


async def handle(broker: Broker, request: DecodedRequest) -> TxnOffsetCommitResponse:
    body = request.body
    group = body.group_id
    plan = plan_offset_commit(broker, body.topics)
    outcome = ErrorCode.none
    if group_id_problem(group):
        outcome = ErrorCode.invalid_group_id
    elif plan.offsets:
        try:
            await broker.engine.transactions.txn_offset_commit(
                body.transactional_id, group, int(body.producer_id), int(body.producer_epoch), plan.offsets,
                metadata=plan.metadata, committer=CommitMember(
                    getattr(body, "member_id", "") or "", int(getattr(body, "generation_id", -1)),
                    getattr(body, "group_instance_id", None),
                ),
            )
        except GroupError as exc:
            outcome = getattr(ErrorCode, exc.code.lower(), ErrorCode.unknown_server_error)
        except SeglogError as exc:
            outcome = txn_error_code(exc, f"TxnOffsetCommit of {body.transactional_id!r}", request.api_version,
                                     _FENCED_FROM)
    return TxnOffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=plan.answer_topics(outcome, TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition),
    )
