"""AddPartitionsToTxn (key 24), versions 0-3: add partitions to a producer's transaction.

A transactional producer sends it before its first Produce to a partition in
each transaction; the transaction coordinator records the partitions (they
get the transaction's marker when it ends) and begins the transaction
(``seglog.engine.transactions``). A partition that does not exist is answered
``UNKNOWN_TOPIC_OR_PARTITION`` and the others of the request
``OPERATION_NOT_ATTEMPTED`` (nothing is added), as Kafka does; a refusal of
the coordinator is every partition's answer. Versions 4 and later (the
brokers' batched form of KIP-890) are not served; clients use 0-3.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from seglog.engine.errors import SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._txn import txn_outcome
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 24
MIN_VERSION: Final = 0
MAX_VERSION: Final = 3
_FENCED_FROM: Final = 2


async def handle(broker: Broker, request: DecodedRequest) -> AddPartitionsToTxnResponse:
    body = request.body
    txn_id = body.v3_and_below_transactional_id
    wanted = [
        (topic.name, int(p)) for topic in body.v3_and_below_topics or () for p in topic.partitions or ()
    ]
    missing = {tp for tp in wanted if not _exists(broker, *tp)}
    if missing:
        errors = {tp: ErrorCode.unknown_topic_or_partition if tp in missing else ErrorCode.operation_not_attempted
                  for tp in wanted}
    else:
        outcome = await txn_outcome(
            broker.engine.transactions.add_partitions(
                txn_id, int(body.v3_and_below_producer_id), int(body.v3_and_below_producer_epoch), wanted
            ),
            f"AddPartitionsToTxn of {txn_id!r}", request.api_version, _FENCED_FROM,
        )
        errors = dict.fromkeys(wanted, outcome)
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for topic, partition in dict.fromkeys(wanted):
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(
            partition_index=i32(partition), partition_error_code=errors[(topic, partition)]
        ))
    return AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            AddPartitionsToTxnTopicResult(name=TopicName(name), results_by_partition=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


def _exists(broker: Broker, topic: str, partition: int) -> bool:
    try:
        return 0 <= partition < broker.engine.partitions_for(topic)
    except SeglogError:
        return False
