"""Produce (key 0), versions 3-9: append each partition's record batch; answer with its base offset.

Each partition's records are one RecordBatch v2 (versions 3 and later carry
nothing else). It is checked whole and stored as it arrived, compressed or
not (``PartitionLog.append_kafka_batch``; a batch that fails a check is
answered with Kafka's error for it, ``CORRUPT_MESSAGE`` for bad bytes, and
nothing is stored); the topic's ``message.timestamp.type`` applies
(LogAppendTime stamps the append time, returned as ``log_append_time``).
A batch with a producer id (an idempotent producer) is checked against the
partition's producer state before it is written: a retry of a batch already
written is answered with that batch's offsets and not written again; an older
epoch is ``INVALID_PRODUCER_EPOCH``, a gap in the sequences
``OUT_OF_ORDER_SEQUENCE_NUMBER`` (``seglog.engine.producer_state`` decides).
The partitions of one request are appended concurrently; requests of one
connection are served one at a time, so a producer's batches keep their order.

A transactional batch is verified with the transaction coordinator first, as
Kafka does since 3.6 (KIP-890, ``transaction.partition.verification.enable``):
the request's ``transactional_id`` must be in an ongoing transaction of that
producer id and epoch, to which AddPartitionsToTxn added the partition; else
the batch is refused and nothing is stored (``INVALID_TXN_STATE`` "Partition
was not added to the transaction"; ``INVALID_PRODUCER_ID_MAPPING`` for another
producer id; ``INVALID_PRODUCER_EPOCH`` for another epoch;
``TRANSACTIONAL_ID_AUTHORIZATION_FAILED`` without a transactional id, Kafka's
answer to transactional records in a request without one). A late batch of a
transaction that has already ended would otherwise open a new transaction no
coordinator knows, holding the partition's last stable offset for good.

``acks``: 0 gets no response at all (a failure closes the connection, as
Kafka does, so the producer notices); 1 and -1 (all) both answer once the
batch is written to the log file. With one node the in-sync replicas are this
node alone, so "all" means what it means on a one-broker Kafka cluster: the
write survives a crash of the server process; fsync follows the topic's
``flush.messages`` / ``flush.ms``, as in Kafka.

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from seglog.engine.errors import SeglogError
from seglog.engine.results import NO_TIMESTAMP
from seglog.engine.transactions import TransactionState
from seglog.server.apis._common import NO_THROTTLE, kafka_time
from seglog.server.broker import Broker, error_code_of
from seglog.server.errors import CorruptBatchError, FrameError
from seglog.server.protocol import DecodedRequest
from seglog.server.records import transactional_producer

API_KEY: Final = 0
MIN_VERSION: Final = 3
MAX_VERSION: Final = 9

log = logging.getLogger("seglog.server")

_VALID_ACKS: Final = (0, 1, -1)


async def handle(broker: Broker, request: DecodedRequest) -> ProduceResponse | None:
    body = request.body
    acks = int(body.acks)
    txn_id = body.transactional_id
    tasks = [
        _produce(broker, topic.name, int(partition.index), partition.records, acks,
                 None if txn_id is None else str(txn_id))
        for topic in body.topic_data or ()
        for partition in topic.partition_data or ()
    ]
    results = await asyncio.gather(*tasks)
    if acks == 0:
        failed = [(t, p, r) for t, p, r in results if r.error_code != ErrorCode.none]
        if failed:
            topic, partition, answer = failed[0]
            raise FrameError(
                f"an acks=0 produce to {topic}-{partition} failed ({answer.error_code.name}); closing the "
                "connection so that the producer notices, as Kafka does"
            )
        return None
    by_topic: dict[str, list[PartitionProduceResponse]] = {}
    for topic, _, answer in results:
        by_topic.setdefault(topic, []).append(answer)
    return ProduceResponse(
        responses=tuple(
            TopicProduceResponse(name=TopicName(name), partition_responses=tuple(answers))
            for name, answers in by_topic.items()
        ),
        throttle_time=NO_THROTTLE,
    )


async def _produce(
    broker: Broker, topic: str, partition: int, records: Any, acks: int, transactional_id: str | None
) -> tuple[str, int, PartitionProduceResponse]:
    def failed(code: ErrorCode, message: str) -> tuple[str, int, PartitionProduceResponse]:
        log.warning("produce to %s-%d refused (%s): %s", topic, partition, code.name, message)
        return topic, partition, PartitionProduceResponse(
            index=i32(partition), error_code=code, base_offset=i64(-1), record_errors=(), error_message=message
        )

    if acks not in _VALID_ACKS:
        return failed(ErrorCode.invalid_required_acks, f"acks must be 0, 1 or -1 (all), got {acks}")
    code = await broker.ensure_topic(topic)
    if code != ErrorCode.none:
        return failed(code, f"topic {topic!r} is not available")
    try:
        plog = broker.log_of(topic, partition)
        if records is None:
            raise CorruptBatchError("the partition's records are null; send one RecordBatch v2")
        producer = transactional_producer(records)
        if producer is not None:
            refused = _unverified(broker, transactional_id, producer, topic, partition)
            if refused is not None:
                return failed(*refused)
        result = await plog.append_kafka_batch(records)
    except SeglogError as exc:
        return failed(error_code_of(exc), str(exc))
    append_time = None
    if result.log_append_time != NO_TIMESTAMP:
        append_time = kafka_time(result.log_append_time)
    return topic, partition, PartitionProduceResponse(
        index=i32(partition),
        error_code=ErrorCode.none,
        base_offset=i64(result.first_offset),
        log_append_time=append_time,
        log_start_offset=i64(result.log_start_offset),
        record_errors=(),
    )


def _unverified(
    broker: Broker, transactional_id: str | None, producer: tuple[int, int], topic: str, partition: int
) -> tuple[ErrorCode, str] | None:
    """Why the coordinator does not vouch for a transactional batch to ``topic``-``partition`` (None: it does)."""
    producer_id, producer_epoch = producer
    if transactional_id is None:
        return (ErrorCode.transactional_id_authorization_failed,
                "transactional records in a produce request without a transactional id")
    state = broker.engine.transactions.state_of(transactional_id)
    if state is None or state.producer_id != producer_id:
        return (ErrorCode.invalid_producer_id_mapping,
                f"transactional id {transactional_id!r} has no transaction of producer id {producer_id}")
    if state.producer_epoch != producer_epoch:
        return (ErrorCode.invalid_producer_epoch,
                f"producer {producer_id}'s epoch is {state.producer_epoch}, not {producer_epoch}")
    if state.state is not TransactionState.ONGOING or (topic, partition) not in state.partitions:
        return (ErrorCode.invalid_txn_state,
                f"Partition was not added to the transaction ({transactional_id!r} is "
                f"{state.state.kafka_name}; AddPartitionsToTxn comes before the produce)")
    return None
