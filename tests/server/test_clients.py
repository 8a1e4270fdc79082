"""Real Kafka clients against seglog's Kafka front end: produce, consume, offsets, compression, long poll.

Each client produces and consumes back exactly what it sent; records produced
by one client are consumed by every other; every compression codec; offset
look-ups; the long poll; records crossing between the wire and the native API.
The server runs on the test's loop (so the test can also use the engine);
the blocking clients run in threads. Every client call is bounded.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kafka_clients import CLIENTS, TIMEOUT_S, Got, Sent, consume, need, produce

from seglog.engine import Engine, Record
from seglog.server import KafkaServer

T0 = 1_700_000_000_000


def _mixed(prefix: str) -> list[Sent]:
    """Keys and null keys, empty, null and 256 KiB values, headers, explicit timestamps."""
    return [
        Sent(f"{prefix}-plain".encode(), key=b"k1", timestamp=T0),
        Sent(f"{prefix}-nokey".encode(), key=None, timestamp=T0 + 5),
        Sent(b"", key=b"k2", timestamp=T0 + 1),  # empty value; a timestamp earlier than the one before
        Sent(None, key=b"tombstone", timestamp=T0 + 2),
        Sent(b"\x00\xff" * (128 * 1024), key=b"big", timestamp=T0 + 3),  # 256 KiB
        Sent(f"{prefix}-headers".encode(), key=b"h", headers=(("trace", b"abc"), ("empty", b""), ("trace", b"2")),
             timestamp=T0 + 4),
    ]


def _as_got(sent: list[Sent], first_offset: int = 0) -> list[Got]:
    return [Got(first_offset + i, s.value, s.key, s.headers, s.timestamp or -1) for i, s in enumerate(sent)]


@pytest.mark.parametrize("client", CLIENTS)
async def test_each_client_consumes_back_exactly_what_it_produced(
    client: str, server: KafkaServer, engine: Engine
) -> None:
    sent = _mixed(client)
    offsets = await produce(client, server.bootstrap_servers, "roundtrip", sent)
    assert offsets == list(range(len(sent)))
    got = await consume(client, server.bootstrap_servers, "roundtrip", len(sent))
    assert got == _as_got(sent)
    # The same records through the native API: offsets, keys, values, headers, timestamps.
    native = (await engine.log("roundtrip").read(0, 4 << 20)).records
    assert [(r.offset, r.value, r.key, r.headers, r.timestamp) for r in native] == [tuple(g) for g in got]


@pytest.mark.parametrize("producer", CLIENTS)
async def test_records_produced_by_one_client_are_consumed_by_every_other(producer: str, server: KafkaServer) -> None:
    for client in CLIENTS:
        need(client)
    sent = _mixed(producer)
    await produce(producer, server.bootstrap_servers, "cross", sent)
    for consumer in CLIENTS:
        got = await consume(consumer, server.bootstrap_servers, "cross", len(sent))
        assert got == _as_got(sent), f"{producer} -> {consumer}"


CODECS = ("gzip", "snappy", "lz4", "zstd")


def _codec_available(client: str, codec: str) -> bool:
    if client != "kafka-python" or codec == "gzip":
        return True
    from kafka import codec as kafka_codec  # kafka-python compresses only with the optional codec packages

    return bool({"snappy": kafka_codec.has_snappy, "lz4": kafka_codec.has_lz4, "zstd": kafka_codec.has_zstd}[codec]())


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", CLIENTS)
async def test_compressed_batches_are_consumed_also_from_their_middle(
    producer: str, codec: str, server: KafkaServer, engine: Engine
) -> None:
    need(producer)
    if not _codec_available(producer, codec):
        pytest.skip(f"kafka-python cannot compress with {codec} without its optional codec package")
    sent = [Sent(b"compressible %d " % i * 20, key=b"%d" % i, timestamp=T0 + i) for i in range(30)]
    await produce(producer, server.bootstrap_servers, "packed", sent, compression=codec)
    native = (await engine.log("packed").read(0, 4 << 20)).records
    assert [r.value for r in native] == [s.value for s in sent]
    for consumer in CLIENTS:
        if consumer in (producer, "aiokafka"):
            need(consumer)
            got = await consume(consumer, server.bootstrap_servers, "packed", 13, offset=17)
            assert got == _as_got(sent[17:], 17), f"{producer} -> {consumer}"


async def test_beginning_end_and_offsets_for_times(server: KafkaServer, engine: Engine) -> None:
    timestamps = [T0 + 10, T0 + 30, T0 + 20, T0 + 40]  # out of order
    await engine.create_topic("times")
    await engine.log("times").append([Record(b"%d" % t, timestamp=t) for t in timestamps])
    lookups = {T0: 0, T0 + 15: 1, T0 + 25: 1, T0 + 31: 3, T0 + 41: None}
    address = server.bootstrap_servers

    need("aiokafka")
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTP

    consumer = AIOKafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, group_id=None,
                                request_timeout_ms=int(TIMEOUT_S * 1000))
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        tp = AioTP("times", 0)
        assert await asyncio.wait_for(consumer.beginning_offsets([tp]), TIMEOUT_S) == {tp: 0}
        assert await asyncio.wait_for(consumer.end_offsets([tp]), TIMEOUT_S) == {tp: 4}
        for ts, offset in lookups.items():
            found = (await asyncio.wait_for(consumer.offsets_for_times({tp: ts}), TIMEOUT_S))[tp]
            assert (found and found.offset) == offset, ts
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT_S)

    def kafka_python() -> None:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KpTP

        kc = KafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, group_id=None,
                           request_timeout_ms=int(TIMEOUT_S * 1000))
        try:
            tp = KpTP("times", 0)
            assert kc.beginning_offsets([tp]) == {tp: 0} and kc.end_offsets([tp]) == {tp: 4}
            for ts, offset in lookups.items():
                found = kc.offsets_for_times({tp: ts})[tp]
                assert (found and found.offset) == offset, ts
        finally:
            kc.close()

    def confluent() -> None:
        from confluent_kafka import Consumer, TopicPartition

        cc = Consumer({"bootstrap.servers": address, "group.id": "seglog-tests", "enable.auto.commit": False})
        try:
            assert cc.get_watermark_offsets(TopicPartition("times", 0), timeout=TIMEOUT_S) == (0, 4)
            for ts, offset in lookups.items():
                (found,) = cc.offsets_for_times([TopicPartition("times", 0, ts)], timeout=TIMEOUT_S)
                assert found.error is None and found.offset == (-1 if offset is None else offset), ts
        finally:
            cc.close()

    need("kafka-python")
    await asyncio.to_thread(kafka_python)
    need("confluent-kafka")
    await asyncio.to_thread(confluent)


async def test_a_waiting_consumer_gets_a_record_produced_later_promptly(server: KafkaServer, engine: Engine) -> None:
    need("aiokafka")
    from aiokafka import AIOKafkaConsumer, TopicPartition

    await engine.create_topic("later")
    consumer = AIOKafkaConsumer(bootstrap_servers=server.bootstrap_servers, enable_auto_commit=False, group_id=None,
                                fetch_max_wait_ms=20_000, request_timeout_ms=40_000)
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        tp = TopicPartition("later", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        waiting = asyncio.ensure_future(asyncio.wait_for(consumer.getone(tp), TIMEOUT_S))
        await asyncio.sleep(1.0)  # the spec's scenario: the record is produced 1 s after the consumer waits
        assert not waiting.done()
        produced_at = time.monotonic()
        await engine.produce("later", b"now", partition=0)
        message = await waiting
        delay = time.monotonic() - produced_at
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT_S)
    assert message.value == b"now"
    assert delay < 5  # promptly: the fetch waits up to 20 s, but the append wakes it


async def test_natively_appended_records_are_consumed_over_the_wire(server: KafkaServer, engine: Engine) -> None:
    await engine.create_topic("native", partitions=2)
    await engine.log("native", 1).append([Record(b"a", key=b"k", timestamp=T0, headers=(("h", b"v"),)),
                                          Record(None, timestamp=T0 + 1)])
    await engine.log("native", 1).append([Record(b"c", timestamp=T0 + 2)])
    expected = [Got(0, b"a", b"k", (("h", b"v"),), T0), Got(1, None, None, (), T0 + 1), Got(2, b"c", None, (), T0 + 2)]
    for client in CLIENTS:
        need(client)
        assert await consume(client, server.bootstrap_servers, "native", 3, partition=1) == expected, client


async def test_log_append_time_topics_give_every_record_its_append_time(server: KafkaServer, engine: Engine) -> None:
    await engine.create_topic("lat", config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    await produce("aiokafka", server.bootstrap_servers, "lat", [Sent(b"a", timestamp=5), Sent(b"b", timestamp=6)])
    for client in CLIENTS:
        need(client)
        got = await consume(client, server.bootstrap_servers, "lat", 2)
        assert [g.value for g in got] == [b"a", b"b"]
        assert all(g.timestamp >= before for g in got), client


async def test_records_survive_a_restart_after_acks_all(tmp_path: object) -> None:
    from pathlib import Path

    data = Path(str(tmp_path)) / "restart"
    sent = [Sent(b"durable %d" % i, key=b"%d" % i, timestamp=T0 + i) for i in range(10)]
    async with Engine.open(data) as engine, KafkaServer(engine, "127.0.0.1:0") as server:
        await produce("confluent-kafka", server.bootstrap_servers, "keep", sent, acks="all")
    async with Engine.open(data) as engine, KafkaServer(engine, "127.0.0.1:0") as server:
        got = await consume("aiokafka", server.bootstrap_servers, "keep", len(sent))
    assert got == _as_got(sent)


async def test_fifty_concurrent_producers_lose_nothing_and_keep_their_order(
    server: KafkaServer, engine: Engine
) -> None:
    need("aiokafka")
    from aiokafka import AIOKafkaProducer

    await engine.create_topic("many", partitions=3)
    per_producer = 20

    async def one(n: int) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap_servers, linger_ms=5,
                                    request_timeout_ms=int(TIMEOUT_S * 1000))
        await asyncio.wait_for(producer.start(), TIMEOUT_S)
        try:
            futures = [await producer.send("many", b"%d:%d" % (n, i), key=b"p%d" % n) for i in range(per_producer)]
            await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
        finally:
            await asyncio.wait_for(producer.stop(), TIMEOUT_S)

    await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(50))), 4 * TIMEOUT_S)
    seen: dict[int, list[int]] = {}
    for partition in range(3):
        log = engine.log("many", partition)
        offset = 0
        while offset < log.log_end_offset:
            got = await log.read(offset, 1 << 20)
            for record in got.records:
                producer_id, seq = map(int, (record.value or b"").split(b":"))
                seen.setdefault(producer_id, []).append(seq)
            offset = got.next_offset
    assert sorted(seen) == list(range(50))
    assert all(seqs == list(range(per_producer)) for seqs in seen.values())  # in order: one key, one partition
