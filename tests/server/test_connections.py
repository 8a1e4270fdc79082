"""The connection core: frames, limits, order of answers, acks=0, and the long-polling Fetch."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.serial import entity_reader
from test_api_versions_served import _fetch, _produce
from wire import WireClient, fetched_records

from seglog.engine import Engine, Record
from seglog.server import KafkaServer

MakeServer = Callable[..., Awaitable[KafkaServer]]
ALL_TOPICS = MetadataRequest(topics=None, include_topic_authorized_operations=False)


async def _healthy(server: KafkaServer) -> None:
    """Another client is still served normally."""
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(3, 12, ALL_TOPICS)
        assert [b.node_id for b in answer.brokers] == [0]
    finally:
        await client.close()


async def _raw(server: KafkaServer, data: bytes) -> WireClient:
    client = await WireClient.connect(server.bootstrap_servers)
    client.writer.write(data)
    await client.writer.drain()
    return client


async def test_garbage_closes_only_that_connection(server: KafkaServer) -> None:
    bystander = await WireClient.connect(server.bootstrap_servers)
    body = struct.pack(">hhi", 0, 9, 1) + bytes(range(40))  # a Produce v9 header start, then noise
    bad = await _raw(server, struct.pack(">i", len(body)) + body)
    assert await bad.closed_by_server()
    assert (await bystander.call(3, 12, ALL_TOPICS)).brokers  # the open connection is unharmed
    await bad.close()
    await bystander.close()
    await _healthy(server)


async def test_an_oversized_frame_is_refused_before_its_body_arrives(make_server: MakeServer) -> None:
    server = await make_server(max_request_bytes=1000)
    bad = await _raw(server, struct.pack(">i", 1001))  # the 1001 bytes never come: no wait for them
    assert await bad.closed_by_server(wait_s=5)
    await bad.close()
    await _healthy(server)


async def test_a_negative_or_tiny_frame_size_is_refused(server: KafkaServer) -> None:
    for size in (-1, -(2**31), 0, 7):
        bad = await _raw(server, struct.pack(">i", size) + b"\0" * 8)
        assert await bad.closed_by_server(wait_s=5)
        await bad.close()
    await _healthy(server)


async def test_an_unknown_api_key_or_unserved_version_closes_the_connection(server: KafkaServer) -> None:
    for key, version in ((9999, 0), (10, 2), (0, 2), (1, 13), (3, 13)):  # FindCoordinator is not served
        body = struct.pack(">hhi", key, version, 7) + b"\x00\x00"
        bad = await _raw(server, struct.pack(">i", len(body)) + body)
        assert await bad.closed_by_server(wait_s=5), (key, version)
        await bad.close()
    await _healthy(server)


async def test_api_versions_above_4_gets_the_v0_body_with_unsupported_version(server: KafkaServer) -> None:
    body = struct.pack(">hhi", 18, 7, 42) + struct.pack(">h", -1) + b"\x00" * 8
    client = await _raw(server, struct.pack(">i", len(body)) + body)
    try:
        (size,) = struct.unpack(">i", await asyncio.wait_for(client.reader.readexactly(4), 10))
        data = await asyncio.wait_for(client.reader.readexactly(size), 10)
        (correlation,) = struct.unpack_from(">i", data)  # response header v0: the correlation id only
        answer, _ = entity_reader(ApiVersionsResponseV0)(data, 4)
        assert correlation == 42 and answer.error_code == ErrorCode.unsupported_version
        assert (18, 0, 4) in {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys}
        # The client then retries at a version we serve, on the same connection.
        retried = await client.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert retried.error_code == ErrorCode.none
    finally:
        await client.close()


async def test_a_stalled_partial_frame_is_closed_after_the_idle_timeout(make_server: MakeServer) -> None:
    server = await make_server(idle_timeout_ms=300)
    stalled = await _raw(server, struct.pack(">i", 100) + b"\x00" * 10)  # 90 bytes never come
    started = time.monotonic()
    assert await stalled.closed_by_server(wait_s=10)
    assert time.monotonic() - started < 8
    await stalled.close()
    half_size = await _raw(server, b"\x00\x00")  # not even a whole size
    assert await half_size.closed_by_server(wait_s=10)
    await half_size.close()
    await _healthy(server)


async def test_connections_beyond_the_limit_are_closed_on_arrival(make_server: MakeServer) -> None:
    server = await make_server(max_connections=1)
    first = await WireClient.connect(server.bootstrap_servers)
    await first.call(3, 12, ALL_TOPICS)  # accepted and counted
    second = await WireClient.connect(server.bootstrap_servers)
    assert await second.closed_by_server(wait_s=5)
    await second.close()
    assert (await first.call(3, 12, ALL_TOPICS)).brokers
    await first.close()
    for _ in range(100):  # the server notices the close
        if server.connection_count == 0:
            break
        await asyncio.sleep(0.02)
    await _healthy(server)


async def test_pipelined_requests_are_answered_in_order(server: KafkaServer) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        sent = [await client.send(0, 9, _produce("pipe", [Record(b"%d" % i)])) for i in range(20)]
        offsets = []
        for correlation in sent:  # receive() asserts each answer's correlation id, in order
            answer = await client.receive(0, 9, correlation)
            offsets.append(answer.responses[0].partition_responses[0].base_offset)
    finally:
        await client.close()
    assert offsets == list(range(20))


async def test_acks_0_gets_no_answer_and_is_stored(server: KafkaServer, engine: Engine) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        await client.send(0, 9, _produce("quiet", [Record(b"a")], acks=0))
        answer = await client.call(3, 12, ALL_TOPICS)  # the next answer is this one's: none came for acks=0
        assert "quiet" in [t.name for t in answer.topics]
    finally:
        await client.close()
    assert [r.value for r in (await engine.log("quiet").read(0)).records] == [b"a"]


async def test_a_failed_acks_0_produce_closes_the_connection(server: KafkaServer) -> None:
    bad = await WireClient.connect(server.bootstrap_servers)
    await bad.send(0, 9, _produce("bad/topic", [Record(b"a")], acks=0))
    assert await bad.closed_by_server(wait_s=5)
    await bad.close()
    await _healthy(server)


async def test_invalid_acks_are_refused(server: KafkaServer) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(0, 9, _produce("acks", [Record(b"a")], acks=2))
    finally:
        await client.close()
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks


async def _parked(engine: Engine, topic: str) -> None:
    """Until a fetch waits on ``topic``'s partition 0 (the long poll was reached, not raced past)."""
    for _ in range(500):
        if topic in engine.topics() and engine.log(topic)._data_waiters:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no fetch parked on the partition")


async def test_a_parked_fetch_is_woken_by_an_append(server: KafkaServer, engine: Engine) -> None:
    await engine.create_topic("lp")
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        correlation = await client.send(1, 12, _fetch("lp", 0, max_wait_ms=30_000))
        await _parked(engine, "lp")
        await engine.log("lp").append([Record(b"late")])
        answer = await client.receive(1, 12, correlation, wait_s=10)  # far sooner than max_wait_ms
    finally:
        await client.close()
    records = fetched_records(answer.responses[0].partitions[0].records)
    assert [r.value for r in records] == [b"late"]
    assert not engine.log("lp")._data_waiters  # the wait left nothing behind


async def test_a_fetch_waits_for_min_bytes(server: KafkaServer, engine: Engine) -> None:
    await engine.create_topic("mb")
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        correlation = await client.send(1, 12, _fetch("mb", 0, max_wait_ms=30_000, min_bytes=1000))
        await _parked(engine, "mb")
        await engine.log("mb").append([Record(b"small")])
        await asyncio.sleep(0)  # let the woken fetch read, find too few bytes and park again
        await _parked(engine, "mb")
        await engine.log("mb").append([Record(b"x" * 2000)])
        answer = await client.receive(1, 12, correlation, wait_s=10)
    finally:
        await client.close()
    records = fetched_records(answer.responses[0].partitions[0].records)
    assert [len(r.value or b"") for r in records] == [5, 2000]


async def test_an_idle_fetch_answers_after_about_max_wait(server: KafkaServer, engine: Engine) -> None:
    await engine.create_topic("idle")
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        started = time.monotonic()
        answer = await client.call(1, 12, _fetch("idle", 0, max_wait_ms=500), wait_s=10)
        elapsed = time.monotonic() - started
    finally:
        await client.close()
    assert answer.responses[0].partitions[0].records == b""
    assert 0.45 <= elapsed < 5  # generous: a busy machine answers late, never early
    assert not engine.log("idle")._data_waiters


async def test_closing_the_server_ends_a_parked_fetch(engine: Engine) -> None:
    await engine.create_topic("cl")
    server = KafkaServer(engine, "127.0.0.1:0")
    await server.start()
    client = await WireClient.connect(server.bootstrap_servers)
    await client.send(1, 12, _fetch("cl", 0, max_wait_ms=60_000))
    await _parked(engine, "cl")
    await asyncio.wait_for(server.close(), 10)
    assert await client.closed_by_server(wait_s=5)
    await client.close()
    assert not engine.log("cl")._data_waiters


async def test_a_client_that_stops_reading_is_dropped_after_the_idle_timeout(
    make_server: MakeServer, engine: Engine
) -> None:
    server = await make_server(idle_timeout_ms=300)
    await engine.create_topic("big")
    await engine.log("big").append([Record(b"x" * (900 * 1024))])
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        for _ in range(100):  # ~90 MB of answers, far more than the socket buffers hold; none is read
            await client.send(1, 12, _fetch("big", 0))
        for _ in range(500):
            if server.connection_count == 0:
                break
            await asyncio.sleep(0.02)
        assert server.connection_count == 0
    finally:
        client.writer.transport.abort()
    await _healthy(server)
