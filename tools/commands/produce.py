"""``seglog produce TOPIC``: append records from stdin or a file, one per line (text or JSON Lines).

Records are partitioned like a Kafka producer: by ``murmur2(key)`` when there
is a key, otherwise one partition per batch in turn (Kafka's sticky
partitioner); ``--partition`` overrides both. Each partition collects its
records into one batch (up to ``--batch-size`` records and half the topic's
``max.message.bytes``), appended when full and at the end, so a large input
costs one write per batch; order within a partition is the input order. With
``--json`` the placements are printed as batches are written (grouped by
partition, not in input order).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final

from seglog.engine import Engine, Record
from seglog.engine.partitioner import partition_for_key
from seglog.tools._output import (
    EXIT_OK,
    UsageError,
    add_command,
    add_log_dir,
    bytes_of_json,
    key_value_arg,
    log_dir_of,
    note,
    parse_time,
    print_json,
    run_async,
    time_arg,
)

RECORD_OVERHEAD_BYTES: Final = 32  # a generous per-record msgpack + header share, for sizing batches

NOTES = """\
Text input: each line is a value (the newline is not part of it); with
--key-separator SEP the part before the first SEP is the key. JSON Lines input
(--format json): one object per line with "value" and optional "key",
"headers" ({"name": "value"} or [["name", "value"], ...]), "timestamp" (epoch
ms or ISO 8601) and "partition"; a key, value or header value is a string
(UTF-8) or {"base64": "..."}. --json prints where each record went."""


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "produce",
        help="append records from stdin or a file (lines or JSON Lines)",
        description="Append records to TOPIC from stdin (or --file): one record per line, text or JSON Lines.",
        examples=[
            "printf 'hello\\nworld\\n' | seglog produce orders --log-dir data",
            "printf 'k1:v1\\nk2:v2\\n' | seglog produce orders --key-separator : --header source=cli",
            "seglog produce orders --format json --file events.jsonl --json > placed.jsonl",
        ],
        notes=NOTES,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--file", type=Path, metavar="PATH", help="read this file instead of stdin")
    p.add_argument("--format", choices=("text", "json"), default="text", help="input format (default text)")
    p.add_argument("--key", help="the key of every record (text input)")
    p.add_argument("--key-separator", metavar="SEP", help="split each text line into KEY SEP VALUE")
    p.add_argument("--header", type=key_value_arg, action="append", default=[], metavar="NAME=VALUE",
                   help="a header on every record (repeatable)")
    p.add_argument("--timestamp", type=time_arg, metavar="T",
                   help="timestamp of every record: ISO 8601 or epoch ms (default: the append time)")
    p.add_argument("--partition", type=int, metavar="P", help="append every record to partition P")
    p.add_argument("--batch-size", type=int, default=500, metavar="N", help="records per batch at most (default 500)")
    add_log_dir(p)
    p.add_argument("--json", action="store_true", help="print each record's topic, partition, offset (JSON Lines)")
    p.set_defaults(func=run)


def _lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    for number, raw in enumerate(stream, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        yield number, line[:-1] if line.endswith(b"\r") else line


def _parse_json_line(number: int, line: bytes) -> tuple[Any, ...]:
    where = f"line {number}"
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object")
    unknown = set(obj) - {"key", "value", "headers", "timestamp", "partition", "topic", "offset"}
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    raw_headers = obj.get("headers") or []
    pairs = list(raw_headers.items()) if isinstance(raw_headers, dict) else raw_headers
    if not isinstance(pairs, list) or not all(isinstance(h, list | tuple) and len(h) == 2 for h in pairs):
        raise UsageError(f"{where}: headers must be an object or a list of [name, value] pairs")
    headers = tuple((str(k), bytes_of_json(v, f"{where}: header {k}") or b"") for k, v in pairs)
    ts = obj.get("timestamp")
    if isinstance(ts, str):
        ts = parse_time(ts)
    elif ts is not None and (isinstance(ts, bool) or not isinstance(ts, int)):
        raise UsageError(f"{where}: timestamp must be epoch ms or ISO 8601")
    partition = obj.get("partition")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise UsageError(f"{where}: partition must be an integer")
    return (bytes_of_json(obj.get("value"), f"{where}: value"), bytes_of_json(obj.get("key"), f"{where}: key"),
            ts, headers, partition)


def run(args: argparse.Namespace) -> int:
    path = log_dir_of(args)
    if args.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    common_headers = tuple((k, v.encode()) for k, v in args.header)
    fixed_key = args.key.encode() if args.key is not None else None
    sep = args.key_separator.encode() if args.key_separator else None

    def records(stream: IO[bytes]) -> Iterator[tuple[Record, int | None]]:
        for number, line in _lines(stream):
            if args.format == "json":
                if not line.strip():
                    continue
                value, key, ts, headers, partition = _parse_json_line(number, line)
                yield Record(value, key, ts if ts is not None else args.timestamp, headers + common_headers), partition
                continue
            key, value = fixed_key, line
            if sep is not None:
                if sep not in line:
                    raise UsageError(f"line {number}: no key separator {args.key_separator!r}")
                key, value = line.split(sep, 1)
            yield Record(value, key, args.timestamp, common_headers), None

    async def work(stream: IO[bytes]) -> dict[int, int]:
        counts: dict[int, int] = {}
        async with Engine.open(path) as engine:
            partitions = engine.partitions_for(args.topic)
            config = engine.topic_config(args.topic)
            # Half the largest batch the topic takes (nor may a batch outgrow a segment): the size
            # estimate per record is rough, the limits are not.
            budget = max(1, min(config.max_message_bytes, config.segment_bytes) // 2)
            if args.partition is not None and not 0 <= args.partition < partitions:
                raise UsageError(f"--partition {args.partition}: {args.topic} has {partitions} partition(s)")
            # One open batch per partition: keyed records spread over partitions still batch well.
            pending: dict[int, list[Record]] = {}
            pending_bytes: dict[int, int] = {}
            sticky, sticky_count = 0, 0

            async def flush(partition: int) -> None:
                batch = pending.pop(partition, [])
                pending_bytes.pop(partition, None)
                if not batch:
                    return
                result = await engine.log(args.topic, partition).append(batch)
                counts[partition] = counts.get(partition, 0) + len(batch)
                if args.json:
                    for i, rec in enumerate(batch):
                        ts = rec.timestamp if rec.timestamp is not None else result.max_timestamp
                        print_json({"topic": args.topic, "partition": partition,
                                    "offset": result.first_offset + i, "timestamp": ts}, lines=True)

            for rec, wanted in records(stream):
                if args.partition is not None:
                    partition = args.partition
                elif wanted is not None:
                    partition = wanted
                elif rec.key is not None:
                    partition = partition_for_key(rec.key, partitions)
                else:
                    # Kafka's sticky partitioner: keyless records fill one batch, then move on.
                    if sticky_count >= args.batch_size:
                        sticky, sticky_count = (sticky + 1) % partitions, 0
                    partition, sticky_count = sticky, sticky_count + 1
                size = len(rec.value or b"") + len(rec.key or b"") + RECORD_OVERHEAD_BYTES + sum(
                    len(k) + len(v) for k, v in rec.headers)
                batch = pending.get(partition)
                if batch and (len(batch) >= args.batch_size or pending_bytes[partition] + size > budget):
                    await flush(partition)
                pending.setdefault(partition, []).append(rec)
                pending_bytes[partition] = pending_bytes.get(partition, 0) + size
            for partition in sorted(pending):
                await flush(partition)
        return counts

    if args.file is not None:
        try:
            with open(args.file, "rb") as f:
                counts = run_async(work(f))
        except OSError as exc:
            raise UsageError(f"{args.file}: cannot read: {exc.strerror}") from None
    else:
        counts = run_async(work(sys.stdin.buffer))
    total = sum(counts.values())
    spread = ", ".join(f"{p}: {n}" for p, n in sorted(counts.items())) or "none"
    note(f"produced {total} record(s) to {args.topic} (per partition {spread})")
    return EXIT_OK
