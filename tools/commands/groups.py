"""``seglog groups list|describe|reset|delete``: consumer-group positions, lag, and resets.

``list``, ``describe`` and the planning part of ``reset`` read the files with
:mod:`seglog.engine.offline` (no lock); ``reset`` computes the new positions (earliest, latest, a
time, or an offset) and, as
``kafka-consumer-groups --reset-offsets``, only prints them unless
``--execute`` is given; ``reset --execute`` and ``delete`` take the directory
lock to commit.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seglog.engine import Engine, offline
from seglog.engine.errors import UnknownTopicOrPartitionError
from seglog.tools._output import (
    EXIT_OK,
    Column,
    UsageError,
    add_command,
    add_json,
    add_log_dir,
    log_dir_of,
    note,
    offset_arg,
    print_json,
    print_table,
    run_async,
    time_arg,
)


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "groups",
        help="list consumer groups, show committed offsets and lag, reset positions",
        description="Consumer groups of a log directory: committed offsets, lag, resets.",
        examples=[
            "seglog groups list --log-dir data",
            "seglog groups describe billing --log-dir data",
            "seglog groups reset billing --topic orders --to-datetime 2026-11-22T10:00:00Z --execute",
        ],
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    ls = add_command(sub, "list", help="list groups", func=list_groups,
                     examples=["seglog groups list --json --log-dir data"])
    add_log_dir(ls)
    add_json(ls, "the group names")

    d = add_command(sub, "describe", help="committed offsets, log end offsets and lag of a group", func=describe,
                    examples=["seglog groups describe billing --log-dir data"])
    d.add_argument("group", metavar="GROUP")
    add_log_dir(d)
    add_json(d, "one object per partition")

    r = add_command(sub, "reset", help="move a group's positions (dry run unless --execute)", func=reset,
                    examples=["seglog groups reset billing --topic orders --to-earliest --execute",
                              "seglog groups reset billing --topic orders --partition 0 --to-offset 42"])
    r.add_argument("group", metavar="GROUP")
    r.add_argument("--topic", required=True, metavar="TOPIC")
    r.add_argument("--partition", "-p", type=int, action="append", metavar="P", help="only partition P (repeatable)")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-datetime", type=time_arg, metavar="T",
                    help="the earliest offset whose timestamp is >= T (the log end if none)")
    to.add_argument("--to-offset", type=offset_arg, metavar="N", help="offset N (clamped to the log's range)")
    r.add_argument("--execute", action="store_true", help="commit the new positions (default: only show them)")
    add_log_dir(r)
    add_json(r, "the new positions")

    x = add_command(sub, "delete", help="forget a group's committed offsets", func=delete,
                    examples=["seglog groups delete billing --log-dir data"])
    x.add_argument("group", metavar="GROUP")
    add_log_dir(x)


def list_groups(args: argparse.Namespace) -> int:
    names = sorted(offline.group_offsets(log_dir_of(args)))
    if args.json:
        print_json(names)
    else:
        for name in names:
            print(name)
    return EXIT_OK


def describe(args: argparse.Namespace) -> int:
    path: Path = log_dir_of(args)
    offsets = offline.group_offsets(path).get(args.group)
    if not offsets:
        raise UnknownTopicOrPartitionError(f"group {args.group!r} has no committed offsets in {path}")
    rows = []
    for (topic, partition), committed in sorted(offsets.items()):
        try:
            info = offline.partition_info(path, topic, partition)
        except UnknownTopicOrPartitionError:
            rows.append({"topic": topic, "partition": partition, "committed": committed,
                         "log_start_offset": None, "log_end_offset": None, "lag": None})
            continue
        rows.append({"topic": topic, "partition": partition, "committed": committed,
                     "log_start_offset": info.log_start_offset, "log_end_offset": info.log_end_offset,
                     "lag": max(0, info.log_end_offset - max(committed, info.log_start_offset))})
    if args.json:
        print_json(rows)
        return EXIT_OK
    print_table([Column("topic"), Column("partition", "right"), Column("committed", "right"),
                 Column("log end", "right"), Column("lag", "right")],
                [(r["topic"], r["partition"], r["committed"], _dash(r["log_end_offset"]), _dash(r["lag"]))
                 for r in rows])
    return EXIT_OK


def _dash(value: object) -> object:
    return "-" if value is None else value


def _target(args: argparse.Namespace, path: Path, partition: int) -> int:
    info = offline.partition_info(path, args.topic, partition)
    start, end = info.log_start_offset, info.log_end_offset
    if args.to_earliest:
        return start
    if args.to_latest:
        return end
    if args.to_datetime is not None:
        hit = offline.offset_for_timestamp(path, args.topic, partition, args.to_datetime)
        return end if hit is None else hit.offset
    return int(min(max(args.to_offset, start), end))


def reset(args: argparse.Namespace) -> int:
    path: Path = log_dir_of(args)
    if args.to_offset is not None and args.to_offset < 0:
        raise UsageError("--to-offset must not be negative")
    partitions = [p.partition for p in offline.describe_log_dir(path, topic=args.topic).partitions]
    if not partitions:
        raise UnknownTopicOrPartitionError(f"unknown topic {args.topic!r} in {path}")
    previous = offline.group_offsets(path).get(args.group, {})
    plan = [{"topic": args.topic, "partition": p, "previous": previous.get((args.topic, p)),
             "new": _target(args, path, p)} for p in (args.partition or partitions)]
    if args.execute:
        async def commit() -> None:
            async with Engine.open(path) as engine:
                await engine.commit_offsets(args.group, {(args.topic, r["partition"]): r["new"] for r in plan})

        run_async(commit())
    if args.json:
        print_json(plan)
    else:
        print_table([Column("topic"), Column("partition", "right"), Column("previous", "right"),
                     Column("new", "right")],
                    [(r["topic"], r["partition"], "-" if r["previous"] is None else r["previous"], r["new"])
                     for r in plan])
    note(f"committed new positions for group {args.group}" if args.execute
         else "dry run: nothing committed; add --execute to commit these positions")
    return EXIT_OK


def delete(args: argparse.Namespace) -> int:
    path: Path = log_dir_of(args)

    async def work() -> bool:
        async with Engine.open(path) as engine:
            return await engine.delete_group(args.group)

    if not run_async(work()):
        raise UnknownTopicOrPartitionError(f"group {args.group!r} has no committed offsets in {path}")
    note(f"deleted group {args.group}")
    return EXIT_OK
