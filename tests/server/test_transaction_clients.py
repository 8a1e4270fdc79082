"""Transactions with real Kafka clients: confluent-kafka (librdkafka), aiokafka and kafka-python.

Transactional producers commit and abort; read_committed consumers of each
client see only committed records, read_uncommitted ones see all; an open
transaction holds read_committed consumers at the last stable offset until it
ends; an exactly-once consume-transform-produce loop redoes an aborted round;
a second producer with the same transactional id fences the first; the
server aborts a transaction left open past its timeout; native transactions
and Kafka clients see each other's. Every client call is bounded by a
timeout; what a test waits for is the server's state (the partitions' last
stable offset, the coordinator's states) or a client's end-of-partition
event, never a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kafka_clients import TIMEOUT_S, need

from seglog.engine import Engine, Record
from seglog.engine.transactions import TransactionState
from seglog.server import KafkaServer

BOUND_S = TIMEOUT_S


@pytest.fixture
async def served(engine: Engine, server: KafkaServer) -> AsyncIterator[tuple[Engine, str]]:
    await engine.create_topic("out", partitions=1)
    await engine.create_topic("in", partitions=1)
    yield engine, server.bootstrap_servers


async def until(engine: Engine, predicate: Any) -> None:
    async with asyncio.timeout(BOUND_S):
        await engine.transactions.wait_until(predicate)


def txn_state(engine: Engine, txn_id: str) -> TransactionState | None:
    record = engine.transactions.state_of(txn_id)
    return None if record is None else record.state


# -- confluent-kafka (blocking: run in a thread) --------------------------------------------------------


def _confluent_producer(address: str, txn_id: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": address, "transactional.id": txn_id, "linger.ms": 5,
        "message.timeout.ms": int(TIMEOUT_S * 1000), "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "transaction.timeout.ms": 60_000, **extra,
    })
    producer.init_transactions(TIMEOUT_S)
    return producer


def _flush_quietly(producer: Any) -> None:
    """Flush a producer that may be in a fatal state (fenced): it then raises, and has nothing to send."""
    from confluent_kafka import KafkaException

    with contextlib.suppress(KafkaException):
        producer.flush(TIMEOUT_S)


def _confluent_round(address: str, txn_id: str, values: list[bytes], commit: bool, topic: str = "out") -> None:
    producer = _confluent_producer(address, txn_id)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(TIMEOUT_S) == 0  # stored before the end (an abort would drop unsent records)
    if commit:
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.abort_transaction(TIMEOUT_S)
    assert producer.flush(TIMEOUT_S) == 0


def _confluent_read(address: str, isolation: str, topic: str = "out") -> list[bytes]:
    """Every record up to the end a consumer of ``isolation`` may read (its end-of-partition event)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": address, "group.id": "readers", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True, "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "fetch.wait.max.ms": 100,
    })
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return got
            got.append(message.value())
        raise AssertionError(f"no end of partition reached within {TIMEOUT_S} s; read {got}")
    finally:
        consumer.close()


# -- aiokafka (on the test's loop) ---------------------------------------------------------------------


async def _aiokafka_read(address: str, isolation: str, upto: int, topic: str = "out") -> list[bytes]:
    """Records until the consumer's position reaches ``upto`` (the LSO or HW the test expects it to stop at)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=address, isolation_level=isolation, enable_auto_commit=False,
                                fetch_max_wait_ms=100, request_timeout_ms=int(TIMEOUT_S * 1000))
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    got: list[bytes] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        async with asyncio.timeout(TIMEOUT_S):
            while await consumer.position(tp) < upto:
                batch = await consumer.getmany(tp, timeout_ms=200)
                got += [m.value for m in batch.get(tp, [])]
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT_S)
    return got


# -- kafka-python (blocking) ---------------------------------------------------------------------------


def _kafka_python_read(address: str, isolation: str, upto: int, topic: str = "out") -> list[bytes]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's import uses a deprecated importlib call
        from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=address, isolation_level=isolation, enable_auto_commit=False,
                             group_id=None, request_timeout_ms=int(TIMEOUT_S * 1000), fetch_max_wait_ms=100)
    got: list[bytes] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + TIMEOUT_S
        while consumer.position(tp) < upto:
            assert time.monotonic() < deadline, f"position {consumer.position(tp)} never reached {upto}; read {got}"
            for message in consumer.poll(timeout_ms=200).get(tp, []):
                got.append(message.value)
    finally:
        consumer.close()
    return got


async def _read_all_clients(address: str, isolation: str, upto: int) -> dict[str, list[bytes]]:
    out = {"confluent-kafka": await asyncio.to_thread(_confluent_read, address, isolation)}
    need("aiokafka")
    out["aiokafka"] = await _aiokafka_read(address, isolation, upto)
    need("kafka-python")
    out["kafka-python"] = await asyncio.to_thread(_kafka_python_read, address, isolation, upto)
    return out


# -- the tests -----------------------------------------------------------------------------------------


async def test_committed_and_aborted_transactions_as_each_clients_consumers_see_them(
    served: tuple[Engine, str],
) -> None:
    need("confluent-kafka")
    engine, address = served
    await asyncio.to_thread(_confluent_round, address, "p", [b"c1", b"c2"], True)
    await asyncio.to_thread(_confluent_round, address, "p", [b"a1", b"a2"], False)
    await asyncio.to_thread(_confluent_round, address, "p", [b"c3"], True)
    log = engine.log("out", 0)
    assert log.log_end_offset == 8  # 5 records and 3 markers
    assert [a.first_offset for a in log.aborted_transactions(0, 8)] == [3]
    committed = await _read_all_clients(address, "read_committed", 8)
    assert committed == {client: [b"c1", b"c2", b"c3"] for client in committed}
    uncommitted = await _read_all_clients(address, "read_uncommitted", 8)
    assert uncommitted == {client: [b"c1", b"c2", b"a1", b"a2", b"c3"] for client in uncommitted}


async def test_aiokafka_and_kafka_python_transactional_producers_commit_and_abort(
    served: tuple[Engine, str],
) -> None:
    need("aiokafka")
    need("kafka-python")
    engine, address = served
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=address, transactional_id="aio", enable_idempotence=True,
                                request_timeout_ms=int(TIMEOUT_S * 1000))
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        async with asyncio.timeout(TIMEOUT_S):
            async with producer.transaction():
                await producer.send_and_wait("out", b"aio-kept", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait("out", b"aio-dropped", partition=0)
            await producer.abort_transaction()
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT_S)

    def kafka_python() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaProducer
        kp = KafkaProducer(bootstrap_servers=address, transactional_id="kp", request_timeout_ms=int(TIMEOUT_S * 1000),
                           max_block_ms=int(TIMEOUT_S * 1000))
        try:
            kp.init_transactions()
            kp.begin_transaction()
            kp.send("out", b"kp-kept", partition=0).get(timeout=TIMEOUT_S)
            kp.commit_transaction()
            kp.begin_transaction()
            kp.send("out", b"kp-dropped", partition=0).get(timeout=TIMEOUT_S)
            kp.abort_transaction()
        finally:
            kp.close(TIMEOUT_S)

    await asyncio.to_thread(kafka_python)
    assert txn_state(engine, "aio") is TransactionState.COMPLETE_ABORT
    assert txn_state(engine, "kp") is TransactionState.COMPLETE_ABORT
    got = await asyncio.to_thread(_confluent_read, address, "read_committed")
    assert got == [b"aio-kept", b"kp-kept"]


async def test_an_open_transaction_holds_read_committed_consumers_at_the_lso_until_it_commits(
    served: tuple[Engine, str],
) -> None:
    need("confluent-kafka")
    engine, address = served
    await engine.produce("out", b"before", partition=0)
    producer = await asyncio.to_thread(_confluent_producer, address, "p")
    try:
        producer.begin_transaction()
        producer.produce("out", b"inside", partition=0)
        assert await asyncio.to_thread(producer.flush, TIMEOUT_S) == 0  # stored, not committed
        await engine.produce("out", b"after", partition=0)  # not transactional, but behind the open one
        log = engine.log("out", 0)
        assert (log.last_stable_offset, log.log_end_offset) == (1, 3)
        assert await asyncio.to_thread(_confluent_read, address, "read_committed") == [b"before"]
        assert await _aiokafka_read(address, "read_committed", 1) == [b"before"]
        assert await asyncio.to_thread(_confluent_read, address, "read_uncommitted") == [b"before", b"inside",
                                                                                          b"after"]
        await asyncio.to_thread(producer.commit_transaction, TIMEOUT_S)
    finally:
        await asyncio.to_thread(producer.flush, TIMEOUT_S)
    assert await asyncio.to_thread(_confluent_read, address, "read_committed") == [b"before", b"inside", b"after"]


async def test_an_exactly_once_loop_redoes_an_aborted_round_and_commits_each_input_once(
    served: tuple[Engine, str],
) -> None:
    need("confluent-kafka")
    engine, address = served
    for i in range(6):
        await engine.produce("in", f"v{i}".encode(), partition=0)

    def loop() -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({
            "bootstrap.servers": address, "group.id": "eos", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "socket.timeout.ms": int(TIMEOUT_S * 1000), "fetch.wait.max.ms": 100,
            "session.timeout.ms": 10_000,
        })
        producer = _confluent_producer(address, "eos-loop")
        try:
            consumer.subscribe(["in"])
            done = 0
            aborted_once = False
            deadline = time.monotonic() + 2 * TIMEOUT_S
            while done < 6:
                assert time.monotonic() < deadline, f"the loop processed {done} of 6"
                messages = consumer.consume(3, 1.0)
                messages = [m for m in messages if m.error() is None]
                if not messages:
                    continue
                producer.begin_transaction()
                for message in messages:
                    producer.produce("out", message.value().upper(), partition=0)
                offsets = [TopicPartition("in", 0, messages[-1].offset() + 1)]
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT_S)
                if not aborted_once:
                    aborted_once = True
                    # Stored first: an abort drops what librdkafka has not sent, and this round must be in the log.
                    assert producer.flush(TIMEOUT_S) == 0
                    producer.abort_transaction(TIMEOUT_S)
                    # Redo the round: back to the group's committed position (none yet: the start).
                    committed = consumer.committed([TopicPartition("in", 0)], TIMEOUT_S)[0].offset
                    consumer.seek(TopicPartition("in", 0, committed if committed >= 0 else 0))
                    continue
                producer.commit_transaction(TIMEOUT_S)
                done += len(messages)
        finally:
            producer.flush(TIMEOUT_S)
            consumer.close()

    await asyncio.to_thread(loop)
    assert await engine.committed("eos", "in", 0) == 6
    got = await asyncio.to_thread(_confluent_read, address, "read_committed")
    assert got == [f"V{i}".encode() for i in range(6)]
    uncommitted = await asyncio.to_thread(_confluent_read, address, "read_uncommitted")
    assert len(uncommitted) > 6  # the aborted round's records are in the log, skipped by read_committed


async def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    served: tuple[Engine, str],
) -> None:
    need("confluent-kafka")
    _, address = served

    def fenced() -> str:
        from confluent_kafka import KafkaException

        first = _confluent_producer(address, "shared")
        first.begin_transaction()
        first.produce("out", b"zombie", partition=0)
        assert first.flush(TIMEOUT_S) == 0
        second = _confluent_producer(address, "shared")  # aborts the first's transaction, bumps the epoch
        second.begin_transaction()
        second.produce("out", b"fresh", partition=0)
        second.commit_transaction(TIMEOUT_S)
        try:
            first.commit_transaction(TIMEOUT_S)
        except KafkaException as exc:
            error = exc.args[0]
            assert error.fatal() or error.txn_requires_abort(), error
            return str(error.name())
        finally:
            second.flush(TIMEOUT_S)
        raise AssertionError("the fenced producer committed")

    name = await asyncio.to_thread(fenced)
    assert "FENCED" in name or "EPOCH" in name, name
    assert await asyncio.to_thread(_confluent_read, address, "read_committed") == [b"fresh"]


async def test_a_transaction_left_open_past_its_timeout_is_aborted_by_the_server(
    served: tuple[Engine, str],
) -> None:
    need("confluent-kafka")
    engine, address = served
    # librdkafka wants its socket and message timeouts within the transaction timeout.
    short = {"transaction.timeout.ms": 3000, "socket.timeout.ms": 3000, "message.timeout.ms": 3000}
    producer = await asyncio.to_thread(_confluent_producer, address, "slow", **short)
    try:
        producer.begin_transaction()
        producer.produce("out", b"never", partition=0)
        assert await asyncio.to_thread(producer.flush, TIMEOUT_S) == 0
        assert txn_state(engine, "slow") is TransactionState.ONGOING
        await until(engine, lambda: txn_state(engine, "slow") is TransactionState.COMPLETE_ABORT)
        log = engine.log("out", 0)
        assert log.last_stable_offset == log.log_end_offset == 2  # the record and the coordinator's abort marker
        assert await asyncio.to_thread(_confluent_read, address, "read_committed") == []

        def late_commit() -> None:
            from confluent_kafka import KafkaException

            with pytest.raises(KafkaException):
                producer.commit_transaction(TIMEOUT_S)

        await asyncio.to_thread(late_commit)
    finally:
        await asyncio.to_thread(_flush_quietly, producer)


async def test_native_transactions_and_kafka_transactions_see_each_other(served: tuple[Engine, str]) -> None:
    need("confluent-kafka")
    engine, address = served
    async with engine.transaction("native") as txn:
        await txn.append("out", 0, [Record(b"n1"), Record(b"n2")])
    with pytest.raises(RuntimeError):
        async with engine.transaction("native") as txn:
            await txn.append("out", 0, [Record(b"n-aborted")])
            raise RuntimeError("abort")
    assert await asyncio.to_thread(_confluent_read, address, "read_committed") == [b"n1", b"n2"]
    await asyncio.to_thread(_confluent_round, address, "kafka", [b"k1"], True)
    await asyncio.to_thread(_confluent_round, address, "kafka", [b"k-aborted"], False)
    got = await engine.log("out", 0).read(0, isolation="read_committed")
    assert [r.value for r in got.records] == [b"n1", b"n2", b"k1"]


# -- across a SIGKILL of `seglog serve` ------------------------------------------------------------------


def test_after_a_sigkill_a_committed_transaction_stays_committed_and_an_open_one_holds_until_fenced(
    tmp_path: Path,
) -> None:
    """One transaction committed and one open when the server is killed -9; after the restart read_committed
    consumers see the committed records and stop at the open one, until a new producer of its transactional id
    aborts it (its state was read back from the transaction log)."""
    need("confluent-kafka")
    from test_idempotent_producers import _free_port, _seglog, _start, _stop

    log_dir, port = tmp_path / "data", _free_port()
    address = f"127.0.0.1:{port}"
    serve = [*_seglog(), "serve", "--log-dir", str(log_dir), "--listen", address]
    server = _start(serve)
    restarted = None
    try:
        _confluent_round(address, "done", [b"c1", b"c2"], True)
        open_producer = _confluent_producer(address, "open")
        open_producer.begin_transaction()
        open_producer.produce("out", b"o1", partition=0)
        assert open_producer.flush(TIMEOUT_S) == 0  # stored, its transaction open
        server.kill()
        server.communicate(timeout=TIMEOUT_S)
        assert server.returncode == -signal.SIGKILL
        restarted = _start(serve)
        assert _confluent_read(address, "read_committed") == [b"c1", b"c2"]
        assert _confluent_read(address, "read_uncommitted") == [b"c1", b"c2", b"o1"]
        _confluent_producer(address, "open")  # fences the killed server's producer: its transaction is aborted
        _flush_quietly(open_producer)
        _confluent_round(address, "open", [b"o2"], True)
        assert _confluent_read(address, "read_committed") == [b"c1", b"c2", b"o2"]
        err = _stop(restarted)
        assert restarted.returncode == 0, err
    finally:
        for process in (server, restarted):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat; make test does so as root)")
async def test_kcat_reads_committed_transactions_only_under_read_committed(served: tuple[Engine, str]) -> None:
    assert KCAT is not None
    engine, address = served
    async with engine.transaction("native") as txn:
        await txn.append("out", 0, [Record(b"kept")])
    with pytest.raises(RuntimeError):
        async with engine.transaction("native") as txn:
            await txn.append("out", 0, [Record(b"dropped")])
            raise RuntimeError("abort")

    def kcat(isolation: str) -> list[str]:
        done = subprocess.run(
            [KCAT, "-C", "-b", address, "-t", "out", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n",
             "-X", f"isolation.level={isolation}"],
            capture_output=True, timeout=TIMEOUT_S, check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.decode().splitlines()

    assert await asyncio.to_thread(kcat, "read_committed") == ["kept"]
    assert await asyncio.to_thread(kcat, "read_uncommitted") == ["kept", "dropped"]
