"""The workload file format (docs/WORKLOADS.md): columns, reading, writing.

A workload is a table with one row per recorded call. Its first columns are
Spark's Kafka-source schema, so ``spark.read.parquet`` reads it and Spark can
write one; the rest drive the replay::

    column      type                                    meaning
    topic       string                                  required
    partition   int32, nullable                         null: partition by key (Kafka murmur2)
    key         binary, nullable
    value       binary, nullable                        null needs value_size (synthetic payload)
    timestamp   timestamp[us, UTC], nullable            record timestamp; null: append time
    headers     list<struct<key: string, value: binary>>, nullable
    ts_ns       int64                                   capture time (ns) -- drives pacing; required
    producer    string, nullable                        per-producer order is kept; null: ""
    seq         int64, nullable                         per-producer sequence (replay order)
    value_size  int32, nullable                         payload size; -1 with a null value: tombstone
    op          string, nullable                        produce (default) | fetch | fetch_time
    offset      int64, nullable                         fetch: target offset; produce: source offset
    max_bytes   int32, nullable                         fetch: max_bytes of the read (default 1 MiB)

Parquet files carry the topics' partition counts in the schema metadata key
``seglog.workload`` (JSON ``{"version": 1, "topics": {"orders": {"partitions": 3}}}``);
a JSON Lines file may carry the same object as a line of its own
(``{"seglog.workload": {...}}``). JSON Lines rows use the same field names with
binary fields in base64 and ``timestamp`` as ISO 8601 (or integer milliseconds).
``docs/WORKLOADS.md`` is the user-facing description.

Reading is split in two: :func:`read_raw` turns a file into plain Python
columns (and reports cells it could not even decode), :mod:`seglog.tools.replay.validate`
checks those columns, and :func:`load_workload` does both and builds
:class:`WorkloadRow` values. This module imports pyarrow (the ``replay`` extra).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from seglog.engine import errors

# Version of the metadata object; part of the format.
FORMAT_VERSION: Final = 1
# Schema-metadata key (Parquet) and line key (JSON Lines) of the metadata object; part of the format.
METADATA_KEY: Final = "seglog.workload"

OP_PRODUCE: Final = "produce"
OP_FETCH: Final = "fetch"
OP_FETCH_TIME: Final = "fetch_time"
OPS: Final = (OP_PRODUCE, OP_FETCH, OP_FETCH_TIME)

# value_size of a row whose value is a Kafka tombstone (null value): Kafka's own
# record format writes a null value as length -1.
TOMBSTONE_SIZE: Final = -1
# Default max_bytes of a replayed fetch, Kafka's max.partition.fetch.bytes.
DEFAULT_FETCH_MAX_BYTES: Final = 1 << 20

JSONL_SUFFIXES: Final = (".jsonl", ".ndjson", ".json")

# Column name -> arrow type, in file order. Spark's Kafka-source columns first.
HEADER_TYPE: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
COLUMN_TYPES: Final[Mapping[str, pa.DataType]] = {
    "topic": pa.string(),
    "partition": pa.int32(),
    "key": pa.binary(),
    "value": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "headers": HEADER_TYPE,
    "ts_ns": pa.int64(),
    "producer": pa.string(),
    "seq": pa.int64(),
    "value_size": pa.int32(),
    "op": pa.string(),
    "offset": pa.int64(),
    "max_bytes": pa.int32(),
}
COLUMNS: Final = tuple(COLUMN_TYPES)
REQUIRED_COLUMNS: Final = ("topic", "ts_ns")
# Spark's Kafka source also has these; a workload may carry them, replay ignores them.
IGNORED_SPARK_COLUMNS: Final = ("timestampType",)

_BINARY_COLUMNS: Final = ("key", "value")
_INT_COLUMNS: Final = ("partition", "ts_ns", "seq", "value_size", "offset", "max_bytes")
_STRING_COLUMNS: Final = ("topic", "producer", "op")
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_US_PER_UNIT: Final = {"s": 1_000_000, "ms": 1_000, "us": 1}

Header = tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in a workload: where (row, column) and what.

    ``row`` is the 0-based data row (``None`` for a problem of the whole file or
    column); ``line`` is the 1-based line of a JSON Lines file.
    """

    row: int | None
    column: str | None
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}" + (f" (line {self.line})" if self.line is not None else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        return (", ".join(where) + ": " if where else "") + self.message

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row, "line": self.line, "column": self.column, "message": self.message}


class WorkloadError(errors.SeglogError, ValueError):
    """A workload file that cannot be replayed; ``findings`` lists every problem."""

    def __init__(self, path: str, findings: Sequence[Finding]) -> None:
        self.path = path
        self.findings = tuple(findings)
        first = "; ".join(str(f) for f in self.findings[:3])
        more = f" (and {len(self.findings) - 3} more)" if len(self.findings) > 3 else ""
        super().__init__(
            f"{path}: {len(self.findings)} problem(s) in the workload: {first}{more}; "
            f"run 'seglog workload validate {path}' for the full list"
        )


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    """One validated workload row. ``timestamp_us`` is the file's microseconds (Spark's unit)."""

    topic: str
    ts_ns: int
    producer: str = ""
    op: str = OP_PRODUCE
    partition: int | None = None
    key: bytes | None = None
    value: bytes | None = None
    timestamp_us: int | None = None
    headers: tuple[Header, ...] = ()
    seq: int | None = None
    value_size: int | None = None
    offset: int | None = None
    max_bytes: int | None = None

    @property
    def timestamp_ms(self) -> int | None:
        """The record timestamp in the engine's unit (ms); sub-millisecond digits are dropped."""
        return None if self.timestamp_us is None else self.timestamp_us // 1000


@dataclass(slots=True)
class RawWorkload:
    """A workload file as plain Python columns, before validation.

    ``columns`` maps each known column present in the file to one value per row
    (``None`` for null; ints for integer and timestamp columns, timestamps in
    microseconds; ``bytes`` for binary; headers as a list of ``(key, value)``).
    ``invalid`` holds the cells that could not be decoded (already reported in
    ``findings``), so the validator does not report them again.
    """

    path: str
    file_format: str
    nrows: int
    columns: dict[str, list[Any]]
    declared_partitions: dict[str, int]
    findings: list[Finding] = field(default_factory=list)
    invalid: set[tuple[int, str]] = field(default_factory=set)
    lines: list[int] | None = None

    def line_of(self, row: int) -> int | None:
        return None if self.lines is None else self.lines[row]

    def finding(self, row: int | None, column: str | None, message: str) -> Finding:
        line = None if row is None else self.line_of(row)
        return Finding(row, column, message, line)


@dataclass(slots=True)
class Workload:
    """Validated rows plus the topics' partition counts (declared or derived)."""

    rows: list[WorkloadRow]
    partitions: dict[str, int]
    path: str = "<memory>"


def is_jsonl(path: str | Path) -> bool:
    return Path(path).suffix.lower() in JSONL_SUFFIXES


# ----------------------------------------------------------------------------- reading


def read_raw(path: str | Path) -> RawWorkload:
    """Read a workload file (Parquet file or dataset directory, or JSON Lines) into columns.

    Raises:
        WorkloadError: the file does not exist or is not Parquet / JSON Lines at all.
    """
    p = Path(path)
    if not p.exists():
        raise WorkloadError(str(p), [Finding(None, None, "no such file or directory")])
    if is_jsonl(p):
        return _read_jsonl(p)
    return _read_parquet(p)


def _metadata_partitions(meta: Any, path: str, findings: list[Finding], line: int | None) -> dict[str, int]:
    """Partition counts from a metadata object; problems become findings."""
    out: dict[str, int] = {}
    topics = meta.get("topics") if isinstance(meta, dict) else None
    if not isinstance(topics, dict):
        findings.append(Finding(None, None, f"{METADATA_KEY} metadata has no 'topics' object", line))
        return out
    for name, spec in topics.items():
        n = spec.get("partitions") if isinstance(spec, dict) else None
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            findings.append(
                Finding(None, None, f"{METADATA_KEY} metadata: topic {name!r} needs 'partitions' >= 1", line)
            )
            continue
        out[str(name)] = n
    return out


def _read_parquet(p: Path) -> RawWorkload:
    try:
        table = pq.read_table(p)
    except (pa.ArrowException, OSError) as exc:
        raise WorkloadError(str(p), [Finding(None, None, f"not a readable Parquet file or dataset: {exc}")]) from exc
    findings: list[Finding] = []
    declared: dict[str, int] = {}
    meta = table.schema.metadata or {}
    if METADATA_KEY.encode() in meta:
        try:
            obj = json.loads(meta[METADATA_KEY.encode()])
        except ValueError:
            findings.append(Finding(None, None, f"{METADATA_KEY} schema metadata is not JSON"))
        else:
            declared = _metadata_partitions(obj, str(p), findings, None)
    raw = RawWorkload(str(p), "parquet", table.num_rows, {}, declared, findings)
    for name in COLUMNS:
        if name not in table.column_names:
            continue
        column = table.column(name)
        if pa.types.is_dictionary(column.type):  # hive-partitioned datasets give dictionary columns
            column = column.cast(column.type.value_type)
        values = _arrow_column_values(name, column, raw)
        if values is not None:
            raw.columns[name] = values
    return raw


def _arrow_column_values(name: str, column: pa.ChunkedArray, raw: RawWorkload) -> list[Any] | None:
    """Python values of one Parquet column, or ``None`` (and a finding) when its type is wrong."""
    t = column.type
    want = COLUMN_TYPES[name]
    ok: bool
    if name in _STRING_COLUMNS:
        ok = pa.types.is_string(t) or pa.types.is_large_string(t)
    elif name in _INT_COLUMNS:
        ok = pa.types.is_integer(t)
    elif name in _BINARY_COLUMNS:
        ok = pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
    elif name == "timestamp":
        ok = pa.types.is_timestamp(t)
    else:  # headers
        ok = _is_header_type(t)
    if not ok:
        raw.findings.append(raw.finding(None, name, f"has type {t}, expected {want}"))
        return None
    if name == "timestamp":
        unit = t.unit
        ints = column.cast(pa.int64()).to_pylist()
        if unit == "ns":
            return [None if v is None else v // 1000 for v in ints]
        factor = _US_PER_UNIT[unit]
        return [None if v is None else v * factor for v in ints]
    values = column.to_pylist()
    if name in _BINARY_COLUMNS and pa.types.is_string(t):
        return [None if v is None else v.encode() for v in values]
    if name == "headers":
        return [None if v is None else [(h.get("key"), h.get("value")) for h in v] for v in values]
    return list(values)


def _is_header_type(t: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    item = t.value_type
    if not pa.types.is_struct(item):
        return False
    names = {item.field(i).name: item.field(i).type for i in range(item.num_fields)}
    key_t, value_t = names.get("key"), names.get("value")
    return (
        key_t is not None
        and value_t is not None
        and (pa.types.is_string(key_t) or pa.types.is_large_string(key_t))
        and (pa.types.is_binary(value_t) or pa.types.is_large_binary(value_t))
    )


def _read_jsonl(p: Path) -> RawWorkload:
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(str(p), [Finding(None, None, f"cannot read as UTF-8 text: {exc}")]) from exc
    findings: list[Finding] = []
    declared: dict[str, int] = {}
    objects: list[dict[str, Any]] = []
    lines: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            findings.append(Finding(None, None, f"not valid JSON: {exc}", lineno))
            continue
        if not isinstance(obj, dict):
            findings.append(Finding(None, None, "a JSON Lines row must be an object", lineno))
            continue
        if set(obj) == {METADATA_KEY}:
            declared.update(_metadata_partitions(obj[METADATA_KEY], str(p), findings, lineno))
            continue
        objects.append(obj)
        lines.append(lineno)
    raw = RawWorkload(str(p), "jsonl", len(objects), {}, declared, findings, lines=lines)
    present = {name for obj in objects for name in obj}
    for name in COLUMNS:
        if name in present:
            raw.columns[name] = [_json_cell(raw, i, name, obj.get(name)) for i, obj in enumerate(objects)]
    for unknown in sorted(present - set(COLUMNS) - set(IGNORED_SPARK_COLUMNS)):
        row = next(i for i, obj in enumerate(objects) if unknown in obj)
        raw.findings.append(raw.finding(row, unknown, "unknown column (a typo?); known: " + ", ".join(COLUMNS)))
    return raw


def _json_cell(raw: RawWorkload, row: int, name: str, value: Any) -> Any:
    """Decode one JSON cell into the column's Python type, or record a finding and return None."""
    if value is None:
        return None

    def bad(message: str) -> None:
        raw.findings.append(raw.finding(row, name, message))
        raw.invalid.add((row, name))

    if name in _STRING_COLUMNS:
        if isinstance(value, str):
            return value
        bad(f"expected a string, got {type(value).__name__} {value!r:.40}")
        return None
    if name in _INT_COLUMNS:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        bad(f"expected an integer, got {type(value).__name__} {value!r:.40}")
        return None
    if name in _BINARY_COLUMNS:
        decoded = _b64(value)
        if decoded is None:
            bad(f"expected base64 text, got {value!r:.40}")
        return decoded
    if name == "timestamp":
        us = _json_timestamp_us(value)
        if us is None:
            bad(f"expected an ISO 8601 time or integer milliseconds, got {value!r:.40}")
        return us
    # headers
    if not isinstance(value, list):
        bad(f"expected a list of {{key, value}} objects, got {type(value).__name__}")
        return None
    out: list[tuple[Any, Any]] = []
    for h in value:
        if not isinstance(h, dict) or "key" not in h:
            bad(f"each header must be an object with 'key' and 'value', got {h!r:.40}")
            return None
        hv = h.get("value")
        if hv is None:
            out.append((h["key"], None))
            continue
        decoded = _b64(hv)
        if decoded is None:
            bad(f"header {h['key']!r}: value is not base64 text")
            return None
        out.append((h["key"], decoded))
    return out


def _b64(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _json_timestamp_us(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value * 1000
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_timestamp_us(us: int) -> str:
    """ISO 8601 in UTC with a ``Z``; milliseconds unless the value has finer digits."""
    when = _EPOCH + dt.timedelta(microseconds=us)
    spec = "milliseconds" if us % 1000 == 0 else "microseconds"
    return when.isoformat(timespec=spec).replace("+00:00", "Z")


def rows_from_raw(raw: RawWorkload) -> list[WorkloadRow]:
    """Build rows from validated columns (call only when the validator found nothing)."""
    cols = raw.columns

    def col(name: str) -> list[Any]:
        return cols.get(name) or [None] * raw.nrows

    topic, ts_ns, producer, op = col("topic"), col("ts_ns"), col("producer"), col("op")
    partition, key, value, ts = col("partition"), col("key"), col("value"), col("timestamp")
    headers, seq, value_size = col("headers"), col("seq"), col("value_size")
    offset, max_bytes = col("offset"), col("max_bytes")
    return [
        WorkloadRow(
            topic=topic[i],
            ts_ns=ts_ns[i],
            producer=producer[i] or "",
            op=op[i] or OP_PRODUCE,
            partition=partition[i],
            key=key[i],
            value=value[i],
            timestamp_us=ts[i],
            headers=tuple((k, v) for k, v in headers[i]) if headers[i] else (),
            seq=seq[i],
            value_size=value_size[i],
            offset=offset[i],
            max_bytes=max_bytes[i],
        )
        for i in range(raw.nrows)
    ]


def derive_partitions(rows: Iterable[WorkloadRow], declared: Mapping[str, int]) -> dict[str, int]:
    """Partition count per topic: declared, else highest explicit partition + 1, else 1."""
    out: dict[str, int] = {}
    for row in rows:
        seen = out.get(row.topic, 1)
        if row.partition is not None:
            seen = max(seen, row.partition + 1)
        out[row.topic] = seen
    for name, n in declared.items():
        out[name] = max(n, out.get(name, 1))
    return out


def load_workload(path: str | Path, partitions: Mapping[str, int] | None = None) -> Workload:
    """Read and validate a workload; ``partitions`` overrides the file's partition counts.

    Raises:
        WorkloadError: the file is missing or unreadable, or any row is invalid
            (the error's ``findings`` name row and column of each problem).
    """
    from seglog.tools.replay.validate import validate_raw

    raw = read_raw(path)
    if partitions:
        raw.declared_partitions.update(partitions)
    findings = validate_raw(raw)
    if findings:
        raise WorkloadError(str(path), findings)
    rows = rows_from_raw(raw)
    return Workload(rows, derive_partitions(rows, raw.declared_partitions), str(path))


# ----------------------------------------------------------------------------- writing


def metadata_object(partitions: Mapping[str, int]) -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "topics": {t: {"partitions": n} for t, n in sorted(partitions.items())}}


def to_arrow(rows: Sequence[WorkloadRow], partitions: Mapping[str, int]) -> pa.Table:
    """The rows as an arrow table with the workload schema and partition metadata."""
    data: dict[str, list[Any]] = {
        "topic": [r.topic for r in rows],
        "partition": [r.partition for r in rows],
        "key": [r.key for r in rows],
        "value": [r.value for r in rows],
        "timestamp": [r.timestamp_us for r in rows],
        "headers": [[{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in rows],
        "ts_ns": [r.ts_ns for r in rows],
        "producer": [r.producer for r in rows],
        "seq": [r.seq for r in rows],
        "value_size": [r.value_size for r in rows],
        "op": [r.op for r in rows],
        "offset": [r.offset for r in rows],
        "max_bytes": [r.max_bytes for r in rows],
    }
    arrays = []
    for name, typ in COLUMN_TYPES.items():
        if name == "timestamp":
            arrays.append(pa.array(data[name], type=pa.int64()).cast(typ))
        else:
            arrays.append(pa.array(data[name], type=typ))
    schema = pa.schema(
        [pa.field(n, t) for n, t in COLUMN_TYPES.items()],
        metadata={METADATA_KEY: json.dumps(metadata_object(partitions))},
    )
    return pa.Table.from_arrays(arrays, schema=schema)


def row_to_json(r: WorkloadRow) -> dict[str, Any]:
    """One row as a JSON Lines object (binary fields base64, timestamp ISO 8601)."""

    def b64(b: bytes | None) -> str | None:
        return None if b is None else base64.b64encode(b).decode("ascii")

    return {
        "topic": r.topic,
        "partition": r.partition,
        "key": b64(r.key),
        "value": b64(r.value),
        "timestamp": None if r.timestamp_us is None else format_timestamp_us(r.timestamp_us),
        "headers": [{"key": k, "value": b64(v)} for k, v in r.headers] if r.headers else None,
        "ts_ns": r.ts_ns,
        "producer": r.producer,
        "seq": r.seq,
        "value_size": r.value_size,
        "op": r.op,
        "offset": r.offset,
        "max_bytes": r.max_bytes,
    }


def write_workload(path: str | Path, rows: Sequence[WorkloadRow], partitions: Mapping[str, int]) -> Path:
    """Write rows as Parquet (zstd) or, for ``.jsonl``/``.ndjson``/``.json``, JSON Lines.

    The file is written to a temporary name and renamed, so a reader never sees
    half a workload. Returns the path written.

    Raises:
        OSError: the file cannot be written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    if is_jsonl(p):
        with tmp.open("w", encoding="utf-8") as out:
            out.write(json.dumps({METADATA_KEY: metadata_object(partitions)}) + "\n")
            for r in rows:
                out.write(json.dumps(row_to_json(r), separators=(",", ":")) + "\n")
    else:
        pq.write_table(to_arrow(rows, partitions), tmp, compression="zstd")
    tmp.replace(p)
    return p
