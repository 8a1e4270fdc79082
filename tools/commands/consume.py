"""``seglog consume TOPIC``: read records by offset or time, print them as text, JSON Lines or raw bytes.

Reads the files with :func:`seglog.engine.offline.read_records` (``pread``, no lock,
no mmap), so it works while an application has the directory open, even as it
trims and truncates files. ``--follow`` keeps going at the end of the log:
``PartitionLog.subscribe`` only wakes for appends made through the same
``Engine``, and a command line is another process, so ``--follow`` looks at
the files again every ``--poll-ms`` and prints what was appended meanwhile.
``--group`` starts from the group's committed offsets and commits the next
positions at the end (and after each poll with ``--follow``); a commit takes
the directory lock, so it fails while another engine holds it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from seglog.engine import Engine, offline
from seglog.engine.errors import InvalidRecordError, UnknownTopicOrPartitionError
from seglog.engine.validate import INT64_MAX, INT64_MIN, validate_group
from seglog.tools._output import (
    EXIT_OK,
    UsageError,
    add_command,
    add_log_dir,
    iso,
    json_bytes,
    log_dir_of,
    note,
    offset_arg,
    print_json,
    run_async,
    text_of,
    time_arg,
)

NOTES = """\
Start: --from earliest (default), latest, an offset, or -N for the last N
records of each partition (kcat's -o -N; fewer when a partition holds fewer),
or --from-time T (the earliest offset whose timestamp is >= T); with --group
and no --from, the group's committed offset. Stop: the log end at start, --to-offset N
(exclusive), --to-time T (before the earliest offset whose timestamp is >= T),
--max-messages N, or never with --follow (Ctrl-C ends it). Times are ISO 8601
(UTC unless a zone is given) or epoch milliseconds. Output: --format text
(the value; --print-key / --print-metadata add tab-separated columns), json
(JSON Lines: topic, partition, offset, timestamp, key, value, headers; bytes
that are not UTF-8 appear as {"base64": ...}) or raw (value bytes + delimiter)."""


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "consume",
        help="read records from an offset, earliest/latest or a time; text, JSON Lines or raw",
        description="Read the records of TOPIC (all partitions, or --partition) by offset or by time.",
        examples=[
            "seglog consume orders --log-dir data",
            "seglog consume orders --partition 0 --from 100 --max-messages 10 --format json",
            "seglog consume orders --from -5 --print-metadata",
            "seglog consume orders --from-time 2026-11-22T10:00:00Z --to-time 2026-11-22T11:00:00Z --print-key",
            "seglog consume orders --group billing --follow",
        ],
        notes=NOTES,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--partition", "-p", type=int, action="append", metavar="P",
                   help="read only partition P (repeatable; default all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from", dest="start", metavar="earliest|latest|OFFSET|-N",
                       help="where to start; -N: the last N records of each partition")
    start.add_argument("--from-time", type=time_arg, metavar="T", help="start at the first offset with timestamp >= T")
    end = p.add_mutually_exclusive_group()
    end.add_argument("--to-offset", type=offset_arg, metavar="N", help="stop before offset N")
    end.add_argument("--to-time", type=time_arg, metavar="T", help="stop before the first offset with timestamp >= T")
    p.add_argument("--max-messages", "-n", type=int, metavar="N", help="stop after N records in all")
    p.add_argument("--follow", "-f", action="store_true", help="wait for new records at the end of the log")
    p.add_argument("--poll-ms", type=int, default=500, metavar="MS", help="--follow re-read interval (default 500)")
    p.add_argument("--group", metavar="GROUP", help="start at GROUP's committed offsets and commit the positions")
    p.add_argument("--format", choices=("text", "json", "raw"), default="text", help="output format (default text)")
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument("--print-key", action="store_true", help="text: print the key before the value")
    p.add_argument("--print-metadata", action="store_true", help="text: print partition, offset and timestamp first")
    p.add_argument("--delimiter", default="\n", metavar="S",
                   help="text/raw: written after each record (default newline)")
    add_log_dir(p)
    p.set_defaults(func=run)


class _Printer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.format = "json" if args.json else args.format
        self.key = args.print_key
        self.meta = args.print_metadata
        self.delimiter = args.delimiter.encode("utf-8").decode("unicode_escape").encode("utf-8")

    def record(self, topic: str, partition: int, rec: Any) -> None:
        if self.format == "json":
            print_json({"topic": topic, "partition": partition, "offset": rec.offset, "timestamp": rec.timestamp,
                        "key": json_bytes(rec.key), "value": json_bytes(rec.value),
                        "headers": [[k, json_bytes(v)] for k, v in rec.headers]}, lines=True)
            return
        out = sys.stdout.buffer
        if self.format == "raw":
            out.write((rec.value or b"") + self.delimiter)
            return
        cols = []
        if self.meta:
            cols += [str(partition), str(rec.offset), iso(rec.timestamp)]
        if self.key:
            cols.append(text_of(rec.key))
        cols.append(text_of(rec.value))
        out.write("\t".join(cols).encode("utf-8") + self.delimiter)

    def flush(self) -> None:
        sys.stdout.flush()


def _resolve_start(args: argparse.Namespace, path: Path, partition: int, committed: int | None) -> int:
    info = offline.partition_info(path, args.topic, partition)
    if args.from_time is not None:
        hit = offline.offset_for_timestamp(path, args.topic, partition, args.from_time)
        return info.log_end_offset if hit is None else hit.offset
    spec = args.start
    if spec is None:
        return committed if committed is not None else info.log_start_offset
    if spec == "earliest":
        return info.log_start_offset
    if spec == "latest":
        return info.log_end_offset
    try:
        offset = int(spec)
    except ValueError:
        raise UsageError(f"--from {spec!r}: use earliest, latest, an offset, or -N for the last N records") from None
    if not INT64_MIN <= offset <= INT64_MAX:
        raise UsageError(f"--from {offset}: outside the range of an offset, [-2**63, 2**63-1]")
    if spec.strip().startswith("-"):
        # kcat's -o -N: N offsets back from the log end (-0 is the end), never below the log start.
        return max(info.log_start_offset, info.log_end_offset + offset)
    if offset > info.log_end_offset:
        raise UsageError(
            f"--from {offset}: past the end of {args.topic}-{partition}, whose next offset is "
            f"{info.log_end_offset}; use an offset up to {info.log_end_offset}, or --from latest"
        )
    return offset


def _stop_offset(args: argparse.Namespace, path: Path, partition: int) -> int | None:
    """The exclusive stop offset, or None for 'the log end' (or never, with --follow)."""
    if args.to_offset is not None:
        return int(args.to_offset)
    if args.to_time is not None:
        hit = offline.offset_for_timestamp(path, args.topic, partition, args.to_time)
        return None if hit is None else hit.offset
    return None


def run(args: argparse.Namespace) -> int:
    path: Path = log_dir_of(args)
    printer = _Printer(args)
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must not be negative")
    if args.poll_ms < 1:
        raise UsageError("--poll-ms must be at least 1")
    if args.group is not None:
        try:
            validate_group(args.group)  # before anything is consumed: the commit at the end would refuse it
        except InvalidRecordError as exc:
            raise UsageError(f"--group: {exc}") from None
    partitions = [p.partition for p in offline.describe_log_dir(path, topic=args.topic).partitions]
    if not partitions:
        raise UnknownTopicOrPartitionError(f"unknown topic {args.topic!r} in {path}")
    wanted = args.partition or partitions
    unknown = sorted(set(wanted) - set(partitions))
    if unknown:
        raise UnknownTopicOrPartitionError(
            f"topic {args.topic!r} has partitions {partitions}; there is no partition {unknown[0]}")
    committed = offline.group_offsets(path).get(args.group, {}) if args.group else {}
    positions = {p: _resolve_start(args, path, p, committed.get((args.topic, p))) for p in wanted}
    stops = {p: _stop_offset(args, path, p) for p in wanted}
    printed = 0

    def limit_reached() -> bool:
        return args.max_messages is not None and printed >= args.max_messages

    def read_available() -> bool:
        """Print what is readable now; returns True when nothing more is to be read (every stop reached)."""
        nonlocal printed
        done = True
        for partition in sorted(positions):
            if not limit_reached():
                for rec in offline.read_records(path, args.topic, partition, positions[partition],
                                                end_offset=stops[partition]):
                    printer.record(args.topic, partition, rec)
                    printed += 1
                    positions[partition] = rec.offset + 1
                    if limit_reached():
                        break
            printer.flush()
            stop = stops[partition]
            if stop is None or positions[partition] < stop:
                done = False
        return done or limit_reached()

    async def commit() -> None:
        async with Engine.open(path) as writer:
            await writer.commit_offsets(args.group, {(args.topic, p): o for p, o in positions.items()})

    try:
        finished = read_available()
        if args.follow and not finished:
            # Says the start positions are fixed and read to the end: appends from now on will show.
            note(f"following {args.topic} every {args.poll_ms} ms (Ctrl-C stops)")
        while args.follow and not finished:
            time.sleep(args.poll_ms / 1000)
            before = dict(positions)
            finished = read_available()
            if args.group and positions != before:
                run_async(commit())
    finally:
        if args.group:
            run_async(commit())
    note(f"consumed {printed} record(s) from {args.topic}"
         + (f"; committed positions for group {args.group}" if args.group else ""))
    return EXIT_OK
