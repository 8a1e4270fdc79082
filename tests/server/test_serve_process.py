"""``seglog serve`` as a process: the listening line, clean exits on signals, durability after SIGKILL, kcat.

Also the ``seglog_kafka`` pytest fixture, used as a user's project would use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka_clients import TIMEOUT_S, Got, Sent, _confluent_produce, _kafka_python_consume, need

from seglog.engine import Engine, LogConfig, Record

T0 = 1_700_000_000_000


def _seglog() -> list[str]:
    script = Path(sys.executable).parent / "seglog"
    return [str(script)] if script.exists() else [sys.executable, "-m", "seglog.tools.cli"]


class Served:
    def __init__(self, process: subprocess.Popen[bytes], address: str) -> None:
        self.process = process
        self.address = address
        self.rest = ""

    def stop(self, signum: int) -> tuple[int, str]:
        """Send ``signum``, wait for the exit; returns the exit code and stderr (what stdout had after the first line
        is kept in ``self.rest``)."""
        self.process.send_signal(signum)
        try:
            out, err = self.process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise
        self.rest = out.decode()
        return self.process.returncode, err.decode()


@contextmanager
def serve(log_dir: Path, *options: str) -> Iterator[Served]:
    process = subprocess.Popen([*_seglog(), "serve", "--log-dir", str(log_dir), "--listen", "127.0.0.1:0", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 60)
        line = process.stdout.readline().decode() if ready else ""
        assert line.startswith("listening on 127.0.0.1:"), (line, process.poll())
        yield Served(process, line.removeprefix("listening on ").strip())
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_serve_prints_its_address_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    need("confluent-kafka")
    need("kafka-python")
    sent = [Sent(b"v%d" % i, key=b"k", timestamp=T0 + i) for i in range(5)]
    with serve(tmp_path / "data") as server:
        assert _confluent_produce(server.address, "t", sent, 0, "gzip", "all") == list(range(5))
        assert _confluent_produce(server.address, "t", sent, 0, None, 1) == list(range(5, 10))
        got = _kafka_python_consume(server.address, "t", 0, 0, 10)
        code, err = server.stop(signal.SIGTERM)
    assert code == 0, err
    assert server.rest == ""  # one line on stdout, nothing more
    assert [g.value for g in got] == [s.value for s in sent] * 2
    assert "accepted" in err and "closed" in err and "shutting down" in err
    # The directory written over the wire is an ordinary seglog directory.
    verify = subprocess.run([*_seglog(), "verify", str(tmp_path / "data")], capture_output=True, timeout=120,
                            check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    dump = subprocess.run([*_seglog(), "dump", "--print-data", str(tmp_path / "data" / "t-0" / f"{0:020d}.log")],
                          capture_output=True, timeout=120, check=False)
    assert dump.returncode == 0 and b"v4" in dump.stdout, dump.stderr


def test_serve_exits_0_on_sigint(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as server:
        code, err = server.stop(signal.SIGINT)
    assert code == 0, err
    assert "Traceback" not in err


async def test_records_acknowledged_with_acks_all_survive_sigkill(tmp_path: Path) -> None:
    need("confluent-kafka")
    sent = [Sent(b"kept %d" % i, key=b"%d" % i, timestamp=T0 + i) for i in range(50)]
    with serve(tmp_path / "data") as server:
        assert _confluent_produce(server.address, "crash", sent, 0, "lz4", "all") == list(range(50))
        server.process.send_signal(signal.SIGKILL)
        server.process.communicate(timeout=TIMEOUT_S)
    async with Engine.open(tmp_path / "data") as engine:
        assert not engine.had_clean_shutdown
        records = (await engine.log("crash").read(0, 1 << 20)).records
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (i, s.key, s.value, s.timestamp) for i, s in enumerate(sent)
    ]


def test_no_auto_create_refuses_unknown_topics(tmp_path: Path) -> None:
    need("kafka-python")
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    with serve(tmp_path / "data", "--no-auto-create") as server:
        producer = KafkaProducer(bootstrap_servers=server.address, max_block_ms=2000, request_timeout_ms=5000)
        try:
            with pytest.raises(KafkaTimeoutError):  # metadata never shows the topic
                producer.send("unknown", b"x").get(timeout=5)
        finally:
            producer.close(5)
        code, err = server.stop(signal.SIGTERM)
    assert code == 0, err
    assert not (tmp_path / "data" / "unknown-0").exists()


def _segment_files_held(pid: int, root: Path) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            count += target.startswith(str(root)) and target.endswith((".log", ".index", ".timeindex"))
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")
async def test_max_open_files_bounds_what_the_served_segments_hold(tmp_path: Path) -> None:
    need("kafka-python")
    data = tmp_path / "data"
    async with Engine.open(data) as engine:  # 24 partitions of two segments: ~5 files each once read
        await engine.create_topic("t", partitions=24, config=LogConfig(segment_bytes=256))
        for p in range(24):
            for n in range(2):
                await engine.log("t", p).append([Record(b"%d/%d" % (p, n) + b"." * 100, timestamp=T0)])
    with serve(data, "--max-open-files", "16") as server:
        for p in range(24):
            got = await asyncio.to_thread(_kafka_python_consume, server.address, "t", p, 0, 2)
            assert [g.value[:4].rstrip(b".") for g in got] == [b"%d/0" % p, b"%d/1" % p]
            assert _segment_files_held(server.process.pid, data) <= 16
        code, err = server.stop(signal.SIGTERM)
    assert code == 0, err


def test_max_open_files_below_16_is_refused(tmp_path: Path) -> None:
    done = subprocess.run([*_seglog(), "serve", "--log-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
                           "--max-open-files", "8"], capture_output=True, timeout=120, check=False)
    assert done.returncode != 0
    assert b"max_open_files must be None or an int of at least 16" in done.stderr
    assert b"Traceback" not in done.stderr


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat; make test does so as root)")
def test_kcat_produces_lists_and_consumes(tmp_path: Path) -> None:
    assert KCAT is not None
    with serve(tmp_path / "data") as server:
        produced = subprocess.run([KCAT, "-P", "-b", server.address, "-t", "kc", "-K:", "-z", "snappy"],
                                  input=b"a:one\nb:two\n", capture_output=True, timeout=TIMEOUT_S, check=False)
        assert produced.returncode == 0, produced.stderr
        listed = subprocess.run([KCAT, "-L", "-b", server.address, "-t", "kc"], capture_output=True,
                                timeout=TIMEOUT_S, check=False)
        consumed = subprocess.run([KCAT, "-C", "-b", server.address, "-t", "kc", "-e", "-f", "%k=%s@%o\n"],
                                  capture_output=True, timeout=TIMEOUT_S, check=False)
        server.stop(signal.SIGTERM)
    assert b'topic "kc" with 1 partitions' in listed.stdout, listed.stderr
    assert consumed.returncode == 0 and consumed.stdout.decode().splitlines() == ["a=one@0", "b=two@1"]


def test_the_seglog_kafka_fixture_serves_a_fresh_directory(seglog_kafka: str, seglog_dir: Path) -> None:
    need("kafka-python")
    from kafka import KafkaProducer

    assert seglog_kafka.startswith("127.0.0.1:")
    producer = KafkaProducer(bootstrap_servers=seglog_kafka, request_timeout_ms=int(TIMEOUT_S * 1000),
                             max_block_ms=int(TIMEOUT_S * 1000))
    try:
        producer.send("orders", b"paid", key=b"o1", timestamp_ms=T0).get(timeout=TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    assert _kafka_python_consume(seglog_kafka, "orders", 0, 0, 1) == [Got(0, b"paid", b"o1", (), T0)]
    assert (seglog_dir / "orders-0").is_dir()


def test_offsets_committed_over_the_wire_survive_sigkill_of_the_server(tmp_path: Path) -> None:
    need("confluent-kafka")
    from confluent_kafka import Consumer, TopicPartition

    data = tmp_path / "data"
    with serve(data, "--group-min-session-timeout-ms", "100") as server:
        _confluent_produce(server.address, "paid", [Sent(b"v%d" % i) for i in range(3)], 0, None, 1)
        consumer = Consumer({"bootstrap.servers": server.address, "group.id": "ledger",
                             "enable.auto.commit": False, "socket.timeout.ms": int(TIMEOUT_S * 1000)})
        try:
            # A commit outside a generation (assign() only), answered before the kill.
            committed = consumer.commit(offsets=[TopicPartition("paid", 0, 2)], asynchronous=False)
            assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed] == [("paid", 0, 2, None)]
        finally:
            server.process.send_signal(signal.SIGKILL)
            server.process.communicate(timeout=TIMEOUT_S)
            consumer.close()
    from seglog.engine import offline

    assert offline.group_offsets(data) == {"ledger": {("paid", 0): 2}}
