"""The replay plan: who sends what, in which order, when, and into which partition.

Turns validated workload rows into one :class:`Stream` per producer. A stream
is a list of steps in the producer's order (``seq`` order, else file order);
each step has a due time relative to the workload's first capture time. A
:class:`ProduceStep` holds every produce row of the producer that falls in
the same instant (same ``ts_ns``), grouped into one batch chain per partition
(one ``append`` call per batch; chains of different partitions go out
concurrently, like a Kafka producer's per-partition batches). A
:class:`FetchStep` is one recorded read; it also names the produce steps of
other producers it must wait for (those due strictly earlier on the same
partition), so a read at ``--speed max`` sees what it saw when recorded.
Strictly earlier means the waits cannot form a cycle.

The plan also computes what the log must hold afterwards: per partition the
record count and an order-independent checksum (the sum of 64-bit BLAKE2b
digests of key, value, timestamp and headers, modulo 2**64), used by the
runner's verification.

Partitioning of rows without a partition: by key with Kafka's murmur2
(``toPositive(murmur2(key)) % partitions``, the Java client's default), and
round robin per topic for rows without a key (Kafka's sticky partitioner is
not deterministic; a replay must be). Pure and synchronous; no engine import.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from seglog.engine.partitioner import partition_for_key
from seglog.tools.replay.format import (
    DEFAULT_FETCH_MAX_BYTES,
    OP_FETCH,
    OP_PRODUCE,
    TOMBSTONE_SIZE,
    Header,
    Workload,
    WorkloadRow,
)

# A replayed batch is cut at this many records or bytes, far below Kafka's default
# max.message.bytes (1 MiB + 12), so a same-instant burst never fails as too large.
MAX_BATCH_RECORDS: Final = 1000
MAX_BATCH_BYTES: Final = 256 * 1024
_MASK64: Final = (1 << 64) - 1

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """What one replayed record holds (the engine's ``Record`` is built from it)."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None
    headers: tuple[Header, ...]
    row: int
    position: int  # the record's place in its producer's order, for the order check

    @property
    def size_bytes(self) -> int:
        return (
            len(self.key or b"")
            + len(self.value or b"")
            + sum(len(k) + len(v) for k, v in self.headers)
        )


@dataclass(slots=True)
class Batch:
    """Records of one producer for one partition, sent with one ``append`` call."""

    topic: str
    partition: int
    records: list[RecordSpec] = field(default_factory=list)
    size_bytes: int = 0


@dataclass(slots=True)
class ProduceStep:
    """Produce rows of one producer that share an instant: one batch chain per partition."""

    due_ns: int
    chains: list[list[Batch]]
    rows: int


@dataclass(slots=True)
class FetchStep:
    """One recorded read: ``fetch`` (by offset) or ``fetch_time`` (offset for a timestamp)."""

    due_ns: int
    op: str
    topic: str
    partition: int
    offset: int | None
    timestamp_ms: int | None
    max_bytes: int
    row: int
    deps: list[tuple[str, int]] = field(default_factory=list)  # (producer, step index) to wait for
    rows: int = 1


Step = ProduceStep | FetchStep


@dataclass(slots=True)
class Stream:
    """One producer's steps, in the order replay keeps."""

    producer: str
    steps: list[Step]


@dataclass(slots=True)
class PartitionExpectation:
    """What one partition must hold after the replay."""

    topic: str
    partition: int
    records: int = 0
    checksum: int = 0
    size_bytes: int = 0


@dataclass(slots=True)
class ReplayPlan:
    streams: list[Stream]
    partitions: dict[str, int]
    expected: dict[TopicPartition, PartitionExpectation]
    origin_ns: int
    span_ns: int
    produce_rows: int
    fetch_rows: int

    @property
    def total_rows(self) -> int:
        return self.produce_rows + self.fetch_rows

    @property
    def topic_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, n in sorted(self.partitions.items()) for p in range(n)]


def synthetic_value(producer: str, position: int, size: int) -> bytes:
    """A deterministic payload of ``size`` bytes for a row that gives only ``value_size``."""
    if size <= 0:
        return b""
    seed = hashlib.blake2b(f"{producer}\x00{position}".encode(), digest_size=32).digest()
    return (seed * (size // len(seed) + 1))[:size]


def record_digest(key: bytes | None, value: bytes | None, timestamp_ms: int | None,
                  headers: Iterable[Header]) -> int:
    """64-bit digest of one record's content; ``None`` fields hash apart from empty ones."""
    h = hashlib.blake2b(digest_size=8)
    for part in (key, value):
        if part is None:
            h.update(b"\x00")
        else:
            h.update(b"\x01" + len(part).to_bytes(4, "big") + part)
    h.update(b"\x00" if timestamp_ms is None else b"\x01" + timestamp_ms.to_bytes(8, "big", signed=True))
    for hk, hv in headers:
        kb = hk.encode()
        h.update(b"\x02" + len(kb).to_bytes(4, "big") + kb + len(hv).to_bytes(4, "big") + hv)
    return int.from_bytes(h.digest(), "big")


def combine_checksum(total: int, digest: int) -> int:
    return (total + digest) & _MASK64


def _producer_order(rows: list[WorkloadRow], indices: list[int]) -> list[int]:
    if all(rows[i].seq is not None for i in indices):
        return sorted(indices, key=lambda i: (rows[i].seq, i))
    return indices


def build_plan(workload: Workload) -> ReplayPlan:
    """The replay plan of a validated workload (see the module docstring)."""
    rows = workload.rows
    partitions = dict(workload.partitions)
    origin = min((r.ts_ns for r in rows), default=0)
    span = max((r.ts_ns for r in rows), default=0) - origin

    # Partitions are fixed before anything runs so that verification knows the
    # expected content of every partition; round robin follows capture-time order.
    target: list[int] = [0] * len(rows)
    round_robin: dict[str, int] = {}
    for i in sorted(range(len(rows)), key=lambda i: (rows[i].ts_ns, i)):
        row = rows[i]
        if row.partition is not None:
            target[i] = row.partition
        elif row.key is not None:
            target[i] = partition_for_key(row.key, partitions[row.topic])
        else:
            n = round_robin.get(row.topic, 0)
            target[i] = n % partitions[row.topic]
            round_robin[row.topic] = n + 1

    by_producer: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_producer.setdefault(row.producer, []).append(i)

    expected = {
        (t, p): PartitionExpectation(t, p) for t, n in sorted(partitions.items()) for p in range(n)
    }
    streams: list[Stream] = []
    produce_rows = fetch_rows = 0
    for producer in sorted(by_producer):
        steps: list[Step] = []
        open_step: ProduceStep | None = None
        open_chains: dict[TopicPartition, list[Batch]] = {}
        for position, i in enumerate(_producer_order(rows, by_producer[producer])):
            row = rows[i]
            due = row.ts_ns - origin
            tp = (row.topic, target[i])
            if row.op != OP_PRODUCE:
                open_step = None
                fetch_rows += 1
                steps.append(
                    FetchStep(
                        due_ns=due,
                        op=row.op,
                        topic=row.topic,
                        partition=target[i],
                        offset=row.offset if row.op == OP_FETCH else None,
                        timestamp_ms=row.timestamp_ms,
                        max_bytes=row.max_bytes or DEFAULT_FETCH_MAX_BYTES,
                        row=i,
                    )
                )
                continue
            produce_rows += 1
            if open_step is None or open_step.due_ns != due:
                open_step = ProduceStep(due_ns=due, chains=[], rows=0)
                open_chains = {}
                steps.append(open_step)
            spec = _record_spec(row, i, position)
            chain = open_chains.get(tp)
            if chain is None:
                chain = open_chains[tp] = [Batch(tp[0], tp[1])]
                open_step.chains.append(chain)
            batch = chain[-1]
            if batch.records and (
                len(batch.records) >= MAX_BATCH_RECORDS or batch.size_bytes + spec.size_bytes > MAX_BATCH_BYTES
            ):
                batch = Batch(tp[0], tp[1])
                chain.append(batch)
            batch.records.append(spec)
            batch.size_bytes += spec.size_bytes
            open_step.rows += 1
            exp = expected[tp]
            exp.records += 1
            exp.size_bytes += spec.size_bytes
            exp.checksum = combine_checksum(
                exp.checksum, record_digest(spec.key, spec.value, spec.timestamp_ms, spec.headers)
            )
        streams.append(Stream(producer, steps))
    _link_fetch_dependencies(streams)
    return ReplayPlan(streams, partitions, expected, origin, span, produce_rows, fetch_rows)


def _record_spec(row: WorkloadRow, index: int, position: int) -> RecordSpec:
    value = row.value
    if value is None and row.value_size is not None and row.value_size != TOMBSTONE_SIZE:
        value = synthetic_value(row.producer, row.seq if row.seq is not None else position, row.value_size)
    return RecordSpec(row.key, value, row.timestamp_ms, row.headers, index, position)


def _link_fetch_dependencies(streams: list[Stream]) -> None:
    """Each fetch waits for other producers' produce steps due strictly before it on its partition."""
    # (producer, topic-partition) -> (due times, step indices), both ascending
    writes: dict[TopicPartition, dict[str, tuple[list[int], list[int]]]] = {}
    for stream in streams:
        for n, step in enumerate(stream.steps):
            if isinstance(step, ProduceStep):
                for chain in step.chains:
                    tp = (chain[0].topic, chain[0].partition)
                    dues, idx = writes.setdefault(tp, {}).setdefault(stream.producer, ([], []))
                    dues.append(step.due_ns)
                    idx.append(n)
    for stream in streams:
        for step in stream.steps:
            if not isinstance(step, FetchStep):
                continue
            for producer, (dues, idx) in writes.get((step.topic, step.partition), {}).items():
                if producer == stream.producer:
                    continue  # its own earlier steps are done: a stream runs in order
                k = bisect.bisect_left(dues, step.due_ns)
                if k:
                    step.deps.append((producer, idx[k - 1]))
