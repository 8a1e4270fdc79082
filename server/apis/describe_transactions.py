"""DescribeTransactions (key 65), version 0: each transactional id's state, producer, timeout and partitions.

Answered from the transaction coordinator's state (Kafka's
``TransactionCoordinator.handleDescribeTransactions``): an id it does not know
(never used, or expired) is ``TRANSACTIONAL_ID_NOT_FOUND``, an empty one
``INVALID_REQUEST``; the state is Kafka's name (``Empty``, ``Ongoing``,
``PrepareCommit``, ...), the start time -1 until a transaction begins, and the
partitions those of the transaction in flight (none once it has ended).

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse, TopicData, TransactionState
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from seglog.engine.transactions import TxnRecord
from seglog.server.apis._common import NO_THROTTLE, kafka_time, kafka_timeout
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 65
MIN_VERSION: Final = 0
MAX_VERSION: Final = 0


def _state(txn_id: str, code: ErrorCode, record: TxnRecord | None = None) -> TransactionState:
    """One id's answer: its state (``record``), or ``code`` with Kafka's empty fields."""
    if record is None:
        return TransactionState(
            error_code=code, transactional_id=TransactionalId(txn_id), transaction_state="",
            transaction_timeout=kafka_timeout(0), transaction_start_time=kafka_time(-1),
            producer_id=ProducerId(-1), producer_epoch=i16(-1), topics=(),
        )
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(record.partitions):
        topics.setdefault(topic, []).append(partition)
    return TransactionState(
        error_code=code, transactional_id=TransactionalId(txn_id), transaction_state=record.state.kafka_name,
        transaction_timeout=kafka_timeout(record.timeout_ms), transaction_start_time=kafka_time(record.start_ms),
        producer_id=ProducerId(record.producer_id), producer_epoch=i16(record.producer_epoch),
        topics=tuple(TopicData(topic=TopicName(t), partitions=tuple(i32(p) for p in ps)) for t, ps in topics.items()),
    )


async def handle(broker: Broker, request: DecodedRequest) -> DescribeTransactionsResponse:
    coordinator = broker.engine.transactions
    states = []
    for txn_id in request.body.transactional_ids:
        record = coordinator.state_of(txn_id) if txn_id else None
        if record is not None:
            states.append(_state(txn_id, ErrorCode.none, record))
        else:
            states.append(_state(txn_id, ErrorCode.transactional_id_not_found if txn_id else ErrorCode.invalid_request))
    return DescribeTransactionsResponse(throttle_time=NO_THROTTLE, transaction_states=tuple(states))
