"""Decoded columns → Arrow batches, without a Spark session: the shortcuts give the general path's result."""

from __future__ import annotations

import pyarrow as pa

from seglog.engine.offline import ColumnBuffers, RecordColumns
from seglog.tools.spark.arrow import arrow_schema, buffers_to_batch, columns_to_batch


def columns(offsets: list[int], types: list[int]) -> RecordColumns:
    n = len(offsets)
    cols = RecordColumns()
    cols.offsets, cols.timestamp_types = offsets, types
    cols.timestamps = [1_700_000_000_000 + i for i in range(n)]
    cols.keys = [None if i % 2 else b"k%d" % i for i in range(n)]
    cols.values = [b"v%d" % i for i in range(n)]
    cols.headers = [(("h", b"x"),) if i == 1 else () for i in range(n)]
    return cols


def test_every_column_keeps_its_rows_whatever_shortcut_applies() -> None:
    cases = [
        ([7, 8, 9, 10], [0, 0, 0, 0]),  # consecutive offsets, one timestamp type: the constant shortcuts
        ([7, 9, 10, 15], [1, 1, 1, 1]),  # gaps (a compacted log): converted one by one
        ([7, 8, 9, 10], [0, 1, 0, 1]),  # mixed timestamp types
        ([], []),
    ]
    for offsets, types in cases:
        batch = columns_to_batch("t", 3, columns(offsets, types))
        assert batch.schema == arrow_schema()
        rows = batch.to_pylist()
        assert [r["offset"] for r in rows] == offsets
        assert [r["timestampType"] for r in rows] == types
        assert [r["partition"] for r in rows] == [3] * len(offsets)
        assert [r["key"] for r in rows] == [None if i % 2 else b"k%d" % i for i in range(len(offsets))]
        assert [r["headers"] for r in rows][1:2] == ([[{"key": "h", "value": b"x"}]] if offsets else [])
        assert batch.column("offset").type == pa.int64() and batch.column("timestampType").type == pa.int32()


def test_column_buffers_make_the_same_arrow_batch_as_columns() -> None:
    # The Spark source's path (ColumnBuffers, Arrow wrapping the buffers) against the list path,
    # for every shortcut case, no nulls at all, all nulls and headers on no row.
    cases = [
        ([7, 8, 9, 10], [0, 0, 0, 0]),
        ([7, 9, 10, 15], [1, 1, 1, 1]),
        ([7, 8, 9, 10], [0, 1, 0, 1]),
        ([], []),
    ]
    for offsets, types in cases:
        cols = columns(offsets, types)
        buffers = ColumnBuffers()
        buffers.append_columns(cols)
        assert buffers_to_batch("t", 3, buffers).equals(columns_to_batch("t", 3, cols))
    cols = columns([1, 2, 3], [0, 0, 0])
    cols.keys, cols.values, cols.headers = [b"a", b"b", b"c"], [None, None, None], [(), (), ()]
    buffers = ColumnBuffers()
    buffers.append_columns(cols)
    batch = buffers_to_batch("t", 0, buffers)
    assert batch.equals(columns_to_batch("t", 0, cols))
    assert batch.column("value").null_count == 3 and batch.column("key").null_count == 0


def test_a_timestamp_beyond_spark_s_microsecond_range_fails_instead_of_wrapping() -> None:
    # Spark timestamps are int64 microseconds: a seglog timestamp above ~9.2e15 ms has no Spark value,
    # and multiplying it by 1000 unchecked would wrap into a plausible, wrong date.
    import pytest

    cols = columns([1], [0])
    cols.timestamps = [2**62]
    buffers = ColumnBuffers()
    buffers.append_columns(cols)
    for convert in (lambda: columns_to_batch("t", 0, cols), lambda: buffers_to_batch("t", 0, buffers)):
        with pytest.raises(pa.ArrowInvalid, match="overflow"):
            convert()
