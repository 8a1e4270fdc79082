"""librdkafka's idempotent producer streaming while ``seglog serve`` is killed (SIGKILL) and restarted, twice.

The producer streams keyed records to three partitions (several batches and
Produce requests in flight at once). The first server kills itself right
after it stored its 3rd Produce carrying records, before answering it; the
restarted one after its 4th; a third serves to the end. Each kill leaves a
stored batch whose answer never left (the client must send it again to a
server that rebuilds the producer state from the log) and later requests of
the same producer unanswered behind it. Every acknowledged record must be
in the log exactly once, at the offset its acknowledgement gave, and each
key's records in the order they were produced.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kafka_clients import TIMEOUT_S, need
from test_idempotent_producers import _free_port, _seglog, _start, _stop

from seglog.engine import Engine, offline

TOPIC, PARTITIONS, KEYS, PER_KEY = "orders", 3, 12, 40
KILLS_AFTER = (3, 4)  # each server's Produce (carrying records) after which it kills itself
_KILLER = Path(__file__).with_name("serve_killed_after_store.py")


def _stream(address: str, acked: list[tuple[int, int, bytes, bytes]], failures: list[str]) -> None:
    """Produce PER_KEY records for each of KEYS keys, round robin, all in flight at once; wait for every ack.

    Returns early once the producer reports a fatal error (it will deliver nothing more).
    """
    from confluent_kafka import Producer

    def on_error(err: Any) -> None:
        if err.fatal():
            failures.append(f"fatal: {err}")

    producer = Producer({
        "bootstrap.servers": address, "enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 8,
        "max.in.flight.requests.per.connection": 5, "error_cb": on_error,
        "message.timeout.ms": int(4 * TIMEOUT_S * 1000), "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "retry.backoff.ms": 50, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
    })
    lock = threading.Lock()

    def done(err: Any, message: Any) -> None:
        with lock:
            if err is not None:
                failures.append(str(err))
            else:
                acked.append((message.partition(), message.offset(), message.key(), message.value()))

    for n in range(PER_KEY):
        for k in range(KEYS):
            producer.produce(TOPIC, f"{k}:{n}".encode(), key=f"k{k}".encode(), partition=k % PARTITIONS,
                             on_delivery=done)
            producer.poll(0)
    deadline = time.monotonic() + 5 * TIMEOUT_S
    while producer.flush(1) and not any(f.startswith("fatal") for f in failures):
        assert time.monotonic() < deadline, "records still unacknowledged"


def _await_kill(process: subprocess.Popen[bytes], producing: concurrent.futures.Future[None]) -> str:
    """Wait for ``process`` to kill itself; fail at once if the producer gave up first (its error says why)."""
    deadline = time.monotonic() + 4 * TIMEOUT_S
    while True:
        try:
            _, err = process.communicate(timeout=0.5)
            return err.decode()
        except subprocess.TimeoutExpired:
            if producing.done():
                producing.result()  # its exception, if any
                raise AssertionError("the producer finished before the server killed itself") from None
            assert time.monotonic() < deadline, "the server did not kill itself"


async def _create(log_dir: Path) -> None:
    async with Engine.open(log_dir) as engine:
        await engine.create_topic(TOPIC, partitions=PARTITIONS)


async def _stored(log_dir: Path) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """Every partition's records as ``(offset, key, value)``."""
    out: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {}
    async with Engine.open(log_dir) as engine:
        for p in range(PARTITIONS):
            log, got, offset = engine.log(TOPIC, p), [], 0
            while offset < log.log_end_offset:
                read = await log.read(offset)
                got += [(r.offset, r.key, r.value) for r in read.records]
                offset = read.next_offset
            out[p] = got
    return out


def _records_in(log_dir: Path) -> int:
    return sum(offline.partition_info(log_dir, TOPIC, p).log_end_offset for p in range(PARTITIONS))


def test_every_acknowledged_record_is_stored_once_in_key_order_across_kills_of_the_server(tmp_path: Path) -> None:
    need("confluent-kafka")
    log_dir, port = tmp_path / "data", _free_port()
    asyncio.run(_create(log_dir))
    serve = ["serve", "--log-dir", str(log_dir), "--listen", f"127.0.0.1:{port}", "--no-auto-create"]
    acked: list[tuple[int, int, bytes, bytes]] = []
    failures: list[str] = []
    processes: list[subprocess.Popen[bytes]] = []
    stored_at_kill: list[int] = []
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            producing: concurrent.futures.Future[None] | None = None
            for kill_at in KILLS_AFTER:
                processes.append(_start([sys.executable, str(_KILLER), str(kill_at), *serve]))
                if producing is None:
                    producing = pool.submit(_stream, f"127.0.0.1:{port}", acked, failures)
                err = _await_kill(processes[-1], producing)
                assert processes[-1].returncode == -signal.SIGKILL, err
                assert f"killing myself after storing produce {kill_at}" in err
                stored_at_kill.append(_records_in(log_dir))
            processes.append(_start([*_seglog(), *serve]))
            assert producing is not None
            producing.result(timeout=6 * TIMEOUT_S)
        err = _stop(processes[-1])
        assert processes[-1].returncode == 0, err
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    total = KEYS * PER_KEY
    # Each kill came mid-stream: records were still to come after it (the state, not the timing, says so).
    assert stored_at_kill[0] < stored_at_kill[1] < total, stored_at_kill
    assert not failures, failures[:5]
    assert len(acked) == total
    stored = asyncio.run(_stored(log_dir))
    values = Counter(value for records in stored.values() for _, _, value in records)
    assert [v for v, n in values.items() if n > 1] == [], "records stored twice"
    assert sum(values.values()) == total, "records stored that were never acknowledged, or lost"
    where = {(p, offset): value for p, records in stored.items() for offset, _, value in records}
    assert all(where.get((p, offset)) == value for p, offset, _, value in acked), "an ack names the wrong offset"
    for p, records in stored.items():
        by_key: dict[bytes | None, list[int]] = {}
        for _, key, value in records:
            assert value is not None
            k, n = value.decode().split(":")
            assert key == f"k{k}".encode() and int(k) % PARTITIONS == p
            by_key.setdefault(key, []).append(int(n))
        assert all(ns == list(range(PER_KEY)) for ns in by_key.values()), "a key's records out of order"
