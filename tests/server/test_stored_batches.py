"""Kafka batches are stored as they arrive: verbatim (compressed ones stay compressed), read back by every reader.

A produced RecordBatch v2 becomes a magic-2 batch of the partition's ``.log``
beside seglog's own; these tests hold what that promises: the directory passes
``seglog verify`` and ``seglog dump --print-data`` shows its records, native
reads decode it (also from the middle of a compressed batch), a fetch sends it
as stored and converts seglog batches around it, a segment mixing both formats
survives SIGKILL and recovery, and a corrupt batch is refused at produce (Kafka's
CORRUPT_MESSAGE, nothing stored) or found on disk by ``verify`` and recovery.
"""

from __future__ import annotations

import datetime
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka_clients import TIMEOUT_S, Sent, consume, need, produce
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta
from test_serve_process import _seglog, serve
from wire import WireClient

from seglog.engine import Engine, LogConfig, Record, offline
from seglog.engine.errors import CorruptRecordError
from seglog.server import KafkaServer
from seglog.server.records import encode_batch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "segments"))
from kafkahelpers import CODECS as KAFKA_CODECS
from kafkahelpers import kafka_batch, reseal

T0 = 1_700_000_000_000
CODECS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
KAFKA_MAGIC = 2
SEGLOG_MAGIC = 0x54


def _log_file(root: Path, topic: str) -> Path:
    return root / f"{topic}-0" / f"{0:020d}.log"


def _stored(root: Path, topic: str) -> list[tuple[int, int]]:
    """``(magic, codec)`` of every batch of the topic's first segment, as on disk."""
    return [(b.header.magic, b.header.attributes & 0x07) for b in offline.dump_log(_log_file(root, topic))]


def _produce_request(topic: str, batch: bytes) -> ProduceRequest:
    return ProduceRequest(
        acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(0), records=Records(batch)),
        )),),
    )


def _wire_batch(records: list[Record], *, codec: int = 0) -> bytes:
    """A RecordBatch v2 as a producer sends it (base offset 0), its records compressed with ``codec``."""
    return kafka_batch(0, records, next(name for name, code in KAFKA_CODECS.items() if code == codec))


def _records(n: int, prefix: bytes = b"r") -> list[Record]:
    return [
        Record(prefix + b" value %d " % i * 8, b"key %d" % i, T0 + i, (("h", b"%d" % i),) if i % 3 == 0 else ())
        for i in range(n)
    ]


@pytest.mark.parametrize("client", ["aiokafka", "confluent-kafka"])
async def test_a_directory_written_over_the_wire_with_every_codec_passes_verify_and_dump_shows_its_records(
    client: str, tmp_path: Path
) -> None:
    need(client)
    root = tmp_path / "data"
    # Compressible values: librdkafka sends a batch uncompressed when compressing does not shrink it.
    sent = {codec: [Sent(b"%s record %d " % (str(codec).encode(), i) * 10, key=b"k%d" % i, timestamp=T0 + i)
                    for i in range(25)] for codec in CODECS}
    async with Engine.open(root) as engine, KafkaServer(engine, "127.0.0.1:0") as server:
        for codec, records in sent.items():
            await produce(client, server.bootstrap_servers, f"c-{codec}", records, compression=codec)
    for codec, code in CODECS.items():
        stored = _stored(root, f"c-{codec}")
        # librdkafka compresses with lz4 only for a broker it believes has Kafka's 0.8.2 features, which it
        # infers from the group APIs (FindCoordinator): without them its lz4 batches arrive (and stay)
        # uncompressed. Either way each batch is stored as it arrived.
        allowed = {code, 0} if (client, codec) == ("confluent-kafka", "lz4") else {code}
        assert stored and {magic for magic, _ in stored} == {KAFKA_MAGIC}, (codec, stored)
        assert {c for _, c in stored} <= allowed, (codec, stored)  # verbatim, still compressed
    verify = subprocess.run([*_seglog(), "verify", str(root)], capture_output=True, timeout=120, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    dump = subprocess.run([*_seglog(), "dump", "--print-data", *(str(_log_file(root, f"c-{c}")) for c in CODECS)],
                          capture_output=True, timeout=120, check=False)
    assert dump.returncode == 0, dump.stderr
    for codec, records in sent.items():
        for record in records:
            assert b"payload: " + record.value in dump.stdout, (codec, record)
    for name in ("none", "gzip", "snappy", "zstd"):
        assert f"compresscodec: {name}".encode() in dump.stdout


async def test_native_reads_decode_stored_kafka_batches_also_from_the_middle_of_a_compressed_one(
    tmp_path: Path,
) -> None:
    async with Engine.open(tmp_path / "data") as engine, KafkaServer(engine, "127.0.0.1:0") as server:
        await engine.create_topic("mid")
        records = _records(40)
        client = await WireClient.connect(server.bootstrap_servers)
        try:
            for codec in (4, 1, 0):  # zstd, gzip, none: offsets 0-39, 40-79, 80-119
                answer = await client.call(0, 9, _produce_request("mid", _wire_batch(records, codec=codec)))
                assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
        finally:
            await client.close()
        log = engine.log("mid")
        stored = [(h.magic, h.attributes & 7) for h, _ in await log.read_batches(0, 1 << 20)]
        assert stored == [(KAFKA_MAGIC, 4), (KAFKA_MAGIC, 1), (KAFKA_MAGIC, 0)]
        every = (await log.read(0, 1 << 20)).records
        assert [(r.offset, r.value, r.key, r.timestamp, r.headers) for r in every[:40]] == [
            (i, r.value, r.key, r.timestamp, r.headers) for i, r in enumerate(records)
        ]
        # A point read into the middle of a compressed batch returns only records at/after the offset.
        for offset in (17, 57, 97):
            got = (await log.read(offset, 1)).records
            assert [(r.offset, r.value) for r in got] == [(offset, records[offset % 40].value)]
            got = (await log.read(offset, 1 << 20)).records
            assert got[0].offset == offset and got[-1].offset == 119
        found = await log.offset_for_timestamp(T0 + 23)
        assert found is not None and (found.offset, found.timestamp) == (23, T0 + 23)


async def test_a_fetch_sends_kafka_batches_as_stored_and_converts_seglog_batches_around_them(
    server: KafkaServer, engine: Engine
) -> None:
    need("confluent-kafka")
    await engine.create_topic("mixed")
    log = engine.log("mixed")
    await log.append([Record(b"native %d" % i, timestamp=T0 + i) for i in range(3)])
    wire = [Sent(b"wire %d" % i, key=b"w", timestamp=T0 + 10 + i) for i in range(4)]
    await produce("confluent-kafka", server.bootstrap_servers, "mixed", wire, compression="zstd")
    await log.append([Record(b"native %d" % i, timestamp=T0 + 20 + i) for i in range(3, 5)])
    batches = await log.read_batches(0, 1 << 20)
    assert [h.magic for h, _ in batches] == [SEGLOG_MAGIC, KAFKA_MAGIC, SEGLOG_MAGIC]
    values = [b"native 0", b"native 1", b"native 2", *(s.value for s in wire), b"native 3", b"native 4"]
    got = await consume("confluent-kafka", server.bootstrap_servers, "mixed", 9)
    assert [(g.offset, g.value) for g in got] == list(enumerate(values))
    got = await consume("aiokafka", server.bootstrap_servers, "mixed", 5, offset=4)  # from inside the Kafka batch
    assert [(g.offset, g.value) for g in got] == list(enumerate(values))[4:]


async def test_a_segment_mixing_both_formats_survives_sigkill_and_recovery(tmp_path: Path) -> None:
    need("confluent-kafka")
    root = tmp_path / "data"
    now = time.time_ns() // 1_000_000  # the batch without timestamps gets the append time: no time-based roll
    async with Engine.open(root) as engine:
        await engine.create_topic("both")
        await engine.log("both").append([Record(b"native %d" % i, timestamp=now + i) for i in range(5)])
    wire = [Sent(b"wire %d" % i, key=b"%d" % i, timestamp=now + 5 + i) for i in range(20)]
    no_time = encode_batch([Record(b"no time", offset=0, timestamp=None)], leader_epoch=-1)  # stored as seglog's
    with serve(root) as served:
        from kafka_clients import _confluent_produce

        assert _confluent_produce(served.address, "both", wire, 0, "lz4", "all") == list(range(5, 25))
        client = await WireClient.connect(served.address)
        try:
            answer = await client.call(0, 9, _produce_request("both", no_time))
            assert answer.responses[0].partition_responses[0].base_offset == 25
        finally:
            await client.close()
        served.process.send_signal(signal.SIGKILL)
        served.process.communicate(timeout=TIMEOUT_S)
    findings: list[offline.Finding] = []
    stored = [b.header.magic for b in offline.dump_log(_log_file(root, "both"), findings=findings)]
    assert stored == [SEGLOG_MAGIC, KAFKA_MAGIC, SEGLOG_MAGIC], findings
    log_file = _log_file(root, "both")
    kept = log_file.stat().st_size
    with log_file.open("ab") as f:  # a torn write after the last batch: recovery must cut exactly this
        f.write(_wire_batch(_records(3))[:70])
    async with Engine.open(root, LogConfig()) as engine:
        assert not engine.had_clean_shutdown
        records = (await engine.log("both").read(0, 1 << 20)).records
        assert engine.log("both").log_end_offset == 26
    assert log_file.stat().st_size == kept
    assert [r.value for r in records] == [
        *(b"native %d" % i for i in range(5)), *(s.value for s in wire), b"no time"
    ]
    verify = subprocess.run([*_seglog(), "verify", str(root)], capture_output=True, timeout=120, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def _lying(change: str) -> bytes:
    batch = bytearray(_wire_batch(_records(5), codec=0 if change != "compressed garbage" else 4))
    if change == "bad CRC":
        batch[-3] ^= 0x10
        return bytes(batch)
    if change == "bad count":
        struct.pack_into(">i", batch, 57, 4)  # record count 4 for 5 records
        struct.pack_into(">i", batch, 23, 3)
    elif change == "lying length":
        struct.pack_into(">i", batch, 8, struct.unpack_from(">i", batch, 8)[0] + 40)
        return bytes(batch)
    elif change == "lying max timestamp":
        struct.pack_into(">q", batch, 35, T0 + 1000)
    elif change == "compressed garbage":
        batch[70:80] = b"\xff" * 10
    return reseal(batch)


@pytest.mark.parametrize(
    "change", ["bad CRC", "bad count", "lying length", "lying max timestamp", "compressed garbage"]
)
async def test_a_corrupt_batch_is_refused_with_corrupt_message_and_nothing_is_stored(
    change: str, server: KafkaServer, engine: Engine
) -> None:
    await engine.create_topic("guarded")
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(0, 9, _produce_request("guarded", _lying(change)))
        part = answer.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (ErrorCode.corrupt_message, -1), part.error_message
        answer = await client.call(0, 9, _produce_request("guarded", _wire_batch(_records(2))))
        assert answer.responses[0].partition_responses[0].base_offset == 0  # nothing was stored before it
    finally:
        await client.close()
    assert engine.log("guarded").log_end_offset == 2


async def test_a_kafka_batch_damaged_on_disk_is_found_by_verify_and_cut_by_recovery(tmp_path: Path) -> None:
    root = tmp_path / "data"
    async with Engine.open(root) as engine, KafkaServer(engine, "127.0.0.1:0") as server:
        await engine.create_topic("hurt")
        client = await WireClient.connect(server.bootstrap_servers)
        try:
            for _ in range(2):
                answer = await client.call(0, 9, _produce_request("hurt", _wire_batch(_records(10), codec=4)))
                assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
        finally:
            await client.close()
    log_file = _log_file(root, "hurt")
    first, second = offline.dump_log(log_file)
    assert (first.header.magic, first.header.attributes & 7) == (KAFKA_MAGIC, 4)
    data = bytearray(log_file.read_bytes())
    data[second.position + second.header.size - 5] ^= 0x01  # inside the compressed records
    log_file.write_bytes(bytes(data))
    verify = subprocess.run([*_seglog(), "verify", str(root)], capture_output=True, timeout=120, check=False)
    assert verify.returncode != 0 and b"CRC" in verify.stdout + verify.stderr, verify.stdout + verify.stderr
    (root / ".clean-shutdown").unlink()  # as after a crash: the open recovers the active segment
    async with Engine.open(root) as engine:
        assert engine.log("hurt").log_end_offset == 10
        assert [r.offset for r in (await engine.log("hurt").read(0, 1 << 20)).records] == list(range(10))
    assert log_file.stat().st_size == second.position


async def test_offline_reads_explain_and_the_spark_scans_read_both_formats(tmp_path: Path) -> None:
    root = tmp_path / "data"
    native = [Record(b"native %d" % i, timestamp=T0 + i) for i in range(3)]
    wire = _records(10)
    async with Engine.open(root) as engine, KafkaServer(engine, "127.0.0.1:0") as server:
        await engine.create_topic("offline")
        await engine.log("offline").append(native)
        client = await WireClient.connect(server.bootstrap_servers)
        try:
            answer = await client.call(0, 9, _produce_request("offline", _wire_batch(wire, codec=4)))
            assert answer.responses[0].partition_responses[0].base_offset == 3
        finally:
            await client.close()
    assert [m for m, _ in _stored(root, "offline")] == [SEGLOG_MAGIC, KAFKA_MAGIC]
    values = [r.value for r in native] + [r.value for r in wire]
    assert [r.value for r in offline.read_records(root, "offline", 0, 0)] == values
    assert [r.offset for r in offline.read_records(root, "offline", 0, 7)] == list(range(7, 13))
    plan = offline.plan_partition(root, "offline", 0, offline.Bounds(start_offset=5))
    for scan in (offline.ranges.scan_range, offline.ranges.scan_range_buffers):
        chunks = [chunk for r in plan.ranges for chunk in scan(r)]
        columns = offline.ranges.RecordColumns() if scan is offline.ranges.scan_range else None
        if columns is not None:
            for chunk in chunks:
                columns.offsets.extend(chunk.offsets)
                columns.values.extend(chunk.values)
            assert (columns.offsets, columns.values) == (list(range(5, 13)), values[5:])
        else:
            assert sum(len(chunk) for chunk in chunks) == 8
    explained = offline.explain_offset(root, "offline", 0, 9)
    assert explained.result_offset == 9
    found = offline.offset_for_timestamp(root, "offline", 0, T0 + 4)
    assert found is not None and found.offset == 7  # wire record 4: T0 + 4, at offset 3 + 4


async def test_read_batches_refuses_an_offset_in_a_missing_segment_instead_of_skipping_to_the_next(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    async with Engine.open(root, LogConfig(segment_bytes=700, retention_ms=-1)) as engine:
        await engine.create_topic("gap")
        log = engine.log("gap")
        for i in range(6):
            await log.append_kafka_batch(_wire_batch(_records(3, b"b%d" % i)))
    part = root / "gap-0"
    bases = sorted(int(p.stem) for p in part.glob("*.log"))
    assert len(bases) >= 3, bases
    missing = bases[1]
    for suffix in (".log", ".index", ".timeindex"):
        (part / f"{missing:020d}{suffix}").unlink(missing_ok=True)
    # Read-only: nothing is set aside, so the engine holds the segments as they are, with the gap.
    async with Engine.open(root, LogConfig(segment_bytes=700, retention_ms=-1), read_only=True) as engine:
        log = engine.log("gap")
        first = await log.read_batches(0, 1 << 20)
        assert first and first[-1][0].last_offset == missing - 1  # the first segment is served whole
        with pytest.raises(CorruptRecordError, match=f"offset {missing} is in no segment"):
            await log.read_batches(missing, 1 << 20)
        with pytest.raises(CorruptRecordError, match=f"offset {missing} is in no segment"):
            await log.read(missing, 1 << 20)
