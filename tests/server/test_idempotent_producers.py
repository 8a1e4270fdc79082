"""Idempotent producers over the wire: a retried Produce is stored once.

The server's Produce handler is wrapped so that the answer to the first
Produce carrying records is lost after the batch was stored: the connection
drops instead of answering, and the client sends the same batch again (same
producer id, epoch and sequence). The test asserts that the drop happened and
that every record is in the log exactly once, in order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_clients import TIMEOUT_S, need

from seglog.engine import Engine
from seglog.server.apis import APIS, produce
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest
from seglog.server.testing import serve_in_thread

TOPIC = "orders"
ROUNDS, PER_ROUND = 4, 10


@dataclasses.dataclass
class _Drop:
    """Loses the answer to the first Produce that stored records (and counts what was asked)."""

    dropped: int = 0
    produces: int = 0

    async def handle(self, broker: Broker, request: DecodedRequest) -> Any:
        answer = await produce.handle(broker, request)
        self.produces += 1
        stored = answer is not None and any(
            p.error_code == 0 and p.base_offset >= 0 for t in answer.responses for p in t.partition_responses
        )
        if stored and not self.dropped:
            self.dropped += 1
            raise ConnectionResetError("test: the answer to this Produce is lost after the batch was stored")
        return answer


@pytest.fixture
def drop(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Drop]:
    hook = _Drop()
    monkeypatch.setitem(APIS, produce.API_KEY, dataclasses.replace(APIS[produce.API_KEY], handle=hook.handle))
    yield hook


def _values() -> list[bytes]:
    return [f"r{i}".encode() for i in range(ROUNDS * PER_ROUND)]


async def _stored(log_dir: Path) -> list[bytes | None]:
    async with Engine.open(log_dir) as engine:
        log = engine.log(TOPIC, 0)
        values: list[bytes | None] = []
        offset = 0
        while offset < log.log_end_offset:
            got = await log.read(offset)
            values += [r.value for r in got.records]
            offset = got.next_offset
        return values


def _confluent(address: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": address, "enable.idempotence": True, "linger.ms": 5,
        "message.timeout.ms": int(TIMEOUT_S * 1000), "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "retry.backoff.ms": 50, "reconnect.backoff.ms": 50,
    })
    failures: list[str] = []

    def done(err: Any, _message: Any) -> None:
        if err is not None:
            failures.append(str(err))

    values = _values()
    for start in range(0, len(values), PER_ROUND):
        for value in values[start : start + PER_ROUND]:
            producer.produce(TOPIC, value, partition=0, on_delivery=done)
        assert producer.flush(TIMEOUT_S) == 0
    assert not failures, failures


async def _aiokafka(address: str) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=address, enable_idempotence=True, linger_ms=5, retry_backoff_ms=50,
        request_timeout_ms=int(TIMEOUT_S * 1000),
    )
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        values = _values()
        for start in range(0, len(values), PER_ROUND):
            sent = [await producer.send(TOPIC, value, partition=0) for value in values[start : start + PER_ROUND]]
            await asyncio.wait_for(asyncio.gather(*sent), TIMEOUT_S)
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT_S)


@pytest.mark.parametrize("client", ["confluent-kafka", "aiokafka"])
async def test_a_produce_retried_after_a_lost_answer_is_stored_once(client: str, tmp_path: Path, drop: _Drop) -> None:
    need(client)
    log_dir = tmp_path / "data"
    with serve_in_thread(log_dir) as address:
        if client == "confluent-kafka":
            await asyncio.to_thread(_confluent, address)
        else:
            await _aiokafka(address)
    assert drop.dropped == 1, "the answer to a Produce was never dropped: the retry was not forced"
    assert drop.produces > ROUNDS, "the client did not send the dropped batch again"
    assert await _stored(log_dir) == _values()


# -- across a SIGKILL of `seglog serve` ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(command: list[str]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline().decode() if ready else ""
    assert line.startswith("listening on 127.0.0.1:"), (line, process.poll())
    return process


def _stop(process: subprocess.Popen[bytes]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=TIMEOUT_S)
    return err.decode()


def test_a_produce_stored_before_a_sigkill_is_not_stored_again_by_the_restarted_server(tmp_path: Path) -> None:
    """librdkafka's idempotent producer retries, across a kill -9 and restart, a batch the dead server stored."""
    need("confluent-kafka")
    log_dir, port = tmp_path / "data", _free_port()
    serve = ["serve", "--log-dir", str(log_dir), "--listen", f"127.0.0.1:{port}"]
    killed = _start([sys.executable, str(Path(__file__).with_name("serve_killed_after_store.py")), "2", *serve])
    restarted: subprocess.Popen[bytes] | None = None
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            producing = pool.submit(_confluent, f"127.0.0.1:{port}")
            _, err = killed.communicate(timeout=TIMEOUT_S)
            assert killed.returncode == -signal.SIGKILL, err
            assert "killing myself after storing produce 2" in err.decode()
            restarted = _start([*_seglog(), *serve])
            producing.result(timeout=2 * TIMEOUT_S)
        err = _stop(restarted)
        assert restarted.returncode == 0, err
    finally:
        for process in (killed, restarted):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()
    assert asyncio.run(_stored(log_dir)) == _values()


def _seglog() -> list[str]:
    script = Path(sys.executable).parent / "seglog"
    return [str(script)] if script.exists() else [sys.executable, "-m", "seglog.tools.cli"]
