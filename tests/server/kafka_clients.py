"""The three Python Kafka clients behind one small interface, every call bounded in time.

aiokafka runs on the test's event loop; kafka-python and confluent-kafka block,
so they run in a worker thread (``asyncio.to_thread``) while the loop keeps
serving. A module of its own (not ``conftest``), as in the other test folders.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import pytest

TIMEOUT_S = 30.0
CLIENTS = ("aiokafka", "kafka-python", "confluent-kafka")
MODULES = {"aiokafka": "aiokafka", "kafka-python": "kafka", "confluent-kafka": "confluent_kafka"}


class Sent(NamedTuple):
    """A record as a test produces it and expects it back."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None


class Got(NamedTuple):
    offset: int
    value: bytes | None
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def need(client: str) -> None:
    """Skip the test when ``client``'s package is not installed (the ``wire`` extra brings all three)."""
    pytest.importorskip(MODULES[client], reason=f"{client} is not installed (pip install seglog[wire])")


def _headers(raw: Any) -> tuple[tuple[str, bytes], ...]:
    return tuple((str(k), bytes(v)) for k, v in (raw or ()))


async def produce(client: str, address: str, topic: str, records: Sequence[Sent], *, partition: int | None = 0,
                  compression: str | None = None, acks: Any = 1) -> list[int]:
    """Send ``records`` in order (one batch where the client batches) and wait for every ack; returns offsets."""
    need(client)
    if client == "aiokafka":
        return await _aiokafka_produce(address, topic, records, partition, compression, acks)
    if client == "kafka-python":
        return await asyncio.to_thread(_kafka_python_produce, address, topic, records, partition, compression, acks)
    return await asyncio.to_thread(_confluent_produce, address, topic, records, partition, compression, acks)


async def consume(
    client: str, address: str, topic: str, count: int, *, offset: int = 0, partition: int = 0
) -> list[Got]:
    """``count`` records of ``topic``/``partition`` from ``offset`` on (assign + seek, no group)."""
    need(client)
    if client == "aiokafka":
        return await _aiokafka_consume(address, topic, partition, offset, count)
    if client == "kafka-python":
        return await asyncio.to_thread(_kafka_python_consume, address, topic, partition, offset, count)
    return await asyncio.to_thread(_confluent_consume, address, topic, partition, offset, count)


# -- aiokafka -------------------------------------------------------------------------------------


async def _aiokafka_produce(address: str, topic: str, records: Sequence[Sent], partition: int | None,
                            compression: str | None, acks: Any) -> list[int]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=address, compression_type=compression, acks=acks, linger_ms=50,
                                max_request_size=4 << 20, request_timeout_ms=int(TIMEOUT_S * 1000))
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        futures = [
            await producer.send(topic, r.value, key=r.key, partition=partition, timestamp_ms=r.timestamp,
                                headers=list(r.headers) or None)
            for r in records
        ]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT_S)
    return [m.offset for m in metadata]


async def _aiokafka_consume(address: str, topic: str, partition: int, offset: int, count: int) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, group_id=None,
                                request_timeout_ms=int(TIMEOUT_S * 1000), fetch_max_wait_ms=100)
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    got: list[Got] = []
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            batches = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=500), TIMEOUT_S)
            got += [Got(m.offset, m.value, m.key, _headers(m.headers), m.timestamp) for m in batches.get(tp, [])]
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT_S)
    return got


# -- kafka-python ---------------------------------------------------------------------------------


def _kafka_python_produce(address: str, topic: str, records: Sequence[Sent], partition: int | None,
                          compression: str | None, acks: Any) -> list[int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=address, compression_type=compression, acks=acks, linger_ms=50,
                             max_request_size=4 << 20, request_timeout_ms=int(TIMEOUT_S * 1000),
                             max_block_ms=int(TIMEOUT_S * 1000))
    try:
        futures = [
            producer.send(topic, r.value, key=r.key, partition=partition, timestamp_ms=r.timestamp,
                          headers=list(r.headers))
            for r in records
        ]
        producer.flush(TIMEOUT_S)
        return [f.get(timeout=TIMEOUT_S).offset for f in futures]
    finally:
        producer.close(TIMEOUT_S)


def _kafka_python_consume(address: str, topic: str, partition: int, offset: int, count: int) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, group_id=None,
                             request_timeout_ms=int(TIMEOUT_S * 1000), fetch_max_wait_ms=100)
    got: list[Got] = []
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.poll(timeout_ms=500).get(tp, []):
                got.append(Got(message.offset, message.value, message.key, _headers(message.headers),
                               message.timestamp))
    finally:
        consumer.close()
    return got


# -- confluent-kafka (librdkafka) -----------------------------------------------------------------


_CONFLUENT_ACKS = {1: "1", 0: "0", -1: "all", "all": "all"}


def _confluent_produce(address: str, topic: str, records: Sequence[Sent], partition: int | None,
                       compression: str | None, acks: Any) -> list[int]:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": address, "compression.type": compression or "none", "acks": _CONFLUENT_ACKS[acks],
        "linger.ms": 50, "message.timeout.ms": int(TIMEOUT_S * 1000), "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "message.max.bytes": 4 << 20,
    })
    offsets: list[int] = [-1] * len(records)
    failures: list[str] = []

    def report(index: int) -> Any:
        def done(err: Any, message: Any) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                offsets[index] = message.offset()
        return done

    for i, r in enumerate(records):
        kwargs: dict[str, Any] = {"value": r.value, "key": r.key, "headers": list(r.headers) or None,
                                  "on_delivery": report(i)}
        if partition is not None:
            kwargs["partition"] = partition
        if r.timestamp is not None:
            kwargs["timestamp"] = r.timestamp
        producer.produce(topic, **kwargs)
    left = producer.flush(TIMEOUT_S)
    assert left == 0 and not failures, (left, failures)
    return offsets


def _confluent_consume(address: str, topic: str, partition: int, offset: int, count: int) -> list[Got]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": address, "group.id": "seglog-tests", "enable.auto.commit": False,
        "socket.timeout.ms": int(TIMEOUT_S * 1000), "fetch.wait.max.ms": 100,
    })
    got: list[Got] = []
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(Got(message.offset(), message.value(), message.key(), _headers(message.headers()),
                           message.timestamp()[1]))
    finally:
        consumer.close()
    return got
