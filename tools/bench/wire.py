"""``seglog bench --only wire``: Kafka clients against ``seglog serve``, beside what the clients can do at all.

Each figure is measured beside its denominators in the same run, the
variants interleaved round by round:

* **null sink** — a minimal server in a process of its own that speaks the
  same protocol versions, acknowledges every Produce without decoding or
  storing anything, and answers every Fetch with one cached batch (its base
  offset set to the offset asked): the client's own limit over a socket;
* **mock cluster** — librdkafka's in-memory cluster (``test.mock.num.brokers=1``)
  inside the producing process: no socket, no other process (produce only:
  a consumer's mock cluster is its own, empty one).

``seglog serve`` runs as its own process too (``--log-level WARNING``), so the
server and the clients do not share an interpreter. Clients: confluent-kafka
(librdkafka, with its default batching and ``acks=all``) and aiokafka
(defaults). Records go to partition 0 of one topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

TIMEOUT_S: Final = 120.0
PARTITION: Final = 0
_MODULE: Final = "seglog.tools.bench.wire"


@dataclass(frozen=True, slots=True)
class WireSizes:
    produce_100: int  # records per round, 100-B values
    produce_1k: int  # records per round, 1 KiB values
    fetch: int  # records consumed per round (100-B values)


WIRE_FULL: Final = WireSizes(produce_100=200_000, produce_1k=50_000, fetch=200_000)
WIRE_QUICK: Final = WireSizes(produce_100=5_000, produce_1k=2_000, fetch=5_000)


# ----------------------------------------------------------------------------------------------- servers


class Served:
    """A server process that printed ``listening on HOST:PORT``; stopped with SIGTERM."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT_S)
        line = self.process.stdout.readline().decode() if ready else ""
        if not line.startswith("listening on "):
            self.process.kill()
            self.process.wait()
            self.process.stdout.close()
            raise RuntimeError(f"{argv[:4]} did not start (printed {line!r})")
        self.address = line.removeprefix("listening on ").strip()

    def cpu_seconds(self) -> float | None:
        """User + system CPU the server process has used so far (Linux ``/proc``; ``None`` elsewhere)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, in clock ticks

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextlib.contextmanager
def seglog_server(log_dir: Path) -> Iterator[Served]:
    script = Path(sys.executable).parent / "seglog"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "seglog.tools.cli"]
    served = Served([*command, "serve", "--log-dir", str(log_dir), "--listen", "127.0.0.1:0", "--log-level", "WARNING"])
    try:
        yield served
    finally:
        served.stop()


@contextlib.contextmanager
def null_sink() -> Iterator[Served]:
    served = Served([sys.executable, "-m", _MODULE])
    try:
        yield served
    finally:
        served.stop()


async def _null_sink_main() -> None:
    """The null sink: ApiVersions, Metadata, Produce (acknowledged, not stored), Fetch (one cached batch)."""
    import datetime

    from kio.schema.errors import ErrorCode
    from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
    from kio.schema.list_offsets.v7.response import (
        ListOffsetsPartitionResponse,
        ListOffsetsResponse,
        ListOffsetsTopicResponse,
    )
    from kio.schema.metadata.v12.response import (
        MetadataResponse,
        MetadataResponseBroker,
        MetadataResponsePartition,
        MetadataResponseTopic,
    )
    from kio.schema.produce.v9.response import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
    from kio.schema.types import BrokerId, TopicName
    from kio.static.primitive import Records, i32, i32Timedelta, i64

    from seglog.engine import Record
    from seglog.server.apis import APIS, api_versions
    from seglog.server.protocol import decode_request, encode_response, peek_request
    from seglog.server.records import encode_batch

    served = (0, 1, 2, 3, 18)  # the same version ranges as seglog's, so clients choose the same versions
    ranges = tuple((a.key, a.min_version, a.max_version) for a in APIS.values() if a.key in served)
    zero = i32Timedelta.parse(datetime.timedelta(0))
    node = BrokerId(0)
    far = 1 << 60
    cached = encode_batch([Record(b"x" * 100, timestamp=1_700_000_000_000, offset=i) for i in range(1000)])
    next_offset = [0]
    host_port: list[Any] = []

    def answer(key: int, request: Any) -> Any:
        body = request.body
        if key == 18:
            return api_versions.answer(ranges)
        if key == 3:
            names = [t.name for t in body.topics or ()]
            return MetadataResponse(
                throttle_time=zero, brokers=(MetadataResponseBroker(node_id=node, host=host_port[0],
                                                                    port=i32(host_port[1])),),
                cluster_id="null-sink", controller_id=node,
                topics=tuple(MetadataResponseTopic(
                    error_code=ErrorCode.none, name=TopicName(n), topic_id=None, partitions=(MetadataResponsePartition(
                        error_code=ErrorCode.none, partition_index=i32(0), leader_id=node, leader_epoch=i32(0),
                        replica_nodes=(node,), isr_nodes=(node,)),)) for n in names),
            )
        if key == 0:
            if int(body.acks) == 0:
                return None
            topics = []
            for topic in body.topic_data or ():
                parts = []
                for p in topic.partition_data or ():
                    (count,) = struct.unpack_from(">i", p.records, 57)  # the record count, nothing decoded
                    parts.append(PartitionProduceResponse(index=p.index, error_code=ErrorCode.none,
                                                          base_offset=i64(next_offset[0]), record_errors=()))
                    next_offset[0] += count
                topics.append(TopicProduceResponse(name=topic.name, partition_responses=tuple(parts)))
            return ProduceResponse(responses=tuple(topics), throttle_time=zero)
        if key == 1:
            fetched = []
            for topic in body.topics or ():
                data = []
                for p in topic.partitions or ():
                    batch = struct.pack(">q", int(p.fetch_offset)) + cached[8:]  # the CRC does not cover it
                    data.append(PartitionData(
                        partition_index=p.partition, error_code=ErrorCode.none, high_watermark=i64(far),
                        last_stable_offset=i64(far), log_start_offset=i64(0), aborted_transactions=(),
                        records=Records(batch)))
                fetched.append(FetchableTopicResponse(topic=topic.topic, partitions=tuple(data)))
            return FetchResponse(throttle_time=zero, error_code=ErrorCode.none, responses=tuple(fetched))
        if key == 2:
            return ListOffsetsResponse(throttle_time=zero, topics=tuple(
                ListOffsetsTopicResponse(name=t.name, partitions=tuple(
                    ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.none,
                                                 timestamp=i64(-1), offset=i64(0 if int(p.timestamp) == -2 else far))
                    for p in t.partitions or ()))
                for t in body.topics or ()))
        raise ConnectionError(f"the null sink does not serve API {key}")

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                key, version, correlation = peek_request(frame)
                if key == 18 and version > 4:
                    writer.write(encode_response(18, 0, correlation, api_versions.unsupported_version_answer(ranges)))
                    continue
                response = answer(key, decode_request(frame))
                if response is not None:
                    writer.write(encode_response(key, version, correlation, response))
                    await writer.drain()
        writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    host_port.extend((host, port))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"listening on {host}:{port}", flush=True)
    await stop.wait()
    server.close()


# ----------------------------------------------------------------------------------------------- clients


def librdkafka_produce(address: str | None, topic: str, count: int, value_bytes: int) -> float:
    """Seconds to produce ``count`` records with librdkafka's defaults (``address`` None: the mock cluster)."""
    from confluent_kafka import Producer

    config: dict[str, Any] = {"bootstrap.servers": address} if address else {"test.mock.num.brokers": 1}
    producer = Producer(config)
    value = b"v" * value_bytes
    failures: list[str] = []

    def delivered(err: Any, _message: Any) -> None:
        if err is not None:
            failures.append(str(err))

    producer.produce(topic, value, partition=PARTITION, on_delivery=delivered)  # metadata and topic creation
    producer.flush(TIMEOUT_S)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=PARTITION, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.005)
        producer.poll(0)
    left = producer.flush(TIMEOUT_S)
    seconds = time.perf_counter() - started
    if left or failures:
        raise RuntimeError(f"librdkafka produce: {left} undelivered, errors {failures[:3]}")
    return seconds


def librdkafka_fetch(address: str, topic: str, count: int) -> float:
    """Seconds to consume ``count`` records of partition 0 from offset 0 with librdkafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": address, "group.id": "seglog-bench", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, PARTITION, 0)])
        started = time.perf_counter()
        got = 0
        deadline = started + TIMEOUT_S
        while got < count and time.perf_counter() < deadline:
            # No more than is left: consume() waits for as many as it is asked (seglog's log ends there).
            messages = consumer.consume(min(10_000, count - got), 1.0)
            got += sum(1 for m in messages if m.error() is None)
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    if got < count:
        raise RuntimeError(f"librdkafka fetch: {got} of {count} records in {TIMEOUT_S:g} s")
    return seconds


async def aiokafka_produce(address: str, topic: str, count: int, value_bytes: int) -> float:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=address)
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        value = b"v" * value_bytes
        await asyncio.wait_for(producer.send_and_wait(topic, value, partition=PARTITION), TIMEOUT_S)
        started = time.perf_counter()
        futures = [await producer.send(topic, value, partition=PARTITION) for _ in range(count)]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
        return time.perf_counter() - started
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT_S)


async def aiokafka_fetch(address: str, topic: str, count: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, group_id=None)
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        tp = TopicPartition(topic, PARTITION)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        started = time.perf_counter()
        got = 0
        deadline = started + TIMEOUT_S
        while got < count and time.perf_counter() < deadline:
            left = min(10_000, count - got)
            batches = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=1000, max_records=left), TIMEOUT_S)
            got += len(batches.get(tp, []))
        seconds = time.perf_counter() - started
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT_S)
    if got < count:
        raise RuntimeError(f"aiokafka fetch: {got} of {count} records in {TIMEOUT_S:g} s")
    return seconds


# ----------------------------------------------------------------------------------------------- the section

# (label, client, unit) of each row; the columns are seglog, null_sink, mock_cluster.
ROWS: Final = {
    "produce_100_librdkafka": "produce 100 B, confluent-kafka (librdkafka defaults, acks=all)",
    "produce_1k_librdkafka": "produce 1 KiB, confluent-kafka (librdkafka defaults, acks=all)",
    "produce_100_aiokafka": "produce 100 B, aiokafka (defaults)",
    "fetch_100_librdkafka": "fetch 100 B from offset 0, confluent-kafka",
    "fetch_100_aiokafka": "fetch 100 B from offset 0, aiokafka",
}
COLUMNS: Final = ("seglog", "null_sink", "mock_cluster")
# key -> (label, row, denominator column, target, minimum or None)
RATIOS: Final = {
    "wire_produce_vs_null": ("librdkafka produce 100 B / null sink", "produce_100_librdkafka", "null_sink",
                             ">= 0.7", 0.7),
    "wire_produce_1k_vs_null": ("librdkafka produce 1 KiB / null sink", "produce_1k_librdkafka", "null_sink",
                                ">= 0.7", 0.7),
    "wire_produce_vs_mock": ("librdkafka produce 100 B / mock cluster", "produce_100_librdkafka", "mock_cluster",
                             ">= 0.5", 0.5),
    "wire_produce_1k_vs_mock": ("librdkafka produce 1 KiB / mock cluster", "produce_1k_librdkafka", "mock_cluster",
                                ">= 0.5", 0.5),
    "wire_aiokafka_produce_vs_null": ("aiokafka produce 100 B / null sink", "produce_100_aiokafka", "null_sink",
                                      "reported", None),
    "wire_fetch_vs_null": ("librdkafka fetch / null sink (one cached batch)", "fetch_100_librdkafka", "null_sink",
                           ">= 0.7", 0.7),
    "wire_aiokafka_fetch_vs_null": ("aiokafka fetch / null sink (one cached batch)", "fetch_100_aiokafka",
                                    "null_sink", ">= 0.7", 0.7),
}


async def run_section(sizes: WireSizes, rounds: Any, scratch: Path, say: Any) -> dict[str, Any]:
    """Measure every row (variants interleaved round by round); returns the report's ``wire`` document."""
    from seglog.tools.bench.timing import Rate, interleave

    for module, package in (("confluent_kafka", "confluent-kafka"), ("aiokafka", "aiokafka")):
        try:
            __import__(module)
        except ImportError:
            say(f"wire: skipped, {package} is not installed (pip install seglog[wire])")
            return {"skipped": f"{package} is not installed"}
    rates: dict[tuple[str, str], Rate] = {}
    cpu: dict[tuple[str, str], list[float]] = {}  # server CPU seconds per record, per round
    with seglog_server(scratch / "wire-seglog") as seglog, null_sink() as sink:
        await asyncio.to_thread(librdkafka_produce, seglog.address, "fetch", sizes.fetch, 100)  # what fetches read
        counter = [0]

        def topic(prefix: str) -> str:
            counter[0] += 1
            return f"{prefix}-{counter[0]}"

        servers = {"seglog": seglog, "null_sink": sink}

        def variant(row: str, column: str, run: Any, count: int) -> Any:
            server = servers.get(column)

            async def go(record: bool) -> None:
                before = server.cpu_seconds() if server else None
                seconds = await run()
                after = server.cpu_seconds() if server else None
                if record:
                    rates.setdefault((row, column), Rate()).add(count, seconds)
                    if before is not None and after is not None:
                        cpu.setdefault((row, column), []).append((after - before) / count)
            return go

        variants = []
        for row, value_bytes, count in (("produce_100_librdkafka", 100, sizes.produce_100),
                                        ("produce_1k_librdkafka", 1024, sizes.produce_1k)):
            for column, address in (("seglog", seglog.address), ("null_sink", sink.address), ("mock_cluster", None)):
                variants.append(variant(row, column, lambda a=address, v=value_bytes, n=count: asyncio.to_thread(
                    librdkafka_produce, a, topic("p"), n, v), count))
        for column, address in (("seglog", seglog.address), ("null_sink", sink.address)):
            variants.append(variant("produce_100_aiokafka", column, lambda a=address: aiokafka_produce(
                a, topic("a"), sizes.produce_100, 100), sizes.produce_100))
            variants.append(variant("fetch_100_librdkafka", column, lambda a=address: asyncio.to_thread(
                librdkafka_fetch, a, "fetch", sizes.fetch), sizes.fetch))
            variants.append(variant("fetch_100_aiokafka", column, lambda a=address: aiokafka_fetch(
                a, "fetch", sizes.fetch), sizes.fetch))
        done = [0]
        total = len(list(rounds.indexes()))

        async def tick(record: bool) -> None:
            done[0] += 1
            say(f"wire: round {done[0]}/{total}")

        await interleave(rounds, [*variants, tick])
    rows = {row: {column: rates[(row, column)].per_second for column in COLUMNS if (row, column) in rates}
            for row in ROWS}
    ratios = {}
    for key, (label, row, column, target, minimum) in RATIOS.items():
        mine, other = rows[row].get("seglog"), rows[row].get(column)
        value = mine / other if mine and other else None
        ratios[key] = {"label": label, "value": value, "target": target,
                       "holds": None if value is None or minimum is None else value >= minimum}
    # The server's own CPU per record (median round): what a busy machine disturbs least.
    server_cpu_us = {
        row: {column: statistics.median(cpu[(row, column)]) * 1e6 for column in ("seglog", "null_sink")
              if cpu.get((row, column))}
        for row in ROWS
    }
    return {"rows": {row: {"label": ROWS[row], **cells} for row, cells in rows.items()}, "ratios": ratios,
            "server_cpu_us_per_record": server_cpu_us}


if __name__ == "__main__":  # the null sink's process
    asyncio.run(_null_sink_main())
