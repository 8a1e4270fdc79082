"""engine.offline.ranges and segments.columns: planning by offset and timestamp, range scans, column decode.

Segments are written here by a small synchronous writer that follows FORMAT.md's
writing rules (batches back to back; an index entry per ``interval`` bytes,
counted before the batch; a time-index entry with each index entry when the
largest timestamp grew; the final time-index entry at roll), so each test can
shape its data exactly: out-of-order timestamps, a preallocated active segment,
a torn tail. ``tests/spark`` reads engine-written directories.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.engine import offline
from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, format_checkpoint
from seglog.engine.errors import CorruptRecordError
from seglog.engine.offline import ranges
from seglog.indexes import OffsetIndex, TimeIndex
from seglog.segments.batch import HEADER_SIZE, TimestampType, decode_batch, encode_batch, read_header
from seglog.segments.columns import ColumnBuffers, RecordColumns, decode_buffers, decode_columns
from seglog.segments.records import Record

_HEADER_KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=3)  # valid keys: no NUL

INDEX_BYTES = 4096


def write_segment(
    directory: Path,
    base: int,
    batches: Sequence[Sequence[Record]],
    *,
    interval: int = 512,
    active: bool = False,
    log_append_time: int | None = None,
) -> int:
    """Write one segment of ``batches`` starting at offset ``base``; return the next offset."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"{base:020d}"
    oix = OffsetIndex(f"{stem}.index", base, max_index_size=INDEX_BYTES)
    tix = TimeIndex(f"{stem}.timeindex", base, max_index_size=INDEX_BYTES)
    offset, position, since = base, 0, 0
    max_ts, max_ts_offset = -1, base
    with open(f"{stem}.log", "wb") as log:
        for records in batches:
            data = encode_batch(
                offset,
                records,
                timestamp_type=TimestampType.CREATE_TIME if log_append_time is None else TimestampType.LOG_APPEND_TIME,
                now_ms=log_append_time or 0,
            )
            header = read_header(data)
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.last_offset
            if since > interval:
                oix.append(header.last_offset, position)
                tix.maybe_append(max_ts, max_ts_offset)
                since = 0
            log.write(data)
            since += len(data)
            position += len(data)
            offset = header.next_offset
    if not active:
        tix.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
        oix.close()
        tix.close()
    else:  # an engine's open active segment: indexes preallocated, zero tail, no final entry
        oix.flush()
        tix.flush()
        oix.close()
        tix.close()
        for suffix in (".index", ".timeindex"):
            os.truncate(f"{stem}{suffix}", INDEX_BYTES - INDEX_BYTES % (8 if suffix == ".index" else 12))
    return offset


def records(count: int, first_ts: int, step: int = 1, *, key: bytes | None = b"k") -> list[Record]:
    return [
        Record(b"v%d" % (first_ts + i * step), key, first_ts + i * step, (("h", b"%d" % i),) if i % 3 == 0 else ())
        for i in range(count)
    ]


def make_partition(
    log_dir: Path,
    timestamps: Sequence[int],
    *,
    per_batch: int = 5,
    per_segment: int = 40,
    value_bytes: int = 0,
) -> list[tuple[int, int]]:
    """A partition whose record ``i`` has timestamp ``timestamps[i]``; returns ``[(offset, timestamp)]``."""
    directory = log_dir / "t-0"
    pad = b"p" * value_bytes
    offset = 0
    for seg_start in range(0, len(timestamps), per_segment):
        seg_ts = timestamps[seg_start : seg_start + per_segment]
        batches = [
            [Record(b"v%d" % (seg_start + b + i) + pad, b"k", ts, ()) for i, ts in enumerate(seg_ts[b : b + per_batch])]
            for b in range(0, len(seg_ts), per_batch)
        ]
        last = seg_start + per_segment >= len(timestamps)
        offset = write_segment(directory, offset, batches, interval=100, active=last)
    return list(enumerate(timestamps))


def _extend(out: RecordColumns, chunk: RecordColumns) -> None:
    out.offsets += chunk.offsets
    out.timestamps += chunk.timestamps
    out.keys += chunk.keys
    out.values += chunk.values
    out.headers += chunk.headers
    out.timestamp_types += chunk.timestamp_types


def read_all(plan: offline.PartitionPlan, trace: offline.TraceHook | None = None) -> RecordColumns:
    """Every row of ``plan`` through scan_range; scan_range_buffers (the Spark path) must give the same rows."""
    out = RecordColumns()
    for r in plan.ranges:
        for chunk in offline.scan_range(r, rows_per_chunk=7, trace=trace):
            _extend(out, chunk)
    same = RecordColumns()
    for r in plan.ranges:
        for buffers in offline.scan_range_buffers(r, rows_per_chunk=7, max_chunk_bytes=40):
            assert len(buffers) > 0
            _extend(same, buffers.to_columns())
    assert same == out
    return out


def kafka_model(rows: list[tuple[int, int]], bounds: offline.Bounds) -> list[int]:
    """Offsets a read within ``bounds`` must return (Kafka's offsets-for-times semantics)."""
    n = len(rows)
    start, end = bounds.start_offset, min(bounds.end_offset, n)
    if bounds.from_timestamp is not None:
        start = max(start, next((o for o, t in rows if t >= bounds.from_timestamp), n))
    if bounds.until_timestamp is not None:
        end = min(end, next((o for o, t in rows if t >= bounds.until_timestamp), n))
    return list(range(start, end))


# --------------------------------------------------------------------------------------- listing


def test_listing_orders_segments_and_ignores_other_files(tmp_path: Path) -> None:
    d = tmp_path / "a-1"
    nxt = write_segment(d, 0, [records(3, 10)])
    write_segment(d, nxt, [records(2, 20)], active=True)
    (d / "00000000000000000099.log.deleted").write_bytes(b"x")
    (tmp_path / "a-1.abc-delete").mkdir()
    (tmp_path / ".staging").mkdir()
    (tmp_path / "b-0").mkdir()
    assert offline.list_partitions(tmp_path) == [("a", 1), ("b", 0)]
    segs = offline.list_segments(offline.partition_path(tmp_path, "a", 1))
    assert [(s.base_offset, s.next_base_offset, s.is_active) for s in segs] == [(0, 3, False), (3, None, True)]
    assert offline.list_segments(offline.partition_path(tmp_path, "b", 0)) == []
    assert offline.plan_partition(tmp_path, "b", 0).ranges == []


# --------------------------------------------------------------------------------------- reads


def test_full_read_returns_every_record_and_column(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    nxt = write_segment(d, 0, [records(4, 100), records(3, 200, key=None)])
    write_segment(d, nxt, [records(2, 300)], active=True)
    plan = offline.plan_partition(tmp_path, "t", 0)
    assert (plan.log_start_offset, plan.log_end_offset, len(plan.ranges)) == (0, 9, 2)
    got = read_all(plan)
    expected = records(4, 100) + records(3, 200, key=None) + records(2, 300)
    assert got.offsets == list(range(9))
    assert got.values == [r.value for r in expected]
    assert got.keys == [r.key for r in expected]
    assert got.timestamps == [r.timestamp for r in expected]
    assert got.headers == [r.headers for r in expected]
    assert got.timestamp_types == [0] * 9


def test_offset_bounds_skip_segments_and_start_at_the_indexed_byte(tmp_path: Path) -> None:
    rows = make_partition(tmp_path, list(range(1000, 1200)))
    trace: list[dict[str, object]] = []
    bounds = offline.Bounds(start_offset=95, end_offset=118)
    plan = offline.plan_partition(tmp_path, "t", 0, bounds)
    assert [r.base_offset for r in plan.ranges] == [80]  # 5 segments of 40: only the one holding 95..117
    assert plan.ranges[0].start_position > 0  # from the offset index, not the segment start
    assert read_all(plan, trace.append).offsets == kafka_model(rows, bounds)
    assert [e["event"] for e in trace] == ["read"]
    assert offline.plan_partition(tmp_path, "t", 0, offline.Bounds(start_offset=500)).ranges == []


def test_log_start_offset_checkpoint_hides_deleted_records(tmp_path: Path) -> None:
    make_partition(tmp_path, list(range(100)))
    (tmp_path / LOG_START_OFFSET_CHECKPOINT).write_bytes(format_checkpoint({("t", 0): 57}))
    starts = offline.log_start_offsets(tmp_path)
    plan = offline.plan_partition(tmp_path, "t", 0, log_start_offset=starts[("t", 0)])
    assert read_all(plan).offsets == list(range(57, 100))
    (tmp_path / LOG_START_OFFSET_CHECKPOINT).write_bytes(b"garbage")
    assert offline.log_start_offsets(tmp_path) == {}


def test_timestamp_range_reads_only_the_segments_and_bytes_it_needs(tmp_path: Path) -> None:
    rows = make_partition(tmp_path, list(range(0, 4000, 5)), value_bytes=200)  # 800 records, 20 segments
    trace: list[dict[str, object]] = []
    bounds = offline.Bounds(from_timestamp=1234, until_timestamp=1390)
    plan = offline.plan_partition(tmp_path, "t", 0, bounds, trace=trace.append)
    assert [r.base_offset for r in plan.ranges] == [240]
    got = read_all(plan, trace.append)
    assert got.offsets == kafka_model(rows, bounds) == list(range(247, 278))
    reads = [e for e in trace if e["event"] == "read"]
    segments = offline.list_segments(offline.partition_path(tmp_path, "t", 0))
    # 4% of the records (and of the time range) are asked for: the read touches one of 20 segments.
    assert len(reads) == 1 and int(reads[0]["bytes_read"]) <= segments[6].size_bytes  # type: ignore[call-overload]


@pytest.mark.parametrize("log_append", [False, True])
def test_until_bound_at_a_segment_edge_and_below_the_start(tmp_path: Path, log_append: bool) -> None:
    rows = make_partition(tmp_path, list(range(0, 2000, 10)))
    # The read ends exactly at the first record of the third segment (offset 80): two segments.
    plan = offline.plan_partition(tmp_path, "t", 0, offline.Bounds(until_timestamp=800))
    assert read_all(plan).offsets == list(range(80))
    # The end (offset 30) lies below the start offset 50: nothing, without reading past it.
    bounds = offline.Bounds(start_offset=50, until_timestamp=300)
    assert read_all(offline.plan_partition(tmp_path, "t", 0, bounds)).offsets == kafka_model(rows, bounds) == []


def test_log_append_time_batches_carry_the_append_time(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    nxt = write_segment(d, 0, [records(3, 5)], log_append_time=700)
    write_segment(d, nxt, [records(3, 5)], log_append_time=900, active=True)
    got = read_all(offline.plan_partition(tmp_path, "t", 0))
    assert (got.timestamps, got.timestamp_types) == ([700] * 3 + [900] * 3, [1] * 6)
    got = read_all(offline.plan_partition(tmp_path, "t", 0, offline.Bounds(from_timestamp=800)))
    assert got.offsets == [3, 4, 5]


@settings(max_examples=25, deadline=None)
@given(
    timestamps=st.lists(st.integers(0, 60), min_size=1, max_size=90),
    offsets=st.tuples(st.integers(0, 100), st.integers(0, 100)),
    times=st.tuples(st.none() | st.integers(0, 70), st.none() | st.integers(0, 70)),
)
def test_any_bounds_match_kafka_semantics_even_out_of_order(
    tmp_path_factory: pytest.TempPathFactory,
    timestamps: list[int],
    offsets: tuple[int, int],
    times: tuple[int | None, int | None],
) -> None:
    (start, length), (t0, t1) = offsets, times
    log_dir = tmp_path_factory.mktemp("oo")
    rows = make_partition(log_dir, timestamps, per_batch=3, per_segment=12)
    bounds = offline.Bounds(start, start + length, t0, t1)
    got = read_all(offline.plan_partition(log_dir, "t", 0, bounds))
    assert got.offsets == kafka_model(rows, bounds)
    assert got.timestamps == [timestamps[o] for o in got.offsets]


# --------------------------------------------------------------------------------------- the active tail


def test_active_segment_with_a_torn_tail_ends_at_the_last_whole_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    write_segment(d, 0, [records(5, 10) for _ in range(30)], active=True)
    log = d / f"{0:020d}.log"
    whole = log.stat().st_size
    with open(log, "ab") as f:  # half a batch being written, then the zeros of preallocation
        f.write(encode_batch(150, records(5, 10), timestamp_type=TimestampType.CREATE_TIME, now_ms=0)[:70])
        f.write(bytes(5000))
    assert offline.log_end_offset(tmp_path, "t", 0) == 150
    plan = offline.plan_partition(tmp_path, "t", 0)
    assert plan.ranges[0].end_position == whole
    assert read_all(plan).offsets == list(range(150))
    (tmp_path / "x-0").mkdir()
    assert offline.log_end_offset(tmp_path, "x", 0) == 0


def test_a_corrupt_batch_inside_a_range_names_file_and_position(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    nxt = write_segment(d, 0, [records(5, 10) for _ in range(4)])
    write_segment(d, nxt, [records(5, 10)], active=True)
    log = d / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF  # a body byte of the last batch: its CRC fails
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=r"00000000000000000000\.log: batch at position \d+ .*CRC"):
        read_all(offline.plan_partition(tmp_path, "t", 0))


def test_offsets_that_go_back_are_corrupt(tmp_path: Path) -> None:
    # Two CRC-valid batches whose offsets overlap (a crafted or foreign file): an error, never rows
    # with repeated offsets (the Arrow conversion relies on offsets increasing).
    d = tmp_path / "t-0"
    write_segment(d, 0, [records(3, 10)])  # a sealed segment: read whole, no walk bounds it
    write_segment(d, 6, [records(2, 10)], active=True)
    log = d / f"{0:020d}.log"
    with open(log, "ab") as f:
        f.write(encode_batch(2, records(3, 10), timestamp_type=TimestampType.CREATE_TIME, now_ms=0))
    with pytest.raises(CorruptRecordError, match=r"below the expected 3 \(offsets must follow on"):
        read_all(offline.plan_partition(tmp_path, "t", 0))


def test_a_stale_index_is_ignored(tmp_path: Path) -> None:
    rows = make_partition(tmp_path, list(range(100)))
    index = tmp_path / "t-0" / f"{0:020d}.index"
    index.write_bytes(index.read_bytes()[:8] + (9999).to_bytes(4, "big") + (99999).to_bytes(4, "big"))
    bounds = offline.Bounds(start_offset=30)
    assert read_all(offline.plan_partition(tmp_path, "t", 0, bounds)).offsets == kafka_model(rows, bounds)


def test_trace_file_collects_events_across_processes(tmp_path: Path) -> None:
    make_partition(tmp_path, list(range(50)))
    hook = offline.append_trace(str(tmp_path / "trace.jsonl"))
    read_all(offline.plan_partition(tmp_path, "t", 0, trace=hook), hook)
    lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    assert [line.count('"event": "read"') for line in lines].count(1) == 2


# --------------------------------------------------------------------------------------- columns


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=8),
            st.none() | st.binary(max_size=4),
            st.integers(0, 2**40),
            st.lists(st.tuples(_HEADER_KEYS, st.binary(max_size=3)), max_size=2).map(tuple),
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(0, 25),
    st.integers(0, 25),
)
def test_decode_columns_matches_decode_batch(
    rows: list[tuple[bytes, bytes | None, int, tuple[tuple[str, bytes], ...]]], lo: int, hi: int
) -> None:
    recs = [Record(v, k, t, h) for v, k, t, h in rows]
    data = encode_batch(1000, recs, timestamp_type=TimestampType.CREATE_TIME, now_ms=0)
    header = read_header(data)
    out = RecordColumns()
    decode_columns(data, 0, header, out, start_offset=1000 + lo, end_offset=1000 + hi)
    expected = [r for r in decode_batch(data, 0, header) if 1000 + lo <= r.offset < 1000 + hi]
    assert list(zip(out.values, out.keys, out.timestamps, out.headers, out.offsets, strict=True)) == [
        tuple(r) for r in expected
    ]


def test_decode_columns_timestamp_cuts() -> None:
    recs = [Record(b"%d" % t, None, t) for t in (50, 10, 70, 30, 90)]
    data = encode_batch(0, recs, timestamp_type=TimestampType.CREATE_TIME, now_ms=0)
    header = read_header(data)
    out = RecordColumns()
    assert decode_columns(data, 0, header, out, from_timestamp=60, until_timestamp=80) is True
    assert out.offsets == [2, 3]  # from the first ts >= 60 (offset 2) up to the first ts >= 80 (offset 4)
    out = RecordColumns()
    assert decode_columns(data, 0, header, out, until_timestamp=100) is False
    assert len(out) == 5


def test_decode_columns_refuses_a_bad_body() -> None:
    data = bytearray(encode_batch(0, records(2, 1), timestamp_type=TimestampType.CREATE_TIME, now_ms=0))
    header = read_header(data)
    body = msgpack.packb([None, [0, 1], [None, None], ["text, not bin", b"x"], None], use_bin_type=True)
    bad = bytes(data[:HEADER_SIZE]) + body
    with pytest.raises(CorruptRecordError, match="value column"):
        decode_columns(bad, 0, header._replace(batch_length=len(bad) - 12), RecordColumns())
    with pytest.raises(CorruptRecordError, match="not valid msgpack"):
        decode_columns(bytes(data[:HEADER_SIZE]) + b"\xc1" * 10, 0, header._replace(batch_length=59), RecordColumns())


# --------------------------------------------------------------------------------------- beside a live engine


async def test_reads_beside_a_running_engine_see_exactly_what_was_appended(tmp_path: Path) -> None:
    from seglog.engine.config import LogConfig
    from seglog.engine.engine import Engine

    config = LogConfig(segment_bytes=8 * 1024, index_interval_bytes=512, segment_index_bytes=4096)
    async with Engine.open(tmp_path, config) as engine:
        await engine.create_topic("live", partitions=1)
        log = engine.log("live", 0)
        for round_ in range(6):
            for i in range(10):
                n = round_ * 50 + i * 5
                await log.append([Record(b"%d" % (n + j) + b"." * 100, None, 1000 + n + j) for j in range(5)])
            # Planned and read while the engine holds the directory: the active segment's indexes
            # are preallocated (zero tails) and nothing was closed or trimmed.
            assert offline.log_end_offset(tmp_path, "live", 0) == log.log_end_offset
            got = read_all(offline.plan_partition(tmp_path, "live", 0))
            assert got.offsets == list(range(log.log_end_offset))
            assert got.values == [b"%d" % o + b"." * 100 for o in got.offsets]
            late = offline.Bounds(from_timestamp=1000 + log.log_end_offset - 7)
            assert read_all(offline.plan_partition(tmp_path, "live", 0, late)).offsets == list(
                range(log.log_end_offset - 7, log.log_end_offset)
            )
        assert len(log.segment_base_offsets()) > 2


@pytest.mark.parametrize("c_module", [True, False], ids=["c", "python"])
@pytest.mark.parametrize("log_append_time", [None, 1_700_000_000_123])
def test_column_buffers_hold_the_rows_of_scan_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_module: bool, log_append_time: int | None
) -> None:
    # Null keys and values, empty values, headers on some rows, a batch of one, big values, and a
    # chunk byte cap smaller than one batch: the buffers must hold exactly scan_range's rows.
    import seglog.segments.batch as batch_module

    if not c_module:
        monkeypatch.setattr(batch_module, "_fast", None)
    batches = [
        [Record(None, None, 10), Record(b"", b"k", 11), Record(b"v" * 3000, None, 12, (("a", b"1"), ("b", b"")))],
        [Record(b"x", b"y", 13)],
        [Record(b"v%d" % i, b"k%d" % (i % 4) if i % 5 else None, 14 + i % 3) for i in range(50)],
    ]
    directory = tmp_path / "t-0"
    write_segment(directory, 0, batches, interval=64, log_append_time=log_append_time)
    plan = offline.plan_partition(str(tmp_path), "t", 0, offline.Bounds(1, offline.NO_END))
    expected = RecordColumns()
    for r in plan.ranges:
        for chunk in offline.scan_range(r):
            _extend(expected, chunk)
    for max_bytes in (1, 100, 1 << 20):
        got = RecordColumns()
        for r in plan.ranges:
            for buffers in offline.scan_range_buffers(r, max_chunk_bytes=max_bytes):
                _extend(got, buffers.to_columns())
        assert got == expected
    assert expected.offsets == list(range(1, 54))
    assert expected.keys[:2] == [b"k", None] and expected.values[1] == b"v" * 3000


@pytest.mark.parametrize("c_module", [True, False], ids=["c", "python"])
def test_a_batch_that_could_pass_2_gib_of_values_starts_a_new_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_module: bool
) -> None:
    # Arrow's binary offsets are int32 and a batch may hold up to 2 GiB (max_message_bytes up to
    # INT_MAX), far more than the byte cap leaves room for: a chunk must be handed on before a batch
    # that might not fit, never fail inside decode_buffers. Values "held" are faked (nbytes only), and
    # the cap is lifted so that it does not hand the chunk on first.
    import seglog.segments.batch as batch_module
    import seglog.segments.columns as columns_module

    if not c_module:
        monkeypatch.setattr(batch_module, "_fast", None)
    monkeypatch.setattr(columns_module, "MAX_CHUNK_DATA_BYTES", 2**40)
    write_segment(tmp_path / "t-0", 0, [[Record(b"a" * 10, None, 5)], [Record(b"b" * 200, None, 6)]])
    def decode(*args: object, **kwargs: object) -> bool:
        out = args[3]
        assert isinstance(out, ColumnBuffers)
        reached = decode_buffers(*args, **kwargs)  # type: ignore[arg-type]
        if out.rows == 1:
            out.values.nbytes += 2**31 - 150  # as if the first batch had been ~2 GiB of values
        return reached

    monkeypatch.setattr(ranges, "decode_buffers", decode)
    (r,) = offline.plan_partition(str(tmp_path), "t", 0).ranges
    chunks = list(offline.scan_range_buffers(r, max_chunk_bytes=2**40))
    assert [c.rows for c in chunks] == [1, 1]
    assert chunks[1].to_columns().values == [b"b" * 200]
