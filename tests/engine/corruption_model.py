"""Damaged log directories with a known model, and the oracle that judges what seglog makes of them.

Used by ``test_corruption_fuzz.py`` (random damage) and ``test_untrusted_files.py`` (one case each).
Everything here goes through the public surface only -- ``Engine``, ``PartitionLog.read``,
``offset_for_timestamp``, ``subscribe``, ``log_start_offset``/``log_end_offset``,
``Engine.committed``, and the ``seglog`` command line (``verify``, ``recover --dry-run``,
``consume``, ``offsets``, run in-process through ``seglog.tools.cli.main``) -- and writes the
damaged files byte by byte from what ``docs/FORMAT.md`` specifies, so it does not change when
the storage core behind that surface is restructured.

**The model.** A *template* is a log directory written by a real ``Engine`` (two topics, three
partitions, small ``segment_bytes`` and index sizes so that each partition has several segments
and index entries, batches of 1-6 records with out-of-order timestamps, keys and values that may
be ``None``, headers on some records, two consumer groups, topic ``alpha`` written by an idempotent
producer (so its partitions keep ``.snapshot`` files of producer state), and on some templates a
``delete_records_before`` so the log start is not 0), in two sessions: the first is closed
cleanly, the second appends more and is then either closed cleanly (a *clean* template) or
copied while it is still open (an *unclean* template: no ``.clean-shutdown``, preallocated
index files, a recovery-point checkpoint that lags the log end -- what ``kill -9`` leaves). Every
record appended is remembered: ``model[offset]`` is the record at that offset (offsets are dense,
the log start is known).

**The rules** (``observe``): after damage, opening (read-only and writable), reading and the
offline tools may raise only ``SeglogError`` subclasses; any other exception is a *crash*.
A record returned must be the model's record at its offset (offset, key, value, timestamp,
headers): anything else is a *wrong answer*. For every offset ``o`` in the engine's own
``[log_start_offset, log_end_offset)`` a read either raises a ``SeglogError`` or returns the
record at ``o`` first and then consecutive records: an empty answer or a jump is a *silent gap*.
Which records may be missing and which errors are acceptable depends on what was damaged
(``Allow``): the ``.log`` files of a partition (and its topic's ``topic.json``) may explain
errors, a moved log start and a shorter (never a longer, readable) log; a lying
``log-start-offset-checkpoint`` may explain a moved log start; indexes, the clean-shutdown
record and the recovery-point checkpoint are hints and explain nothing -- the log must be served
exactly. "Surviving" records are the ones the engine actually served in the same session:
``offset_for_timestamp(ts)`` must answer ``None`` only when no served record has a timestamp
``>= ts``, and otherwise an offset inside the log whose model record has such a timestamp (and
the answer's timestamp is that record's), with no earlier served offset qualifying. A partition's
log start and end are judged once it has been read (a cleanly closed partition may open its files
on first use). After the writable engine closes cleanly, a second open must report the same log
start and end. The writable engine also sends each ``alpha`` partition's last producer batch again
where the damage explains nothing: it must be answered with the offsets it was written at, never
written twice, whatever became of the ``.snapshot`` files. Any warning -- an object collected unclosed
above all -- is a finding too.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import gzip
import io
import json
import os
import random
import shutil
import struct
import time
import traceback
import warnings
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cramjam
import google_crc32c

from seglog import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Engine, LogConfig, PartitionLog, Record
from seglog.engine.errors import SeglogError
from seglog.server.records import encode_batch as encode_kafka_batch

T0 = 1_763_800_000_000  # a fixed base timestamp (ms), so a template is the same bytes on every run
# Topic alpha's records are an idempotent producer's, and a producer whose last batch is a day old has
# expired (Kafka's producer.id.expiration.ms, by the batch's timestamp): its base is today's midnight (UTC),
# so its templates are the same bytes all day.
T_PRODUCER = time.time_ns() // 1_000_000 // 86_400_000 * 86_400_000
LONG_INTERVAL_MS = 1 << 40  # background retention, checkpointing and flushing never run during a trial
GROUPS = ("billing", "audit")
PRODUCER_ID = 7000  # topic alpha's partition p is written by the idempotent producer PRODUCER_ID + p

# docs/FORMAT.md: the batch header and the index entries (big-endian).
HEADER = struct.Struct(">qiibIhiqqqhii")  # 61 bytes
HEADER_SIZE = HEADER.size
OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset (34 bytes)

TopicPartition = tuple[str, int]


def engine_config() -> LogConfig:
    """The engine's default config: the one topics fall back to when their ``topic.json`` is unreadable."""
    return LogConfig(retention_ms=-1, segment_ms=1 << 62)


async def open_engine(path: Path, *, read_only: bool = False) -> Engine:
    return await Engine.open(
        path,
        engine_config(),
        read_only=read_only,
        retention_check_interval_ms=LONG_INTERVAL_MS,
        checkpoint_interval_ms=LONG_INTERVAL_MS,
        flush_check_interval_ms=LONG_INTERVAL_MS,
    )


# ----------------------------------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class Expected:
    """One record as it was appended, at its offset."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]

    def matches(self, rec: Record) -> bool:
        return (
            rec.offset == self.offset
            and rec.key == self.key
            and rec.value == self.value
            and rec.timestamp == self.timestamp
            and tuple(tuple(h) for h in rec.headers) == self.headers
        )


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The last batch an idempotent producer wrote to a partition: a retry of it is answered, not written."""

    producer_id: int
    base_sequence: int
    records: list[Expected]


@dataclass(slots=True)
class PartitionModel:
    topic: str
    partition: int
    records: list[Expected] = field(default_factory=list)  # records[o].offset == o
    log_start: int = 0
    last_producer_batch: ProducerBatch | None = None  # topic alpha's appends are an idempotent producer's

    @property
    def log_end(self) -> int:
        return len(self.records)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def at(self, offset: int) -> Expected | None:
        return self.records[offset] if 0 <= offset < len(self.records) else None


@dataclass(slots=True)
class Template:
    """A pristine log directory and what it holds."""

    shape: int
    clean: bool
    path: Path
    partitions: dict[TopicPartition, PartitionModel]
    groups: dict[str, dict[TopicPartition, int]]

    def describe(self) -> str:
        return f"shape {self.shape} ({'clean' if self.clean else 'unclean: copied while open'})"


@dataclass(frozen=True, slots=True)
class Shape:
    """How a template is built (chosen by its shape number)."""

    topic_configs: dict[str, dict[str, Any]]
    partitions: dict[str, int]
    batches: int  # per partition, over both sessions
    delete_before: bool  # move alpha-1's log start with delete_records_before


def shape_of(number: int) -> Shape:
    rng = random.Random(f"shape-{number}")
    configs: dict[str, dict[str, Any]] = {}
    for topic in ("alpha", "beta"):
        configs[topic] = {
            "segment_bytes": rng.choice((400, 600, 900)),
            "index_interval_bytes": rng.choice((0, 64, 200)),
            # 48 bytes: 6 offset / 4 time entries, so a full index rolls the segment too.
            "segment_index_bytes": rng.choice((48, 96, 4096)),
            "retention_ms": -1,
            "segment_ms": 1 << 62,
        }
    return Shape(configs, {"alpha": 2, "beta": 1}, batches=rng.randint(14, 22), delete_before=number % 2 == 1)


def _random_batch(rng: random.Random, first_offset: int, index: int, base: int = T0) -> list[Expected]:
    count = rng.choice((1, 1, 2, 3, 4, 6))
    out = []
    for k in range(count):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 8))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 48))
        # Out of order across and inside batches, never negative.
        timestamp = base + index * 100 + rng.randint(-250, 250)
        headers: tuple[tuple[str, bytes], ...] = ()
        if rng.random() < 0.2:
            headers = (("h", rng.randbytes(rng.randint(0, 6))),)
        out.append(Expected(first_offset + k, key, value, timestamp, headers))
    return out


_KAFKA_CODECS = {"gzip": (1, gzip.compress), "zstd": (4, lambda b: bytes(cramjam.zstd.compress(b)))}


def _kafka_codec(formats: random.Random) -> str | None:
    # About half the batches are Kafka RecordBatch v2, stored as the wire server stores a produced
    # batch (FORMAT.md §2.5), some of them compressed: both formats must hold the same rules at use.
    roll = formats.random()
    if roll < 0.5:
        return None
    return "none" if roll < 0.8 else formats.choice(sorted(_KAFKA_CODECS))


def _kafka_batch(records: list[Record], codec: str) -> bytes:
    """``records`` as a producer sends them: a RecordBatch v2 (base offset 0, CreateTime) compressed with ``codec``."""
    plain = encode_kafka_batch([r._replace(offset=i) for i, r in enumerate(records)], leader_epoch=-1)
    if codec == "none":
        return plain
    code, compress = _KAFKA_CODECS[codec]
    body = compress(plain[HEADER_SIZE:])
    head = bytearray(plain[:HEADER_SIZE])
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(body))
    struct.pack_into(">h", head, 21, code)
    out = bytes(head) + body
    return out[:17] + struct.pack(">I", google_crc32c.value(out[21:])) + out[21:]


async def build_template(root: Path, shape_number: int) -> tuple[Template, Template]:
    """Write the clean and the unclean template of one shape under ``root``: (clean, unclean)."""
    shape = shape_of(shape_number)
    rng = random.Random(f"records-{shape_number}")
    formats = random.Random(f"formats-{shape_number}")  # its own stream: the records stay those of the shape
    live = root / f"live-{shape_number}"
    models = {
        (topic, p): PartitionModel(topic, p) for topic, n in shape.partitions.items() for p in range(n)
    }
    groups: dict[str, dict[TopicPartition, int]] = {g: {} for g in GROUPS}

    sequences: dict[TopicPartition, int] = {}

    async def append_some(engine: Engine, batches: int) -> None:
        for index in range(batches):
            for tp, model in models.items():
                base = T_PRODUCER if tp[0] == "alpha" else T0
                batch = _random_batch(rng, model.log_end, len(model.records) + index, base)
                records = [Record(e.value, key=e.key, timestamp=e.timestamp, headers=e.headers) for e in batch]
                if tp[0] == "alpha":  # its partitions keep producer state, and .snapshot files of it
                    producer_id, sequence = PRODUCER_ID + tp[1], sequences.get(tp, 0)
                    res = await engine.log(*tp).append(
                        records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence
                    )
                    sequences[tp] = sequence + len(batch)
                    model.last_producer_batch = ProducerBatch(producer_id, sequence, batch)
                else:
                    codec = _kafka_codec(formats)
                    if codec is None:
                        res = await engine.log(*tp).append(records)
                    else:
                        res = await engine.log(*tp).append_kafka_batch(_kafka_batch(records, codec))
                assert res.first_offset == model.log_end, (res, model.log_end)
                model.records.extend(batch)

    async def commit(engine: Engine, group: str) -> None:
        for tp, model in models.items():
            offset = rng.randint(0, model.log_end)
            await engine.commit_offset(group, tp[0], tp[1], offset)
            groups[group][tp] = offset

    first_session = shape.batches * 3 // 5
    engine = await open_engine(live)
    try:
        for topic, n in shape.partitions.items():
            await engine.create_topic(topic, partitions=n, config=shape.topic_configs[topic])
        await append_some(engine, first_session)
        await commit(engine, "billing")
        if shape.delete_before:
            model = models[("alpha", 1)]
            # Past the first segment, so that segment is deleted and the start is not a base offset.
            target = segment_bases(live / "alpha-1")[1] + 1
            model.log_start = await engine.log("alpha", 1).delete_records_before(target)
    finally:
        await engine.close()
    unclean = root / f"unclean-{shape_number}"
    clean = root / f"clean-{shape_number}"
    engine = await open_engine(live)
    try:
        await append_some(engine, shape.batches - first_session)
        await commit(engine, "audit")
        # Everything appended is in the files (the page cache), as after kill -9 of the process.
        shutil.copytree(live, unclean, ignore=shutil.ignore_patterns(".lock"))
    finally:
        await engine.close()
    shutil.copytree(live, clean, ignore=shutil.ignore_patterns(".lock"))
    shutil.rmtree(live)

    def template(path: Path, is_clean: bool) -> Template:
        parts = {
            tp: PartitionModel(m.topic, m.partition, list(m.records), m.log_start, m.last_producer_batch)
            for tp, m in models.items()
        }
        return Template(shape_number, is_clean, path, parts, {g: dict(o) for g, o in groups.items()})

    return template(clean, True), template(unclean, False)


# --------------------------------------------------------------------------------------- file helpers


class Templates:
    """The templates of every shape, built on first use and shared by the trials of a test module."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[int, tuple[Template, Template]] = {}

    async def get(self, shape: int) -> tuple[Template, Template]:
        if shape not in self._built:
            self._built[shape] = await build_template(self.root, shape)
        return self._built[shape]


def segment_bases(partition_dir: Path) -> list[int]:
    """Base offsets of the ``.log`` files of a partition directory, ascending."""
    out = []
    for name in os.listdir(partition_dir):
        stem, dot, suffix = name.partition(".")
        if dot and suffix == "log" and stem.isdigit() and len(stem) == 20:
            out.append(int(stem))
    return sorted(out)


def seg_path(partition_dir: Path, base: int, suffix: str) -> Path:
    return partition_dir / f"{base:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class BatchAt:
    position: int
    base_offset: int
    size: int  # bytes of the whole batch
    last_offset: int
    max_timestamp: int


def batches_of(log_file: Path) -> list[BatchAt]:
    """The batches of a (pristine) ``.log`` file, by walking the headers (docs/FORMAT.md section 2)."""
    data = log_file.read_bytes()
    out, pos = [], 0
    while pos + HEADER_SIZE <= len(data):
        fields = HEADER.unpack_from(data, pos)
        base, length, last_delta, max_ts = fields[0], fields[1], fields[6], fields[8]
        if length < HEADER_SIZE - 12 or pos + 12 + length > len(data):
            break
        out.append(BatchAt(pos, base, 12 + length, base + last_delta, max_ts))
        pos += 12 + length
    return out


def flip_bit(path: Path, position: int, bit: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ (1 << bit)]))


def overwrite(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


# ------------------------------------------------------------------------------------------- damage


@dataclass(frozen=True, slots=True)
class Allow:
    """What a damage may explain in one partition."""

    errors: bool = False  # SeglogErrors on open or read
    head: bool = False  # a log start other than the model's
    tail: bool = False  # a log end below the model's (or above it, if reads there fail)

    def __or__(self, other: Allow) -> Allow:
        return Allow(self.errors or other.errors, self.head or other.head, self.tail or other.tail)


LOG_DAMAGE = Allow(errors=True, head=True, tail=True)
START_DAMAGE = Allow(head=True)


@dataclass(slots=True)
class Damage:
    kind: str
    detail: str
    allow: dict[TopicPartition, Allow] = field(default_factory=dict)
    groups: bool = False  # a consumer-group file was damaged

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass(slots=True)
class Site:
    """The directory being damaged and what it was built from."""

    rng: random.Random
    root: Path
    template: Template

    def partition(self) -> tuple[TopicPartition, Path]:
        tp = self.rng.choice(sorted(self.template.partitions))
        return tp, self.root / f"{tp[0]}-{tp[1]}"

    def segment(self, *, sealed: bool | None = None) -> tuple[TopicPartition, Path, int] | None:
        tp, d = self.partition()
        bases = segment_bases(d)
        if sealed is True:
            bases = bases[:-1]
        elif sealed is False:
            bases = bases[-1:]
        if not bases:
            return None
        return tp, d, self.rng.choice(bases)

    def topic_partitions(self, topic: str) -> list[TopicPartition]:
        return [tp for tp in self.template.partitions if tp[0] == topic]


DamageFn = Callable[[Site], Damage | None]


def _log_target(site: Site, sealed: bool | None = None) -> tuple[TopicPartition, Path, int, Path] | None:
    picked = site.segment(sealed=sealed)
    if picked is None:
        return None
    tp, d, base = picked
    path = seg_path(d, base, ".log")
    if path.stat().st_size == 0:
        return None
    return tp, d, base, path


def log_bitflip(site: Site) -> Damage | None:
    t = _log_target(site)
    if t is None:
        return None
    tp, _, _, path = t
    pos, bit = site.rng.randrange(path.stat().st_size), site.rng.randrange(8)
    flip_bit(path, pos, bit)
    return Damage("log.bitflip", f"{path.parent.name}/{path.name} byte {pos} bit {bit}", {tp: LOG_DAMAGE})


def log_base_offset_bitflip(site: Site) -> Damage | None:
    """A bit of a batch's base offset: outside the CRC (docs/FORMAT.md), as in Kafka."""
    t = _log_target(site, sealed=site.rng.random() < 0.8 or None)
    if t is None:
        return None
    tp, _, _, path = t
    batch = site.rng.choice(batches_of(path))
    bit = site.rng.choice((0, 1, 2, 3, 4, 5, 8, 12, 20, 40, 52))
    pos = batch.position + 7 - bit // 8  # big-endian: the lowest bits are in the last byte
    flip_bit(path, pos, bit % 8)
    return Damage("log.base_offset_bitflip",
                  f"{path.parent.name}/{path.name} batch @{batch.position} (base offset {batch.base_offset}) "
                  f"bit {bit}", {tp: LOG_DAMAGE})


def log_truncate(site: Site) -> Damage | None:
    t = _log_target(site)
    if t is None:
        return None
    tp, _, _, path = t
    size = site.rng.randrange(path.stat().st_size)
    os.truncate(path, size)
    return Damage("log.truncate", f"{path.parent.name}/{path.name} to {size} bytes", {tp: LOG_DAMAGE})


def log_torn_tail(site: Site) -> Damage | None:
    """The last batch of the active segment cut part way, as a crash mid-write leaves it."""
    t = _log_target(site, sealed=False)
    if t is None:
        return None
    tp, _, _, path = t
    last = batches_of(path)[-1]
    size = last.position + site.rng.randrange(1, last.size)
    os.truncate(path, size)
    return Damage("log.torn_tail", f"{path.parent.name}/{path.name} to {size} bytes (last batch @{last.position})",
                  {tp: LOG_DAMAGE})


def log_zero_range(site: Site) -> Damage | None:
    t = _log_target(site)
    if t is None:
        return None
    tp, _, _, path = t
    size = path.stat().st_size
    length = site.rng.choice((16, 64, 512, 4096))
    pos = site.rng.randrange(size) // 16 * 16
    overwrite(path, pos, bytes(min(length, size - pos)))
    return Damage("log.zero_range", f"{path.parent.name}/{path.name} [{pos}, {pos + length})", {tp: LOG_DAMAGE})


def log_random_overwrite(site: Site) -> Damage | None:
    t = _log_target(site)
    if t is None:
        return None
    tp, _, _, path = t
    size = path.stat().st_size
    pos = site.rng.randrange(size)
    data = site.rng.randbytes(min(site.rng.randint(1, 64), size - pos))
    overwrite(path, pos, data)
    return Damage("log.random_overwrite", f"{path.parent.name}/{path.name} [{pos}, {pos + len(data)})",
                  {tp: LOG_DAMAGE})


def log_garbage_tail(site: Site) -> Damage | None:
    t = _log_target(site, sealed=False)
    if t is None:
        return None
    tp, _, _, path = t
    junk = bytes(site.rng.randint(1, 300)) if site.rng.random() < 0.5 else site.rng.randbytes(site.rng.randint(1, 300))
    with open(path, "ab") as f:
        f.write(junk)
    kind = "zeros" if not any(junk) else "random bytes"
    return Damage("log.garbage_tail", f"{path.parent.name}/{path.name} + {len(junk)} {kind}", {tp: LOG_DAMAGE})


def _two_segments(site: Site) -> tuple[TopicPartition, Path, int, int] | None:
    tp, d = site.partition()
    bases = segment_bases(d)
    if len(bases) < 2:
        return None
    a, b = site.rng.sample(bases, 2)
    return tp, d, a, b


def _swap_files(p: Path, q: Path) -> None:
    a, b = p.read_bytes(), q.read_bytes()
    p.write_bytes(b)
    q.write_bytes(a)


def segment_swap_logs(site: Site) -> Damage | None:
    """Two ``.log`` files exchanged (their indexes stay)."""
    t = _two_segments(site)
    if t is None:
        return None
    tp, d, a, b = t
    _swap_files(seg_path(d, a, ".log"), seg_path(d, b, ".log"))
    return Damage("segment.swap_logs", f"{d.name}: {a}.log <-> {b}.log", {tp: LOG_DAMAGE})


def segment_swap(site: Site) -> Damage | None:
    """Two whole segments exchanged (each ``.log`` keeps its own, consistent indexes)."""
    t = _two_segments(site)
    if t is None:
        return None
    tp, d, a, b = t
    for suffix in (".log", ".index", ".timeindex"):
        p, q = seg_path(d, a, suffix), seg_path(d, b, suffix)
        if p.exists() and q.exists():
            _swap_files(p, q)
    return Damage("segment.swap", f"{d.name}: segments {a} <-> {b} (with their indexes)", {tp: LOG_DAMAGE})


def _free_base(site: Site, d: Path, low: int, high: int) -> int | None:
    taken = set(segment_bases(d))
    free = [b for b in range(max(0, low), high + 1) if b not in taken]
    return site.rng.choice(free) if free else None


def segment_duplicate(site: Site) -> Damage | None:
    """A copy of a segment (with its indexes) under another base offset: after the end or inside the log."""
    picked = site.segment()
    if picked is None:
        return None
    tp, d, base = picked
    end = site.template.partitions[tp].log_end
    new = _free_base(site, d, end, end + 40) if site.rng.random() < 0.5 else _free_base(site, d, 0, end)
    if new is None:
        return None
    for suffix in (".log", ".index", ".timeindex"):
        src = seg_path(d, base, suffix)
        if src.exists():
            shutil.copyfile(src, seg_path(d, new, suffix))
    return Damage("segment.duplicate", f"{d.name}: segment {base} copied as {new} (log end {end})",
                  {tp: LOG_DAMAGE})


def segment_delete(site: Site) -> Damage | None:
    picked = site.segment()
    if picked is None:
        return None
    tp, d, base = picked
    only_log = site.rng.random() < 0.5
    for suffix in (".log",) if only_log else (".log", ".index", ".timeindex", ".txnindex"):
        seg_path(d, base, suffix).unlink(missing_ok=True)
    what = ".log only" if only_log else "all its files"
    return Damage("segment.delete", f"{d.name}: segment {base} ({what}) of {sorted([*segment_bases(d), base])}",
                  {tp: LOG_DAMAGE})


def segment_rename(site: Site) -> Damage | None:
    picked = site.segment()
    if picked is None:
        return None
    tp, d, base = picked
    new = _free_base(site, d, base - 30, base + 30)
    if new is None:
        return None
    for suffix in (".log", ".index", ".timeindex"):
        src = seg_path(d, base, suffix)
        if src.exists():
            src.rename(seg_path(d, new, suffix))
    return Damage("segment.rename", f"{d.name}: segment {base} renamed {new}", {tp: LOG_DAMAGE})


def _index_target(site: Site, suffix: str) -> tuple[TopicPartition, Path, int, Path] | None:
    picked = site.segment()
    if picked is None:
        return None
    tp, d, base = picked
    path = seg_path(d, base, suffix)
    if not path.exists():
        return None
    return tp, d, base, path


def _index_damage(suffix: str, kind: str) -> DamageFn:
    """Bit flip, truncation, zeroing, random bytes or deletion of an index file: the log must be served exactly."""

    def damage(site: Site) -> Damage | None:
        t = _index_target(site, suffix)
        if t is None:
            return None
        _, _, _, path = t
        size = path.stat().st_size
        where = f"{path.parent.name}/{path.name}"
        if kind == "delete":
            path.unlink()
            return Damage(f"{suffix[1:]}.delete", where)
        if size == 0:
            return None
        if kind == "bitflip":
            pos, bit = site.rng.randrange(size), site.rng.randrange(8)
            flip_bit(path, pos, bit)
            return Damage(f"{suffix[1:]}.bitflip", f"{where} byte {pos} bit {bit}")
        if kind == "truncate":
            new = site.rng.randrange(size)
            os.truncate(path, new)
            return Damage(f"{suffix[1:]}.truncate", f"{where} {size} -> {new} bytes")
        if kind == "zero":
            pos = site.rng.randrange(size)
            length = site.rng.randint(1, size - pos)
            overwrite(path, pos, bytes(length))
            return Damage(f"{suffix[1:]}.zero", f"{where} [{pos}, {pos + length})")
        if kind == "random":
            path.write_bytes(site.rng.randbytes(size))
            return Damage(f"{suffix[1:]}.random", f"{where}: all {size} bytes random")
        raise AssertionError(kind)

    return damage


def offset_index_lie(site: Site) -> Damage | None:
    """Well-formed, increasing ``.index`` entries that point at the wrong batches or past the file."""
    t = _index_target(site, ".index")
    if t is None:
        return None
    _, d, base, path = t
    batches = batches_of(seg_path(d, base, ".log"))
    if len(batches) < 2:
        return None
    how = site.rng.choice(("next_position", "offset_shift", "past_end", "negative"))
    entries = []
    for i, b in enumerate(batches[:-1]):
        rel = b.last_offset - base
        if how == "next_position":
            entries.append((rel, batches[i + 1].position))
        elif how == "offset_shift":
            entries.append((rel + site.rng.randint(1, 5), b.position))
        elif how == "past_end":
            entries.append((rel, b.position + 1_000_000))
        else:
            entries.append((rel, -b.position - 17))
    keep = sorted(site.rng.sample(range(len(entries)), site.rng.randint(1, len(entries))))
    path.write_bytes(b"".join(OFFSET_ENTRY.pack(*entries[i]) for i in keep))
    return Damage("index.lie", f"{path.parent.name}/{path.name}: {len(keep)} entries, {how}")


def time_index_lie(site: Site) -> Damage | None:
    """Well-formed, increasing ``.timeindex`` entries with wrong timestamps or offsets."""
    t = _index_target(site, ".timeindex")
    if t is None:
        return None
    _, d, base, path = t
    batches = batches_of(seg_path(d, base, ".log"))
    if not batches:
        return None
    how = site.rng.choice(("ts_shift_up", "ts_shift_down", "offset_shift", "one_entry_far"))
    entries = []
    best = -1
    for b in batches:
        best = max(best, b.max_timestamp)
        rel = b.last_offset - base
        if how == "ts_shift_up":
            entries.append((best + 300, rel))
        elif how == "ts_shift_down":
            entries.append((best - 400, rel))
        elif how == "offset_shift":
            entries.append((best, rel + site.rng.randint(1, 4)))
        else:
            entries.append((best, rel))
    if how == "one_entry_far":
        entries = [(entries[-1][0] + 10_000, entries[0][1])]
    clean: list[tuple[int, int]] = []
    for ts, rel in entries:  # keep both columns increasing, so the file looks sane
        if not clean or (ts > clean[-1][0] and rel > clean[-1][1]):
            clean.append((ts, rel))
    path.write_bytes(b"".join(TIME_ENTRY.pack(*e) for e in clean))
    return Damage("timeindex.lie", f"{path.parent.name}/{path.name}: {len(clean)} entries, {how}")


def txn_index_plant(site: Site) -> Damage | None:
    """A ``.txnindex`` where there is none (no transactions are written): random bytes or plausible entries."""
    picked = site.segment()
    if picked is None:
        return None
    _, d, base = picked
    path = seg_path(d, base, ".txnindex")
    if site.rng.random() < 0.5:
        data = site.rng.randbytes(site.rng.choice((1, 33, 34, 68, 100)))
        how = f"{len(data)} random bytes"
    else:
        rows = []
        for _ in range(site.rng.randint(1, 3)):
            first = base + site.rng.randint(-5, 20)
            last = first + site.rng.randint(-2, 5)
            rows.append(TXN_ENTRY.pack(site.rng.choice((0, 0, 1)), site.rng.randint(0, 9), first, last,
                                       last + site.rng.randint(0, 3)))
        data = b"".join(rows)
        how = f"{len(rows)} plausible entries"
    path.write_bytes(data)
    return Damage("txnindex.plant", f"{d.name}/{path.name}: {how}")


# The clean-shutdown record (text, one line per partition: topic partition end bytes timestamp bases, and
# from version 2 on each segment's bytes).


def _read_clean_record(root: Path) -> list[list[str]] | None:
    path = root / ".clean-shutdown"
    if not path.exists():
        return None
    lines = path.read_bytes().decode("ascii", "replace").splitlines()
    if len(lines) < 2:
        return None
    return [line.split(" ") for line in lines[2:]]


def _write_clean_record(root: Path, rows: list[list[str]]) -> None:
    version = "2" if rows and len(rows[0]) == 7 else "1"  # the lines say which version they are
    text = "\n".join([version, str(len(rows))] + [" ".join(r) for r in rows]) + "\n"
    (root / ".clean-shutdown").write_bytes(text.encode("ascii"))


def _true_clean_record(site: Site) -> list[list[str]]:
    """A record describing the files as they are (what a clean close would have written)."""
    rows = []
    for (topic, p), model in sorted(site.template.partitions.items()):
        d = site.root / f"{topic}-{p}"
        bases = segment_bases(d)
        size = sum(seg_path(d, b, ".log").stat().st_size for b in bases)
        largest = max((b.max_timestamp for b in batches_of(seg_path(d, bases[0], ".log"))), default=-1)
        rows.append([topic, str(p), str(model.log_end), str(size), str(largest), ",".join(map(str, bases))])
    return rows


def clean_shutdown_lie(site: Site) -> Damage | None:
    """A well-formed record that disagrees with the files (or a true one planted after an unclean stop)."""
    rows = _read_clean_record(site.root)
    planted = rows is None
    if rows is None:
        rows = _true_clean_record(site)
    how = site.rng.choice(("omit_first", "omit_last", "end_up", "end_down", "extra_base", "true"))
    if how == "true" and not planted:
        how = "omit_first"
    i = site.rng.randrange(len(rows))
    row = rows[i]
    bases = row[5].split(",")
    # A version 2 line also holds each segment's bytes: edited along, so that the lie stays well-formed.
    sizes = row[6].split(",") if len(row) == 7 and row[6] != "-" else None
    if how == "omit_first" and len(bases) > 1:
        row[5] = ",".join(bases[1:])
        if sizes is not None:
            row[3], row[6] = str(int(row[3]) - int(sizes[0])), ",".join(sizes[1:])
    elif how == "omit_last" and len(bases) > 1:
        row[5] = ",".join(bases[:-1])
        if sizes is not None:
            row[3], row[6] = str(int(row[3]) - int(sizes[-1])), ",".join(sizes[:-1])
    elif how == "end_up":
        row[2] = str(int(row[2]) + site.rng.randint(1, 50))
    elif how == "end_down":
        row[2] = str(max(int(bases[-1]), int(row[2]) - site.rng.randint(1, 10)))
    elif how == "extra_base":
        extra = int(bases[-1]) + site.rng.randint(1, 5)
        row[5] = ",".join([*bases, str(extra)])
        row[2] = str(max(int(row[2]), extra))
        if sizes is not None:
            row[6] = ",".join([*sizes, "0"])
    else:
        how = "true" if how == "true" else how + " (not applicable: unchanged)"
    _write_clean_record(site.root, rows)
    return Damage("clean_shutdown.lie", f"{'planted' if planted else 'edited'}, {row[0]}-{row[1]}: {how}")


def _small_file_damage(kind: str, path_of: Callable[[Site], Path | None],
                       allow: Callable[[Site, Path], dict[TopicPartition, Allow]], *, groups: bool = False) -> DamageFn:
    """Delete, bit-flip, truncate or replace with random bytes a small state file."""

    def damage(site: Site) -> Damage | None:
        path = path_of(site)
        if path is None or not path.exists():
            return None
        name = str(path.relative_to(site.root))
        op = site.rng.choice(("delete", "bitflip", "truncate", "random"))
        size = path.stat().st_size
        allowed = allow(site, path)
        if op == "delete":
            path.unlink()
            return Damage(f"{kind}.delete", name, allowed, groups)
        if size == 0:
            return None
        if op == "bitflip":
            pos, bit = site.rng.randrange(size), site.rng.randrange(8)
            flip_bit(path, pos, bit)
            return Damage(f"{kind}.bitflip", f"{name} byte {pos} bit {bit}", allowed, groups)
        if op == "truncate":
            new = site.rng.randrange(size)
            os.truncate(path, new)
            return Damage(f"{kind}.truncate", f"{name} {size} -> {new} bytes", allowed, groups)
        path.write_bytes(site.rng.randbytes(size))
        return Damage(f"{kind}.random", f"{name}: {size} random bytes", allowed, groups)

    return damage


def _nothing(site: Site, path: Path) -> dict[TopicPartition, Allow]:
    return {}


def _any_start(site: Site, path: Path) -> dict[TopicPartition, Allow]:
    return dict.fromkeys(site.template.partitions, START_DAMAGE)


def _topic_of_dir(site: Site, path: Path) -> dict[TopicPartition, Allow]:
    topic = path.parent.name.rpartition("-")[0]
    return dict.fromkeys(site.topic_partitions(topic), LOG_DAMAGE)


def _checkpoint_lie(name: str, kind: str, allow_start: bool) -> DamageFn:
    """A well-formed checkpoint with a wrong value for one partition."""

    def damage(site: Site) -> Damage | None:
        path = site.root / name
        if not path.exists():
            return None
        lines = path.read_text("ascii").splitlines()
        rows = [line.split(" ") for line in lines[2:]]
        if not rows:
            return None
        row = site.rng.choice(rows)
        model = site.template.partitions.get((row[0], int(row[1])))
        end = model.log_end if model is not None else 0
        how = site.rng.choice(("beyond_end", "zero", "inside", "huge"))
        value = {"beyond_end": end + site.rng.randint(1, 100), "zero": 0,
                 "inside": site.rng.randint(0, max(end, 1)), "huge": (1 << 62) + 5}[how]
        row[2] = str(value)
        path.write_text("\n".join([lines[0], str(len(rows))] + [" ".join(r) for r in rows]) + "\n", "ascii")
        tp = (row[0], int(row[1]))
        allowed = {tp: START_DAMAGE} if allow_start else {}
        return Damage(f"{kind}.lie", f"{name}: {row[0]}-{row[1]} = {value} ({how}; log end {end})", allowed)

    return damage


def _topic_json(site: Site) -> Path | None:
    _, d = site.partition()
    return d / "topic.json"


def topic_json_lie(site: Site) -> Damage | None:
    """A well-formed ``topic.json`` with other config values (or another partition count)."""
    _, d = site.partition()
    path = d / "topic.json"
    if not path.exists():
        return None
    meta = json.loads(path.read_bytes())
    how = site.rng.choice(("segment_bytes", "max_message_bytes", "partitions", "index_interval", "other_topic"))
    if how == "segment_bytes":
        meta["config"]["segment.bytes"] = site.rng.choice((256, 300, 100_000))
    elif how == "max_message_bytes":
        meta["config"]["max.message.bytes"] = site.rng.choice((100, 200))
    elif how == "partitions":
        meta["partitions"] = int(meta.get("partitions", 1)) + site.rng.randint(1, 2)
    elif how == "index_interval":
        meta["config"]["index.interval.bytes"] = site.rng.choice((0, 1, 1 << 20))
    else:
        meta["topic"] = "gamma"
    path.write_text(json.dumps(meta))
    return Damage("topic_json.lie", f"{d.name}/topic.json: {how}", _topic_of_dir(site, path))


def _group_file(site: Site) -> Path | None:
    d = site.root / "consumer-offsets"
    if not d.is_dir():
        return None
    files = sorted(p for p in d.iterdir() if p.name.endswith((".json", ".log")))
    return site.rng.choice(files) if files else None


def group_file_lie(site: Site) -> Damage | None:
    """Two groups' files exchanged: each holds the other group's id, so its name is wrong."""
    d = site.root / "consumer-offsets"
    files = sorted(p for p in d.iterdir() if p.name.endswith(".json")) if d.is_dir() else []
    if len(files) < 2:
        return None
    _swap_files(files[0], files[1])
    return Damage("groups.lie", f"{files[0].name} <-> {files[1].name}", {}, groups=True)


def _checkpoint(name: str) -> Callable[[Site], Path | None]:
    return lambda site: site.root / name


def _clean_marker(site: Site) -> Path | None:
    return site.root / ".clean-shutdown"


def snapshot_damage(site: Site) -> Damage | None:
    """A producer-state ``.snapshot`` bit-flipped, truncated, overwritten, or one planted that no writer wrote.

    Explains nothing: a snapshot is checked (CRC-32C) when read, and one that does not read back is
    rebuilt from the log -- a retry of the producer's last batch is still answered with its offsets.
    (Deleting every snapshot of a cleanly closed partition is a lie seglog believes, as Kafka does: it
    then takes the producers for gone, so that is not drawn here.)
    """
    _, d = site.partition()
    snapshots = sorted(p for p in d.iterdir() if p.name.endswith(".snapshot"))
    how = site.rng.choice(("bitflip", "truncate", "random", "plant"))
    if how == "plant" or not snapshots:
        bases = segment_bases(d)
        offset = site.rng.choice([*bases, bases[-1] + site.rng.randint(1, 50)]) if bases else 0
        path = d / f"{offset:020d}.snapshot"
        data = site.rng.choice((b"", site.rng.randbytes(site.rng.randint(1, 120)),
                                struct.pack(">hI", 1, 0) + site.rng.randbytes(site.rng.randint(0, 80))))
        path.write_bytes(data)
        return Damage("snapshot.plant", f"{d.name}/{path.name}: {len(data)} bytes")
    path = site.rng.choice(snapshots)
    size = path.stat().st_size
    if size == 0:
        return None
    if how == "bitflip":
        pos, bit = site.rng.randrange(size), site.rng.randrange(8)
        flip_bit(path, pos, bit)
        return Damage("snapshot.bitflip", f"{d.name}/{path.name} byte {pos} bit {bit}")
    if how == "truncate":
        new = site.rng.randrange(size)
        os.truncate(path, new)
        return Damage("snapshot.truncate", f"{d.name}/{path.name} {size} -> {new} bytes")
    path.write_bytes(site.rng.randbytes(size))
    return Damage("snapshot.random", f"{d.name}/{path.name}: {size} random bytes")


# Every kind of damage, by file kind. The fuzz test draws from these with the weights given.
DAMAGES: dict[str, tuple[float, DamageFn]] = {
    "log.bitflip": (2, log_bitflip),
    "log.base_offset_bitflip": (2, log_base_offset_bitflip),
    "log.truncate": (1, log_truncate),
    "log.torn_tail": (1, log_torn_tail),
    "log.zero_range": (1, log_zero_range),
    "log.random_overwrite": (1, log_random_overwrite),
    "log.garbage_tail": (1, log_garbage_tail),
    "segment.swap_logs": (1, segment_swap_logs),
    "segment.swap": (1, segment_swap),
    "segment.duplicate": (1, segment_duplicate),
    "segment.delete": (1, segment_delete),
    "segment.rename": (1, segment_rename),
    "index.bitflip": (1, _index_damage(".index", "bitflip")),
    "index.truncate": (1, _index_damage(".index", "truncate")),
    "index.zero": (1, _index_damage(".index", "zero")),
    "index.random": (1, _index_damage(".index", "random")),
    "index.delete": (1, _index_damage(".index", "delete")),
    "index.lie": (2, offset_index_lie),
    "timeindex.bitflip": (1, _index_damage(".timeindex", "bitflip")),
    "timeindex.truncate": (1, _index_damage(".timeindex", "truncate")),
    "timeindex.zero": (1, _index_damage(".timeindex", "zero")),
    "timeindex.random": (1, _index_damage(".timeindex", "random")),
    "timeindex.delete": (1, _index_damage(".timeindex", "delete")),
    "timeindex.lie": (2, time_index_lie),
    "txnindex.plant": (1, txn_index_plant),
    "clean_shutdown.file": (1, _small_file_damage("clean_shutdown", _clean_marker, _nothing)),
    "clean_shutdown.lie": (2, clean_shutdown_lie),
    "recovery_point.file": (1, _small_file_damage("recovery_point", _checkpoint("recovery-point-offset-checkpoint"),
                                                  _nothing)),
    "recovery_point.lie": (1, _checkpoint_lie("recovery-point-offset-checkpoint", "recovery_point", False)),
    "log_start.file": (1, _small_file_damage("log_start", _checkpoint("log-start-offset-checkpoint"), _any_start)),
    "log_start.lie": (1, _checkpoint_lie("log-start-offset-checkpoint", "log_start", True)),
    "topic_json.file": (1, _small_file_damage("topic_json", _topic_json, _topic_of_dir)),
    "topic_json.lie": (1, topic_json_lie),
    "groups.file": (1, _small_file_damage("groups", _group_file, _nothing, groups=True)),
    "groups.lie": (1, group_file_lie),
    "snapshot.damage": (2, snapshot_damage),
}


def apply_random_damage(site: Site) -> list[Damage]:
    """One to three damages drawn from ``DAMAGES`` (a kind that does not apply here is drawn again)."""
    kinds = sorted(DAMAGES)
    weights = [DAMAGES[k][0] for k in kinds]
    wanted = site.rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    done: list[Damage] = []
    for _ in range(wanted * 20):
        if len(done) == wanted:
            break
        kind = site.rng.choices(kinds, weights=weights)[0]
        damage = DAMAGES[kind][1](site)
        if damage is not None:
            done.append(damage)
    return done


# ------------------------------------------------------------------------------------------- oracle


@dataclass(slots=True)
class Finding:
    """One broken rule; ``category`` is one of ``FAILURES``."""

    category: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"[{self.category}] {self.where}: {self.message}"


# crash: an exception that is not a SeglogError; wrong: a record that is not the model's at its offset;
# gap: a read below the log end that came back empty or skipped offsets; start / end: a log start or end
# the damage does not explain; lookup: an offset_for_timestamp answer against the rules; error: a
# SeglogError the damage does not explain (an index is disposable, for one); loss: offsets inside the
# log never served, unexplained; unstable: a second open disagrees with the first; hang: subscribe
# stalled; groups: a committed offset changed without its file being damaged; leak / warning: an object
# collected unclosed (ResourceWarning) or any other warning.
MAX_FINDINGS = 100
FAILURES = ("crash", "wrong", "gap", "start", "end", "lookup", "error", "loss", "unstable", "hang", "groups", "leak",
            "warning")


@dataclass(slots=True)
class Observation:
    """What one trial saw: findings (broken rules) and the harmless notes (clear errors, records lost)."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # SeglogErrors the damage explains
    losses: list[str] = field(default_factory=list)  # records missing where the damage explains it
    categories: set[str] = field(default_factory=set)  # of every finding, kept or not
    dropped: int = 0  # findings past MAX_FINDINGS (one damaged region repeats the same finding per offset)

    def find(self, category: str, where: str, message: str) -> None:
        self.categories.add(category)
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(Finding(category, where, message))
        else:
            self.dropped += 1

    @property
    def outcome(self) -> str:
        """crash / wrong (any other broken rule) / error / loss / exact."""
        if "crash" in self.categories:
            return "crash"
        if self.findings:
            return "wrong"
        if self.errors:
            return "error"
        if self.losses:
            return "loss"
        return "exact"


def _describe_exc(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {Path(frame.filename).name}:{frame.lineno}" if frame is not None else ""
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first_line}{at}"


class Judge:
    """Applies the rules of the module docstring to one engine session (or one tool run)."""

    def __init__(self, template: Template, allow: dict[TopicPartition, Allow], obs: Observation, mode: str,
                 rng: random.Random, *, groups_damaged: bool = False) -> None:
        self.template = template
        self.allow = allow
        self.obs = obs
        self.mode = mode
        self.rng = rng
        self.groups_damaged = groups_damaged

    def allowed(self, tp: TopicPartition) -> Allow:
        return self.allow.get(tp, Allow())

    def any_errors_allowed(self) -> bool:
        return any(a.errors for a in self.allow.values())

    def raised(self, where: str, exc: BaseException, tp: TopicPartition | None = None) -> None:
        """An exception from the code under test: a crash, an explained error, or an unexplained one."""
        if not isinstance(exc, SeglogError):
            self.obs.find("crash", f"{self.mode} {where}", _describe_exc(exc))
        elif (self.allowed(tp).errors if tp is not None else self.any_errors_allowed()):
            self.obs.errors.append(f"{self.mode} {where}: {type(exc).__name__}: {exc}")
        else:
            self.obs.find("error", f"{self.mode} {where}", f"not explained by the damage: {_describe_exc(exc)}")

    def bounds(self, tp: TopicPartition, start: int, end: int, when: str) -> None:
        model = self.template.partitions[tp]
        allow = self.allowed(tp)
        where = f"{self.mode} {model.name}{' ' + when if when else ''}"
        if start != model.log_start:
            if allow.head:
                self.obs.losses.append(f"{where}: log start {start} (model {model.log_start})")
            else:
                self.obs.find("start", where, f"log start {start}, model {model.log_start}")
        if end < model.log_end:
            if allow.tail:
                self.obs.losses.append(f"{where}: log end {end} (model {model.log_end})")
            else:
                self.obs.find("end", where, f"log end {end}, model {model.log_end}")
        elif end > model.log_end and not allow.tail:
            self.obs.find("end", where, f"log end {end} beyond the model's {model.log_end}")
        if end < start:
            self.obs.find("end", where, f"log end {end} below log start {start}")

    def check_records(self, tp: TopicPartition, asked: int, records: list[Record], next_offset: int | None,
                      end: int, where: str, served: set[int]) -> None:
        """The answer to a read at ``asked`` while the log end was ``end``."""
        model = self.template.partitions[tp]
        where = f"{self.mode} {model.name} {where}"
        if not records:
            if asked < end:
                self.obs.find("gap", where, f"no record at {asked}, below the log end {end}")
            return
        previous = asked - 1
        for rec in records:
            expected = model.at(rec.offset)
            if expected is None or not expected.matches(rec):
                self.obs.find("wrong", where, f"returned {_show(rec)}; the model has {expected} at {rec.offset}")
                return
            if rec.offset != previous + 1:
                category = "gap" if rec.offset > previous else "wrong"
                self.obs.find(category, where, f"after offset {previous} came {rec.offset}")
                return
            if rec.offset >= end:
                self.obs.find("wrong", where, f"record {rec.offset} at or past the log end {end}")
                return
            served.add(rec.offset)
            previous = rec.offset
        if next_offset is not None and next_offset != previous + 1:
            self.obs.find("wrong", where, f"next_offset {next_offset} after record {previous}")

    def check_lookup(self, tp: TopicPartition, ts: int, hit: Any, start: int, end: int, served: set[int],
                     where: str) -> None:
        """An ``offset_for_timestamp(ts)`` answer (an ``OffsetAndTimestamp`` or ``None``)."""
        model = self.template.partitions[tp]
        where = f"{self.mode} {model.name}{' ' + where if where else ''} offset_for_timestamp({ts})"
        if ts in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
            want = end if ts == LATEST_TIMESTAMP else start
            if hit is None or hit.offset != want:
                self.obs.find("lookup", where, f"answered {hit}, the log {'end' if ts == -1 else 'start'} is {want}")
            return
        if ts == MAX_TIMESTAMP:
            best = max((model.records[o].timestamp for o in served), default=None)
            if hit is None:
                if best is not None:
                    self.obs.find("lookup", where, f"None, but served records reach timestamp {best}")
                return
            if best is not None and (model.at(hit.offset) is None or model.records[hit.offset].timestamp < best):
                self.obs.find("lookup", where, f"answered {hit}, but a served record has the larger timestamp {best}")
                return
            qualifying = [o for o in served if model.records[o].timestamp >= (best or 0)]
            self._hit_rule(model, hit, best if best is not None else -1, start, end, qualifying, where)
            return
        qualifying = [o for o in served if model.records[o].timestamp >= ts]
        if hit is None:
            if qualifying:
                self.obs.find("lookup", where, f"None, but served offset {min(qualifying)} has timestamp "
                              f"{model.records[min(qualifying)].timestamp}")
            return
        self._hit_rule(model, hit, ts, start, end, qualifying, where)

    def _hit_rule(self, model: PartitionModel, hit: Any, ts: int, start: int, end: int, qualifying: list[int],
                  where: str) -> None:
        expected = model.at(hit.offset)
        if not start <= hit.offset < end or expected is None:
            self.obs.find("lookup", where, f"answered {hit}, outside the log [{start}, {end}) or the model")
        elif expected.timestamp < ts or hit.timestamp != expected.timestamp:
            self.obs.find("lookup", where, f"answered {hit}; the record there has timestamp {expected.timestamp}")
        elif qualifying and min(qualifying) < hit.offset:
            o = min(qualifying)
            self.obs.find("lookup", where, f"answered {hit.offset}, but served offset {o} (timestamp "
                          f"{model.records[o].timestamp}) is earlier")


def _show(rec: Record) -> str:
    return f"Record(offset={rec.offset}, key={rec.key!r}, value={rec.value!r:.40}, timestamp={rec.timestamp})"


def lookup_targets(model: PartitionModel, rng: random.Random) -> list[int]:
    """Timestamps to look up: before everything, after everything, around a sample of records, the sentinels."""
    stamps = sorted({e.timestamp for e in model.records})
    out = [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, 0]
    if stamps:
        out += [stamps[0] - 1, stamps[-1], stamps[-1] + 1]
        for ts in rng.sample(stamps, min(8, len(stamps))):
            out += [ts, ts + rng.choice((-1, 1))]
    return out


async def _timed(coro: Any, seconds: float) -> Any:
    async with asyncio.timeout(seconds):
        return await coro


async def check_partition(judge: Judge, log: PartitionLog, tp: TopicPartition, *, subscribe: bool) -> set[int]:
    """Read ``tp`` at every offset of its log, look up timestamps, and (``subscribe``) follow it; returns served."""
    model = judge.template.partitions[tp]
    rng = judge.rng
    served: set[int] = set()
    # A partition a clean close recorded may open its files on first use, and until then answers from
    # the record: its log start and end are judged once it has been read.
    try:
        await log.read(log.log_start_offset, 1)
    except Exception as exc:
        if not isinstance(exc, SeglogError):
            judge.raised(f"{model.name} read({log.log_start_offset})", exc, tp)
        # A SeglogError is met again, and judged, by the walk below.
    start0, end0 = log.log_start_offset, log.log_end_offset
    judge.bounds(tp, start0, end0, "")
    errors_seen = 0
    probe_end = min(end0, max(model.log_end, start0) + 3)  # a log end far past the model is probed, not walked
    probes = list(range(start0, probe_end))
    if end0 > probe_end:
        probes += [end0 - 1, rng.randrange(probe_end, end0)]
    for offset in probes:
        end = log.log_end_offset
        if not log.log_start_offset <= offset < end:
            continue  # the log moved (and is judged again below)
        try:
            got = await log.read(offset, rng.choice((1, 100, 1 << 20)))
        except Exception as exc:
            judge.raised(f"{model.name} read({offset})", exc, tp)
            errors_seen += 1
            if errors_seen > 40:  # one corrupt region fails every read in it; enough is enough
                break
            continue
        judge.check_records(tp, offset, got.records, got.next_offset, end, f"read({offset})", served)
    start, end = log.log_start_offset, log.log_end_offset
    if (start, end) != (start0, end0):
        judge.bounds(tp, start, end, "after it moved during the reads")
    missing = [o for o in range(max(start, model.log_start), min(end, model.log_end)) if o not in served]
    if missing and not judge.allowed(tp).errors:
        judge.obs.find("loss", f"{judge.mode} {model.name}", f"{len(missing)} offsets never served, first {missing[0]}")
    for ts in lookup_targets(model, rng):
        try:
            hit = await log.offset_for_timestamp(ts)
        except Exception as exc:
            judge.raised(f"{model.name} offset_for_timestamp({ts})", exc, tp)
            continue
        judge.check_lookup(tp, ts, hit, log.log_start_offset, log.log_end_offset, served, "")
    if subscribe and start < end and all(o in served for o in range(start, end)):
        # Only where every read succeeded: subscribe is a loop of reads, and where a read comes back empty
        # below the log end (a gap, already reported) it would wait for an append forever.
        await _check_subscribe(judge, log, tp, start, end)
    return served


async def _check_subscribe(judge: Judge, log: PartitionLog, tp: TopicPartition, start: int, end: int) -> None:
    model = judge.template.partitions[tp]
    seen: set[int] = set()
    previous = start - 1

    async def follow() -> None:
        nonlocal previous
        async for rec in log.subscribe(start):
            judge.check_records(tp, previous + 1, [rec], None, end, "subscribe", seen)
            if rec.offset != previous + 1 or rec.offset >= end - 1:
                return
            previous = rec.offset

    try:
        # A safety net, not a sleep: subscribe waits for appends that never come when it stops short.
        await _timed(follow(), 10)
    except TimeoutError:
        judge.obs.find("hang", f"{judge.mode} {model.name} subscribe({start})",
                       f"stopped after offset {previous}, below the log end {end}")
    except Exception as exc:
        judge.raised(f"{model.name} subscribe({start})", exc, tp)


async def check_engine(
    judge: Judge, path: Path, *, read_only: bool, subscribe_one: bool
) -> dict[TopicPartition, tuple[int, int]] | None:
    """Open ``path``, check every partition of the model and the group offsets, close; returns (start, end)s."""
    try:
        engine = await open_engine(path, read_only=read_only)
    except Exception as exc:
        judge.raised("open", exc)
        return None
    ranges: dict[TopicPartition, tuple[int, int]] = {}
    try:
        followed = judge.rng.choice(sorted(judge.template.partitions)) if subscribe_one else None
        for tp in sorted(judge.template.partitions):
            try:
                log = engine.log(*tp)
            except Exception as exc:
                judge.raised(f"log{tp}", exc, tp)
                continue
            await check_partition(judge, log, tp, subscribe=tp == followed)
            ranges[tp] = (log.log_start_offset, log.log_end_offset)
            if judge.mode == "writable":
                await _check_producer_retry(judge, log, tp)
        await _check_groups(judge, engine)
    finally:
        try:
            await engine.close()
        except Exception as exc:
            judge.raised("close", exc)
    return ranges


async def _check_producer_retry(judge: Judge, log: PartitionLog, tp: TopicPartition) -> None:
    """The producer's last batch, sent again: answered with the offsets it was written at, never written twice.

    Only where the damage explains nothing (a log that lost the batch would rightly take it again); the
    producer state comes from the partition's ``.snapshot`` files and the log, whatever became of them.
    """
    batch = judge.template.partitions[tp].last_producer_batch
    if batch is None or judge.allowed(tp) != Allow():
        return
    where = f"{judge.mode} {tp[0]}-{tp[1]} retry of producer {batch.producer_id}'s last batch"
    records = [Record(e.value, key=e.key, timestamp=e.timestamp, headers=e.headers) for e in batch.records]
    try:
        result = await log.append(records, producer_id=batch.producer_id, producer_epoch=0,
                                  base_sequence=batch.base_sequence)
    except Exception as exc:
        judge.raised(where, exc, tp)
        return
    written = (batch.records[0].offset, batch.records[-1].offset)
    if (result.first_offset, result.last_offset) != written:
        judge.obs.find("wrong", where, f"answered {result.first_offset}..{result.last_offset}, written at "
                       f"{written[0]}..{written[1]}")


async def _check_groups(judge: Judge, engine: Engine) -> None:
    damaged = judge.groups_damaged
    for group, offsets in judge.template.groups.items():
        for tp, offset in offsets.items():
            try:
                got = await engine.committed(group, *tp)
            except Exception as exc:
                judge.raised(f"committed({group}, {tp})", exc)
                continue
            if not damaged and got != offset:
                judge.obs.find("groups", f"{judge.mode} committed({group!r}, {tp})", f"{got}, model {offset}")
            elif got is not None and (not isinstance(got, int) or got < 0):
                judge.obs.find("groups", f"{judge.mode} committed({group!r}, {tp})", f"{got!r} is not an offset")


# ------------------------------------------------------------------------------------ offline tools


def run_cli(*args: str) -> tuple[int, str]:
    """``seglog ARGS`` in-process: (exit code, stdout). Non-library exceptions propagate."""
    from seglog.tools.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue()


def _bytes_of(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return str(value).encode("utf-8")


def check_offline(judge: Judge, path: Path) -> None:
    """The command line's offline reads and checks on the damaged directory (read-only, no engine)."""
    rng = judge.rng
    tool = rng.choice((("verify", str(path), "--json", "--no-progress"),
                       ("recover", str(path), "--dry-run", "--json", "--no-progress")))
    for args in (tool,):
        try:
            code, _ = run_cli(*args)
        except Exception as exc:
            judge.raised(f"seglog {args[0]}", exc)
            continue
        if code not in (0, 1):
            judge.obs.find("crash", f"offline seglog {args[0]}", f"exit code {code}")
    tp = rng.choice(sorted(judge.template.partitions))
    model = judge.template.partitions[tp]
    try:
        code, out = run_cli("consume", tp[0], "--partition", str(tp[1]), "--json", "--log-dir", str(path))
    except Exception as exc:
        judge.raised(f"seglog consume {model.name}", exc, tp)
        return
    served: set[int] = set()
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    records = [Record(_bytes_of(r["value"]), key=_bytes_of(r["key"]), timestamp=r["timestamp"],
                      headers=tuple((k, _bytes_of(v)) for k, v in r["headers"]), offset=r["offset"])
               for r in rows]
    if code != 0 and not judge.allowed(tp).errors:
        judge.obs.find("error", f"offline seglog consume {model.name}", f"exit code {code}")
    elif code != 0:
        judge.obs.errors.append(f"offline seglog consume {model.name}: exit {code}")
    if records:
        judge.check_records(tp, records[0].offset, records, None, 1 << 62, "seglog consume", served)
        if records[0].offset != model.log_start and not judge.allowed(tp).head:
            judge.obs.find("start", f"offline {model.name} seglog consume", f"began at {records[0].offset}, "
                           f"model log start {model.log_start}")
    if len(served) != model.log_end - model.log_start and judge.allowed(tp) == Allow():
        judge.obs.find("loss", f"offline {model.name} seglog consume",
                       f"{len(served)} records, model {model.log_end - model.log_start}")
    for ts in rng.sample(lookup_targets(model, rng)[3:], 1):
        try:
            code, out = run_cli("offsets", tp[0], "--partition", str(tp[1]), "--time", str(ts), "--json",
                                "--log-dir", str(path))
        except Exception as exc:
            judge.raised(f"seglog offsets {model.name} --time {ts}", exc, tp)
            continue
        if code != 0:
            judge.raised(f"seglog offsets {model.name} --time {ts}", SeglogError(f"exit code {code}"), tp)
            continue
        row = json.loads(out)[0]
        hit = None if row["offset"] is None else _Hit(row["offset"], row["timestamp"])
        judge.check_lookup(tp, ts, hit, 0, 1 << 62, served, "seglog offsets")


@dataclass(frozen=True, slots=True)
class _Hit:
    offset: int
    timestamp: int


# -------------------------------------------------------------------------------------------- trial


@dataclass(slots=True)
class TrialReport:
    seed: int
    template: str
    damages: list[Damage]
    obs: Observation

    @property
    def failed(self) -> bool:
        return bool(self.obs.findings)

    def summary(self, limit: int = 4) -> str:
        damage = "; ".join(map(str, self.damages))
        found = " | ".join(map(str, self.obs.findings[:limit]))
        total = len(self.obs.findings) + self.obs.dropped
        more = f" (+{total - limit} more)" if total > limit else ""
        trial = f"seed {self.seed}" if self.seed >= 0 else "control"
        return f"{trial} [{self.template}] damage: {damage or 'none'} -> {self.obs.outcome}: {found}{more}"


async def observe(template: Template, path: Path, damages: Iterable[Damage], rng: random.Random) -> Observation:
    """Judge a damaged copy of ``template`` at ``path``: offline tools, read-only engine, writable engine, reopen."""
    damages = list(damages)
    allow: dict[TopicPartition, Allow] = {}
    for d in damages:
        for tp, a in d.allow.items():
            allow[tp] = allow.get(tp, Allow()) | a
    obs = Observation()
    groups_damaged = any(d.groups for d in damages)

    def judge(mode: str) -> Judge:
        return Judge(template, allow, obs, mode, rng, groups_damaged=groups_damaged)

    if rng.random() < 0.5:  # the command line costs an argument parser per call: every other trial
        check_offline(judge("offline"), path)
    await check_engine(judge("read-only"), path, read_only=True, subscribe_one=False)
    first = await check_engine(judge("writable"), path, read_only=False, subscribe_one=True)
    if first is not None:
        again = await check_engine(judge("reopened"), path, read_only=False, subscribe_one=False)
        if again is not None:
            for tp, ranges in first.items():
                if again.get(tp, ranges) != ranges:
                    obs.find("unstable", f"reopened {tp[0]}-{tp[1]}",
                             f"[start, end) was {list(ranges)} after the first writable open, now {list(again[tp])}")
    return obs


async def run_trial(
    seed: int, templates: Callable[[int], Awaitable[tuple[Template, Template]]], work: Path
) -> TrialReport:
    """One trial: pick a template, copy it, damage it, judge it."""
    rng = random.Random(seed)
    shape = rng.randrange(SHAPES)
    clean, unclean = await templates(shape)
    template = clean if rng.random() < 0.5 else unclean
    path = work / f"trial-{seed}"
    shutil.copytree(template.path, path, copy_function=shutil.copyfile)
    try:
        damages = apply_random_damage(Site(rng, path, template))
        obs = await judge_directory(template, path, damages, rng)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return TrialReport(seed, template.describe(), damages, obs)


async def judge_directory(template: Template, path: Path, damages: list[Damage], rng: random.Random) -> Observation:
    """``observe``, with every warning (an unclosed file's ``ResourceWarning`` above all) made a finding."""
    # Recorded, not raised: an object collected unclosed warns from __del__, where an exception could
    # only be reported by the garbage collector, in whichever test happens to run next.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obs = await observe(template, path, damages, rng)
        gc.collect()
    for w in caught:
        category = "leak" if issubclass(w.category, ResourceWarning) else "warning"
        obs.find(category, "after the sessions", f"{w.category.__name__}: {w.message}")
    return obs


SHAPES = 4
