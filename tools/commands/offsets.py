"""``seglog offsets [TOPIC]``: earliest, latest, max-timestamp or by-time offsets per partition (kafka-get-offsets).

Answers with :func:`seglog.engine.offline.offset_for_timestamp` (what
``PartitionLog.offset_for_timestamp`` answers, read from the files without a
lock or mmap, so it is safe beside a live engine), with Kafka's ListOffsets
sentinels: ``earliest`` (-2), ``latest`` (-1), ``max-timestamp`` (-3), or a
time (the earliest offset whose timestamp is >= it). Without a topic, every
partition of every topic, as ``kafka-get-offsets`` without ``--topic``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seglog.engine import offline
from seglog.engine.errors import UnknownTopicOrPartitionError
from seglog.tools._output import (
    EXIT_OK,
    UsageError,
    add_command,
    add_json,
    add_log_dir,
    log_dir_of,
    parse_time,
    print_json,
)

NOTES = """\
Output: one line per partition, TOPIC:PARTITION:OFFSET (kafka-get-offsets'
format), of TOPIC or, without one, of every topic (sorted; --partition then
picks those partitions of each topic). For a time after every record's
timestamp the offset is -1 (Kafka's "no such offset"; null in --json). --time takes earliest, latest,
max-timestamp, Kafka's -2/-1/-3, ISO 8601 or epoch milliseconds."""

SENTINELS = {"earliest": -2, "latest": -1, "max-timestamp": -3, "-2": -2, "-1": -1, "-3": -3}


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "offsets",
        help="earliest, latest, max-timestamp or by-time offset of each partition (kafka-get-offsets)",
        description="Print the offset of each partition of TOPIC (default: every topic) for --time (default latest).",
        examples=[
            "seglog offsets orders --log-dir data",
            "seglog offsets --log-dir data --json",
            "seglog offsets orders --time earliest",
            "seglog offsets orders --time 2026-11-22T10:00:00Z --json",
        ],
        notes=NOTES,
    )
    p.add_argument("topic", metavar="TOPIC", nargs="?", help="the topic (default: every topic)")
    p.add_argument("--partition", "-p", type=int, action="append", metavar="P", help="only partition P (repeatable)")
    p.add_argument("--time", default="latest", metavar="T",
                   help="earliest, latest, max-timestamp, or a time (default latest)")
    add_log_dir(p)
    add_json(p, "a list of {topic, partition, offset, timestamp}")
    p.set_defaults(func=run)


def time_spec(text: str) -> int:
    """Kafka's ListOffsets timestamp for ``text``: a sentinel (-1/-2/-3) or epoch milliseconds.

    Raises:
        UsageError: not a sentinel name or a time.
    """
    value = SENTINELS.get(text.strip().lower())
    if value is not None:
        return value
    ts = parse_time(text)
    if ts < 0:
        raise UsageError(f"--time {text!r}: only -1, -2 and -3 may be negative")
    return ts


def run(args: argparse.Namespace) -> int:
    path: Path = log_dir_of(args)
    target = time_spec(args.time)
    found = sorted((p.topic, p.partition) for p in offline.describe_log_dir(path, topic=args.topic).partitions)
    if args.topic is not None:
        if not found:
            raise UnknownTopicOrPartitionError(f"unknown topic {args.topic!r} in {path}")
        wanted = [(args.topic, p) for p in args.partition] if args.partition else found
    else:
        wanted = [(t, p) for t, p in found if not args.partition or p in args.partition]
    rows = []
    for topic, p in wanted:
        hit = offline.offset_for_timestamp(path, topic, p, target)
        rows.append({"topic": topic, "partition": p, "offset": None if hit is None else hit.offset,
                     "timestamp": None if hit is None or hit.timestamp < 0 else hit.timestamp})
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['topic']}:{r['partition']}:{-1 if r['offset'] is None else r['offset']}")
    return EXIT_OK
