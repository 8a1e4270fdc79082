"""The workload validator: every problem, each named by row and column.

Checks the columns :func:`seglog.tools.replay.format.read_raw` produced against the
rules of ``docs/WORKLOADS.md``: required columns and values, Kafka topic names,
partitions inside the declared counts, produce rows that say what to send,
fetch rows that say what to read, headers the engine can store, unique
per-producer ``seq`` and capture times (``ts_ns``) that never go back within
one producer (replay keeps per-producer order, so it cannot pace a producer
backwards). Pure and synchronous; imports pyarrow only through ``format``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from seglog.tools.replay.format import (
    COLUMNS,
    OP_FETCH,
    OP_FETCH_TIME,
    OP_PRODUCE,
    OPS,
    REQUIRED_COLUMNS,
    TOMBSTONE_SIZE,
    Finding,
    RawWorkload,
    read_raw,
)

# Kafka's topic-name rules (kafka.common.internals.Topic): legal characters and 249 chars at most.
_TOPIC_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")
_INT32_MAX: Final = 2**31 - 1
# Kafka ListOffsets sentinels accepted as a fetch target: -2 earliest, -1 latest.
_EARLIEST: Final = -2


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal Kafka topic name, or ``None`` when it is."""
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed ('.' and '..' are reserved)"
    if not _TOPIC_RE.fullmatch(name):
        return f"topic name {name!r} is not legal: use 1-249 characters from [A-Za-z0-9._-]"
    return None


def validate_raw(raw: RawWorkload) -> list[Finding]:
    """Every problem of a workload read by ``read_raw``, decoding problems first.

    An empty list means :func:`seglog.tools.replay.format.rows_from_raw` may build rows.
    """
    findings = list(raw.findings)
    if raw.nrows == 0:
        return findings or [Finding(None, None, "the workload has no rows")]
    for name in REQUIRED_COLUMNS:
        if name not in raw.columns and not any(f.column == name and f.row is None for f in findings):
            findings.append(Finding(None, name, "required column is missing"))
    if any(f.row is None and f.column in REQUIRED_COLUMNS for f in findings):
        return sorted(findings, key=_position)  # without topic or ts_ns, per-row checks would only repeat it

    cols = raw.columns
    empty: list[Any] = [None] * raw.nrows

    def col(name: str) -> list[Any]:
        return cols.get(name, empty)

    topic, ts_ns, op_c, producer_c = col("topic"), col("ts_ns"), col("op"), col("producer")
    partition, value, ts = col("partition"), col("value"), col("timestamp")
    headers, seq_c, value_size = col("headers"), col("seq"), col("value_size")
    offset, max_bytes = col("offset"), col("max_bytes")
    declared = raw.declared_partitions
    bad_topics: set[str] = set()

    def add(row: int, column: str, message: str) -> None:
        if (row, column) not in raw.invalid:
            findings.append(raw.finding(row, column, message))

    for i in range(raw.nrows):
        t = topic[i]
        if t is None:
            add(i, "topic", "required value is null")
        elif t in bad_topics:
            add(i, "topic", f"topic name {t!r} is not legal (see the first row that uses it)")
        elif (problem := topic_name_problem(t)) is not None:
            bad_topics.add(t)
            add(i, "topic", problem)
        if ts_ns[i] is None:
            add(i, "ts_ns", "required value is null (the capture time in nanoseconds drives pacing)")
        elif ts_ns[i] < 0:
            add(i, "ts_ns", f"capture time {ts_ns[i]} is negative")
        op = op_c[i] or OP_PRODUCE
        if op not in OPS:
            add(i, "op", f"unknown op {op!r}; expected one of {', '.join(OPS)}")
            continue
        p = partition[i]
        if p is not None:
            if not 0 <= p <= _INT32_MAX:
                add(i, "partition", f"partition {p} is outside [0, {_INT32_MAX}]")
            elif t is not None and t in declared and p >= declared[t]:
                add(i, "partition", f"partition {p} but topic {t!r} is declared with {declared[t]} partition(s)")
        if ts[i] is not None and ts[i] < 0:
            add(i, "timestamp", f"timestamp {ts[i]} µs is before 1970 (negative)")
        if max_bytes[i] is not None and max_bytes[i] <= 0:
            add(i, "max_bytes", f"max_bytes {max_bytes[i]} must be > 0")
        if op == OP_PRODUCE:
            _check_produce(i, value[i], value_size[i], headers[i], add)
        else:
            if p is None:
                add(i, "partition", f"a {op} row needs a partition (the one it reads)")
            if op == OP_FETCH:
                if offset[i] is None:
                    add(i, "offset", "a fetch row needs the offset it reads from")
                elif offset[i] < _EARLIEST:
                    add(i, "offset", f"fetch offset {offset[i]} is negative (only -2 earliest, -1 latest)")
            elif op == OP_FETCH_TIME and ts[i] is None:
                add(i, "timestamp", "a fetch_time row needs the timestamp it looks up")
    _check_producer_order(raw, producer_c, seq_c, ts_ns, add)
    return sorted(findings, key=_position)


def _position(f: Finding) -> int:
    """Sort key: file-level findings first, then by line (JSON Lines) or row."""
    if f.line is not None:
        return f.line
    return -1 if f.row is None else f.row


def _check_produce(i: int, value: Any, value_size: Any, headers: Any, add: Any) -> None:
    if value_size is not None and value_size < TOMBSTONE_SIZE:
        add(i, "value_size", f"value_size {value_size} must be >= 0 (or -1 for a tombstone)")
    elif value is None and value_size is None:
        add(
            i,
            "value",
            "value is null and value_size is not given: give the value, a value_size for a "
            "synthetic payload, or value_size -1 for a tombstone",
        )
    elif value is not None and value_size is not None and value_size != len(value):
        add(i, "value_size", f"value_size {value_size} but the value holds {len(value)} bytes")
    if headers:
        for n, (hk, hv) in enumerate(headers):
            if not isinstance(hk, str):
                add(i, "headers", f"header #{n} has no string key")
            elif hv is None:
                add(i, "headers", f"header {hk!r} has a null value; seglog stores headers as (str, bytes)")


def _check_producer_order(
    raw: RawWorkload, producer_c: Sequence[Any], seq_c: Sequence[Any], ts_ns: Sequence[Any], add: Any
) -> None:
    """Unique seq per producer; ts_ns never goes back in replay order (seq order, else file order)."""
    by_producer: dict[str, list[int]] = {}
    for i in range(raw.nrows):
        by_producer.setdefault(producer_c[i] or "", []).append(i)
    for name, rows in by_producer.items():
        with_seq = [i for i in rows if seq_c[i] is not None]
        order = rows
        if with_seq and len(with_seq) != len(rows):
            first_null = next(i for i in rows if seq_c[i] is None)
            add(first_null, "seq", f"seq is null but other rows of producer {name!r} have one")
        elif with_seq:
            seen: dict[int, int] = {}
            for i in rows:
                if seq_c[i] in seen:
                    add(i, "seq", f"seq {seq_c[i]} of producer {name!r} repeats row {seen[seq_c[i]]}")
                else:
                    seen[seq_c[i]] = i
            order = sorted(rows, key=lambda i: (seq_c[i], i))
        prev: int | None = None
        for i in order:
            if ts_ns[i] is None:
                continue
            if prev is not None and ts_ns[i] < ts_ns[prev]:
                add(
                    i,
                    "ts_ns",
                    f"capture time {ts_ns[i]} is earlier than {ts_ns[prev]} of row {prev}, the previous "
                    f"row of producer {name!r}; replay keeps per-producer order, so ts_ns must not go back",
                )
            prev = i


def validate_file(path: str | Path) -> list[Finding]:
    """Every problem of the workload file at ``path`` (empty when it can be replayed).

    Raises:
        WorkloadError: the file does not exist or is neither Parquet nor JSON Lines.
    """
    return validate_raw(read_raw(path))


__all__ = ["COLUMNS", "topic_name_problem", "validate_file", "validate_raw"]
