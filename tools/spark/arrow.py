"""The seglog source's row schema and the Arrow conversions on both sides of it.

Owns: :data:`SCHEMA` (Spark's own Kafka-source schema), :func:`arrow_schema`
(the exact Arrow schema pyspark 4.3.0 demands of a Python source's batches:
down to nullability and ``timestamp[us, tz=UTC]``), :func:`buffers_to_batch` (what the source
uses: Arrow wraps the :class:`~seglog.engine.offline.ColumnBuffers` the C reader filled,
one join per column), :func:`columns_to_batch` (the same from decoded
:class:`~seglog.engine.offline.RecordColumns` lists: the reference the tests compare
with) and :func:`batch_rows` (a written DataFrame's Arrow batch back to plain columns).

Imports pyspark and pyarrow (the ``spark`` extra); runs on the driver and on
Spark's Python workers. Must not import ``seglog.tools.cli``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from itertools import accumulate, chain, repeat
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from seglog.engine.offline import ColumnBuffers, RecordColumns
from seglog.segments.columns import BinaryBuffers

__all__ = ["SCHEMA", "SCHEMA_DDL", "arrow_schema", "batch_rows", "buffers_to_batch", "columns_to_batch"]

SCHEMA_DDL: Final = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)
"""Spark's Kafka source schema (``KafkaRecordToRowConverter.kafkaSchema``), headers included."""
SCHEMA: Final = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
        ),
    ]
)
"""The same as a ``StructType`` (built by hand: parsing DDL needs a running session)."""

_US_PER_MS: Final = 1000


@cache
def arrow_schema() -> pa.Schema:
    """The Arrow schema a batch must match exactly (nullability and ``timestamp[us, tz=UTC]`` included)."""
    return to_arrow_schema(SCHEMA, timezone="UTC")


def columns_to_batch(topic: str, partition: int, cols: RecordColumns) -> pa.RecordBatch:
    """One ``RecordBatch`` in :data:`SCHEMA` order from the decoded records of one topic-partition."""
    schema = arrow_schema()
    n = len(cols)
    millis = pa.array(cols.timestamps, pa.int64())
    arrays = [
        pa.array(cols.keys, pa.binary()),
        pa.array(cols.values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        _offsets_array(cols.offsets),
        pc.multiply_checked(millis, _US_PER_MS).cast(schema.field("timestamp").type),
        _timestamp_types_array(cols.timestamp_types),
        _headers_array(cols.headers, schema.field("headers").type),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def buffers_to_batch(topic: str, partition: int, chunk: ColumnBuffers) -> pa.RecordBatch:
    """:func:`columns_to_batch` for :class:`~seglog.engine.offline.ColumnBuffers`: Arrow wraps the buffers (one join
    each)."""
    schema = arrow_schema()
    n = chunk.rows
    millis = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(b"".join(chunk.timestamps))])
    arrays = [
        _binary_array(chunk.keys, n),
        _binary_array(chunk.values, n),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        _offset_runs_array(chunk.offset_runs),
        pc.multiply_checked(millis, _US_PER_MS).cast(schema.field("timestamp").type),
        _type_runs_array(chunk.timestamp_types),
        _headers_array(chunk.headers if chunk.headers is not None else [()] * n, schema.field("headers").type),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _binary_array(column: BinaryBuffers, n: int) -> pa.Array:
    ends = pa.py_buffer(b"\0\0\0\0" + b"".join(column.offsets))  # Arrow's offsets start with the 0 of row 0
    data = pa.py_buffer(b"".join(column.data))
    validity = None
    if column.null_count:
        flags = pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(column.flags())])
        validity = pc.not_equal(flags, 0).buffers()[1]  # the bit-packed form of the 0/1 bytes
    return pa.Array.from_buffers(pa.binary(), n, [validity, ends, data], null_count=column.null_count)


def _offset_runs_array(runs: list[tuple[int, int]]) -> pa.Array:
    if len(runs) == 1:  # consecutive offsets (a log without compaction): a C-level running sum
        return _consecutive(*runs[0])
    return pa.array(list(chain.from_iterable(range(first, first + n) for first, n in runs)), pa.int64())


def _type_runs_array(runs: list[tuple[int, int]]) -> pa.Array:
    if len(runs) == 1:
        kind, n = runs[0]
        return pa.repeat(pa.scalar(kind, pa.int32()), n)
    return pa.array(list(chain.from_iterable(repeat(kind, n) for kind, n in runs)), pa.int32())


def _offsets_array(offsets: list[int]) -> pa.Array:
    # Offsets of one partition increase strictly, so a first-to-last span of n - 1 means n consecutive
    # offsets (what a log without compaction holds): a C-level running sum instead of converting n
    # Python ints (several times faster).
    n = len(offsets)
    if n and offsets[-1] - offsets[0] == n - 1:
        return _consecutive(offsets[0], n)
    return pa.array(offsets, pa.int64())


def _consecutive(first: int, n: int) -> pa.Array:
    return pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n), start=first - 1)


def _timestamp_types_array(types: list[int]) -> pa.Array:
    # One timestamp type for every row is the rule (it is a topic setting): a constant array.
    n = len(types)
    for kind in (0, 1):
        if types.count(kind) == n:
            return pa.repeat(pa.scalar(kind, pa.int32()), n)
    return pa.array(types, pa.int32())


def _headers_array(headers: list[tuple[tuple[str, bytes], ...]], list_type: pa.ListType) -> pa.Array:
    struct_type = list_type.value_type
    if not any(headers):  # the common case: no headers at all, so no per-record work
        offsets = pa.repeat(pa.scalar(0, pa.int32()), len(headers) + 1)
        empty = pa.StructArray.from_arrays(
            [pa.array([], pa.string()), pa.array([], pa.binary())], fields=list(struct_type)
        )
        return pa.ListArray.from_arrays(offsets, empty, type=list_type)
    offsets = pa.array([0, *accumulate(map(len, headers))], pa.int32())
    pairs = list(chain.from_iterable(headers))
    names, values = zip(*pairs, strict=True) if pairs else ((), ())
    flat = pa.StructArray.from_arrays(
        [pa.array(names, pa.string()), pa.array(values, pa.binary())], fields=list(struct_type)
    )
    return pa.ListArray.from_arrays(offsets, flat, type=list_type)


def _binary_column(batch: pa.RecordBatch, name: str) -> list[bytes | None]:
    column = batch.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())  # Kafka's sink also takes string keys and values (UTF-8)
    return column.to_pylist()  # type: ignore[no-any-return]


def batch_rows(batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    """``(topic, partition, key, value, timestamp_ms, headers)`` per row of a written batch.

    Missing optional columns read as ``None`` (headers as ``()``); a
    ``timestamp`` column may be a Spark timestamp or integer milliseconds;
    header values that are null become empty bytes (seglog headers are
    ``(str, bytes)`` pairs, Kafka's may carry a null value).
    """
    n = batch.num_rows
    names = set(batch.schema.names)
    none = [None] * n
    topics = batch.column("topic").to_pylist() if "topic" in names else none
    partitions = batch.column("partition").to_pylist() if "partition" in names else none
    keys = _binary_column(batch, "key") if "key" in names else none
    values = _binary_column(batch, "value") if "value" in names else none
    if "timestamp" in names:
        ts = batch.column("timestamp")
        if pa.types.is_timestamp(ts.type):
            ts = pc.divide(ts.cast(pa.timestamp("us", tz=ts.type.tz)).cast(pa.int64()), _US_PER_MS)
        timestamps = ts.to_pylist()
    else:
        timestamps = none
    if "headers" in names:
        headers = [
            () if h is None else tuple((p["key"], p["value"] if p["value"] is not None else b"") for p in h)
            for h in batch.column("headers").to_pylist()
        ]
    else:
        headers = [()] * n
    return zip(topics, partitions, keys, values, timestamps, headers, strict=True)
