"""The replay plan: partitioning, per-producer order, same-instant batches, fetch dependencies, sample."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path

import pytest

from seglog.engine.partitioner import partition_for_key
from seglog.tools.replay import plan as plan_mod
from seglog.tools.replay.format import Workload, WorkloadRow, derive_partitions, write_workload
from seglog.tools.replay.plan import (
    FetchStep,
    ProduceStep,
    build_plan,
    record_digest,
    synthetic_value,
)
from seglog.tools.replay.sample import generate_sample
from seglog.tools.replay.validate import validate_file


def test_partition_for_key_is_to_positive_modulo() -> None:
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16
    assert partition_for_key(b"foobar", 50) == 16


def row(producer: str, ts_ns: int, **kw: object) -> WorkloadRow:
    kw.setdefault("topic", "t")
    kw.setdefault("value", b"v")
    return WorkloadRow(producer=producer, ts_ns=ts_ns, **kw)  # type: ignore[arg-type]


def make_plan(rows: list[WorkloadRow], partitions: dict[str, int] | None = None) -> plan_mod.ReplayPlan:
    return build_plan(Workload(rows, derive_partitions(rows, partitions or {})))


def test_same_instant_rows_of_a_producer_form_one_batch_per_partition() -> None:
    rows = [
        row("a", 100, partition=0, value=b"1"),
        row("a", 100, partition=1, value=b"2"),
        row("a", 100, partition=0, value=b"3"),
        row("a", 200, partition=0, value=b"4"),
        row("b", 100, partition=0, value=b"5"),  # another producer: its own step
    ]
    p = make_plan(rows)
    streams = {s.producer: s for s in p.streams}
    first, second = streams["a"].steps
    assert isinstance(first, ProduceStep) and isinstance(second, ProduceStep)
    assert first.due_ns == 0 and second.due_ns == 100
    assert [[[r.value for r in b.records] for b in chain] for chain in first.chains] == [
        [[b"1", b"3"]], [[b"2"]]
    ]
    assert len(streams["b"].steps) == 1
    assert p.produce_rows == 5 and p.fetch_rows == 0


def test_producer_order_follows_seq_then_file_order() -> None:
    rows = [row("a", 300, seq=2, value=b"c"), row("a", 100, seq=0, value=b"a"), row("a", 200, seq=1, value=b"b")]
    steps = make_plan(rows).streams[0].steps
    values = [r.value for s in steps if isinstance(s, ProduceStep) for c in s.chains for b in c for r in b.records]
    assert values == [b"a", b"b", b"c"]
    assert [r.position for s in steps if isinstance(s, ProduceStep) for c in s.chains for b in c
            for r in b.records] == [0, 1, 2]


def test_large_same_instant_groups_are_cut_into_a_chain_of_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_mod, "MAX_BATCH_RECORDS", 3)
    p = make_plan([row("a", 5, partition=0, value=bytes([i])) for i in range(7)])
    (step,) = p.streams[0].steps
    assert isinstance(step, ProduceStep)
    assert [len(b.records) for b in step.chains[0]] == [3, 3, 1]


def test_partitioning_explicit_then_key_then_round_robin() -> None:
    rows = [row("a", i, key=None, partition=None) for i in range(6)]
    rows += [row("a", 10, key=b"foobar"), row("a", 11, partition=2)]
    p = make_plan(rows, {"t": 4})
    counts = {tp: e.records for tp, e in p.expected.items()}
    # six key-less rows round robin over 4 partitions: 2,2,1,1; foobar -> 1357151166 % 4 == 2; explicit 2
    assert counts == {("t", 0): 2, ("t", 1): 2, ("t", 2): 1 + 1 + 1, ("t", 3): 1}


def test_fetch_waits_only_for_other_producers_steps_strictly_before_it() -> None:
    rows = [
        row("w1", 100, partition=0),
        row("w1", 300, partition=0),
        row("w2", 150, partition=0),
        row("w2", 200, partition=1),  # other partition: no dependency
        WorkloadRow(topic="t", ts_ns=200, producer="r", op="fetch", partition=0, offset=0),
        WorkloadRow(topic="t", ts_ns=250, producer="r", op="fetch_time", partition=0, timestamp_us=5),
    ]
    p = make_plan(rows)
    reader = next(s for s in p.streams if s.producer == "r")
    fetch, fetch_time = reader.steps
    assert isinstance(fetch, FetchStep) and isinstance(fetch_time, FetchStep)
    assert sorted(fetch.deps) == [("w1", 0), ("w2", 0)]
    assert fetch.offset == 0 and fetch.max_bytes == 1 << 20
    assert sorted(fetch_time.deps) == [("w1", 0), ("w2", 0)]
    assert fetch_time.timestamp_ms == 0 and fetch_time.offset is None


def test_expected_checksum_is_order_independent_and_content_sensitive() -> None:
    a = [row("a", 1, partition=0, value=b"x"), row("b", 1, partition=0, value=b"y")]
    b = [row("b", 1, partition=0, value=b"y"), row("a", 1, partition=0, value=b"x")]
    c = [row("a", 1, partition=0, value=b"x"), row("b", 1, partition=0, value=b"z")]
    sums = [make_plan(rows).expected[("t", 0)].checksum for rows in (a, b, c)]
    assert sums[0] == sums[1] != sums[2]
    assert record_digest(None, b"", None, ()) != record_digest(b"", b"", None, ())
    assert record_digest(None, None, None, ()) != record_digest(None, b"", None, ())
    assert record_digest(None, b"", 1, ()) != record_digest(None, b"", None, ())
    assert record_digest(None, b"", 1, (("h", b"1"),)) != record_digest(None, b"", 1, (("h", b"2"),))


def test_value_size_rows_get_deterministic_synthetic_values_and_tombstones_stay_null() -> None:
    rows = [row("a", 1, value=None, value_size=100, seq=4), row("a", 2, value=None, value_size=-1, key=b"k")]
    p = make_plan(rows)
    records = [r for s in p.streams[0].steps if isinstance(s, ProduceStep) for c in s.chains for b in c
               for r in b.records]
    assert records[0].value == synthetic_value("a", 4, 100) and len(records[0].value) == 100
    assert records[1].value is None
    assert synthetic_value("a", 4, 100) != synthetic_value("a", 5, 100)


def test_sample_is_deterministic_valid_and_shows_the_format(tmp_path: Path) -> None:
    w1, w2 = generate_sample(), generate_sample()
    assert w1.rows == w2.rows
    assert generate_sample(seed=8).rows != w1.rows
    assert 2000 <= len(w1.rows) <= 4000
    assert validate_file(write_workload(tmp_path / "s.parquet", w1.rows, w1.partitions)) == []
    ops = collections.Counter(r.op for r in w1.rows)
    assert ops["fetch"] > 10 and ops["fetch_time"] > 10
    assert len({r.topic for r in w1.rows}) >= 3 and len({r.producer for r in w1.rows}) >= 5
    # out-of-order timestamps within a topic-producer
    by_producer: dict[str, list[int]] = collections.defaultdict(list)
    for r in w1.rows:
        if r.op == "produce" and r.timestamp_us is not None:
            by_producer[r.producer].append(r.timestamp_us)
    assert any(any(b < a for a, b in itertools.pairwise(ts)) for ts in by_producer.values())
    # key skew: the most common customer key far above the median one
    keys = collections.Counter(r.key for r in w1.rows if r.topic == "orders")
    top = keys.most_common()
    assert top[0][1] >= 10 * top[len(top) // 2][1]
    # bursts: some producer sends several records in one instant
    same_instant = collections.Counter((r.producer, r.ts_ns) for r in w1.rows)
    assert max(same_instant.values()) >= 3
    p = build_plan(w1)
    assert 10 <= p.span_ns / 1e9 <= 20
