"""``KafkaServer`` as a library object: its options, its lifecycle, and native appends beside wire produces."""

from __future__ import annotations

import asyncio

import pytest
from kafka_clients import Sent, consume, need, produce
from test_connections import ALL_TOPICS
from wire import WireClient

from seglog.engine import Engine, Record
from seglog.engine.errors import InvalidConfigError, SeglogError
from seglog.server import KafkaServer
from seglog.server.server import parse_address


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:9092", ("127.0.0.1", 9092)), ("[::1]:0", ("::1", 0)), ("localhost:65535", ("localhost", 65535))],
)
def test_addresses_are_host_and_port(address: str, expected: tuple[str, int]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize("address", ["9092", ":9092", "host:", "host:65536", "host:-1", "host:port"])
def test_a_malformed_address_is_refused_with_an_example(address: str) -> None:
    with pytest.raises(InvalidConfigError, match="HOST:PORT"):
        parse_address(address)


async def test_options_are_checked(engine: Engine) -> None:
    for option in ("auto_create_partitions", "max_connections", "max_request_bytes", "idle_timeout_ms"):
        with pytest.raises(InvalidConfigError, match=option):
            KafkaServer(engine, "127.0.0.1:0", **{option: 0})
    with pytest.raises(InvalidConfigError, match="advertise"):
        KafkaServer(engine, "127.0.0.1:0", advertise="nowhere")


async def test_bootstrap_servers_needs_a_started_server(engine: Engine) -> None:
    server = KafkaServer(engine, "127.0.0.1:0")
    with pytest.raises(SeglogError, match="not started"):
        _ = server.bootstrap_servers
    async with server:
        assert server.bootstrap_servers == f"127.0.0.1:{server.address[1]}"
    await server.close()  # closing twice is harmless


async def test_a_port_in_use_is_a_clear_error(engine: Engine, server: KafkaServer) -> None:
    with pytest.raises(SeglogError, match=f"cannot listen on 127.0.0.1:{server.address[1]}"):
        await KafkaServer(engine, server.bootstrap_servers).start()


async def test_metadata_advertises_the_given_address(engine: Engine) -> None:
    async with KafkaServer(engine, "127.0.0.1:0", advertise="kafka.example:19092") as server:
        assert server.bootstrap_servers == "kafka.example:19092"
        client = await WireClient.connect(f"127.0.0.1:{server.address[1]}")
        try:
            answer = await client.call(3, 12, ALL_TOPICS)
        finally:
            await client.close()
    assert [(b.host, b.port) for b in answer.brokers] == [("kafka.example", 19092)]


async def test_auto_created_topics_get_the_configured_partition_count(engine: Engine) -> None:
    async with KafkaServer(engine, "127.0.0.1:0", auto_create_partitions=3) as server:
        await produce("aiokafka", server.bootstrap_servers, "three", [Sent(b"x")], partition=2)
    assert engine.partitions_for("three") == 3
    assert [r.value for r in (await engine.log("three", 2).read(0)).records] == [b"x"]


async def test_native_appends_and_wire_produces_interleave_safely(server: KafkaServer, engine: Engine) -> None:
    need("aiokafka")
    await engine.create_topic("both")
    count = 300

    async def native() -> None:
        log = engine.log("both")
        for i in range(count):
            if i == count // 2:  # half way, wait for some of the wire's records to arrive between ours
                await asyncio.wait_for(log.wait_for_append(count // 2), 30)
            await log.append([Record(b"native:%d" % i)])

    wire = produce("aiokafka", server.bootstrap_servers, "both", [Sent(b"wire:%d" % i) for i in range(count)])
    _, offsets = await asyncio.gather(native(), wire)
    assert offsets == sorted(offsets)
    log = engine.log("both")
    records = (await log.read(0, 1 << 20)).records
    assert [r.offset for r in records] == list(range(2 * count))
    by_source: dict[bytes, list[int]] = {}
    for record in records:
        source, number = (record.value or b"").split(b":")
        by_source.setdefault(source, []).append(int(number))
    assert by_source == {b"native": list(range(count)), b"wire": list(range(count))}
    native_offsets = [r.offset for r in records if (r.value or b"").startswith(b"native")]
    assert native_offsets != list(range(native_offsets[0], native_offsets[0] + count))  # they did interleave
    got = await consume("aiokafka", server.bootstrap_servers, "both", 2 * count)
    assert [g.value for g in got] == [r.value for r in records]


async def test_an_unclosed_server_warns(engine: Engine) -> None:
    import gc

    server = KafkaServer(engine, "127.0.0.1:0")
    await server.start()
    listening = server._server  # closed behind the server's back, so that only the warning is left to see
    assert listening is not None
    listening.close()
    await listening.wait_closed()
    del listening
    with pytest.warns(ResourceWarning, match="unclosed <KafkaServer listening on 127.0.0.1"):
        del server
        gc.collect()


async def test_serve_in_thread_reports_a_server_that_cannot_start(engine: Engine) -> None:
    from seglog.server.testing import serve_in_thread

    def start() -> None:
        with serve_in_thread(engine.path):  # the directory is locked by the test's engine
            raise AssertionError("served a locked directory")

    with pytest.raises(SeglogError, match="did not start") as caught:
        await asyncio.to_thread(start)
    assert "LogDirLockedError" in str(caught.value)


async def test_serve_in_thread_reports_a_failed_start_after_the_server_loop_closed(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server thread's loop may close before the caller asks it to stop: still the library's error."""
    import threading
    from types import SimpleNamespace

    from seglog.server import testing

    reached: list[bool] = []

    class ReadyAfterTheThreadEnded(threading.Event):
        # The caller wakes only once the server thread (and so its loop) is gone: the interleaving
        # a busy machine produces at random.
        def wait(self, timeout: float | None = None) -> bool:
            result = super().wait(timeout)
            for thread in threading.enumerate():
                if thread.name == "seglog-kafka-server":
                    thread.join(timeout)
            reached.append(not any(t.name == "seglog-kafka-server" for t in threading.enumerate()))
            return result

    # Only serve_in_thread's module sees the patched Event.
    monkeypatch.setattr(testing, "threading", SimpleNamespace(Event=ReadyAfterTheThreadEnded, Thread=threading.Thread))

    def start() -> None:
        with testing.serve_in_thread(engine.path):  # the directory is locked by the test's engine
            raise AssertionError("served a locked directory")

    with pytest.raises(SeglogError, match="did not start") as caught:
        await asyncio.to_thread(start)
    assert reached == [True]
    assert "LogDirLockedError" in str(caught.value)
