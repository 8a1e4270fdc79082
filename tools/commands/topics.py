"""``seglog topics create|list|describe|delete``: manage and describe the topics of a log directory.

``create`` and ``delete`` open the directory with an ``Engine`` (taking its
lock); ``list`` and ``describe`` read the files with :mod:`seglog.engine.offline`
(no lock, nothing written), so they also work while an application has the
directory open.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seglog.engine import Engine, LogConfig, offline
from seglog.engine.errors import TopicExistsError, UnknownTopicOrPartitionError
from seglog.tools._output import (
    EXIT_OK,
    Column,
    UsageError,
    add_command,
    add_json,
    add_log_dir,
    key_value_arg,
    log_dir_of,
    note,
    print_json,
    print_table,
    run_async,
)


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "topics",
        help="create, list, describe or delete topics",
        description="Create, list, describe or delete the topics of a log directory.",
        examples=[
            "seglog topics create orders --partitions 3 --config retention.ms=86400000 --log-dir data",
            "seglog topics list --log-dir data",
            "seglog topics describe orders --segments --log-dir data",
            "seglog topics delete orders --log-dir data",
        ],
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    c = add_command(sub, "create", help="create a topic", func=create,
                    examples=["seglog topics create orders --partitions 3 --config segment.bytes=1048576"])
    c.add_argument("topic", metavar="TOPIC")
    c.add_argument("--partitions", type=int, default=1, metavar="N", help="number of partitions (default 1)")
    c.add_argument("--config", type=key_value_arg, action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config override in Kafka's names, e.g. retention.ms=86400000 (repeatable)")
    c.add_argument("--if-not-exists", action="store_true", help="no error when the topic exists")
    add_log_dir(c)

    ls = add_command(sub, "list", help="list topics", func=list_topics,
                     examples=["seglog topics list --json --log-dir data"])
    add_log_dir(ls)
    add_json(ls, "the topics")

    d = add_command(sub, "describe", help="partitions, segments, sizes, offsets and config of topics", func=describe,
                    examples=["seglog topics describe orders --segments --log-dir data"])
    d.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to describe (default: all)")
    d.add_argument("--segments", action="store_true", help="also list every segment")
    add_log_dir(d)
    add_json(d, "the description")

    x = add_command(sub, "delete", help="delete a topic and its files", func=delete,
                    examples=["seglog topics delete orders --log-dir data"])
    x.add_argument("topic", metavar="TOPIC")
    x.add_argument("--if-exists", action="store_true", help="no error when the topic does not exist")
    add_log_dir(x)


def create(args: argparse.Namespace) -> int:
    path = log_dir_of(args, must_exist=False)
    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, got {args.partitions}")
    overrides = dict(args.config)
    LogConfig.from_properties(overrides)  # refuse a bad key before anything is created
    path.mkdir(parents=True, exist_ok=True)

    async def work() -> bool:
        async with Engine.open(path) as engine:
            try:
                await engine.create_topic(args.topic, partitions=args.partitions, config=overrides or None)
            except TopicExistsError:
                if not args.if_not_exists:
                    raise
                return False
            return True

    if run_async(work()):
        note(f"created topic {args.topic} with {args.partitions} partition(s) in {path}")
    else:
        note(f"topic {args.topic} exists already")
    return EXIT_OK


def delete(args: argparse.Namespace) -> int:
    path = log_dir_of(args)

    async def work() -> bool:
        async with Engine.open(path) as engine:
            try:
                await engine.delete_topic(args.topic)
            except UnknownTopicOrPartitionError:
                if not args.if_exists:
                    raise
                return False
            return True

    if run_async(work()):
        note(f"deleted topic {args.topic} from {path}")
    else:
        note(f"no topic {args.topic}")
    return EXIT_OK


def _topics(info: offline.LogDirInfo) -> dict[str, list[offline.PartitionInfo]]:
    out: dict[str, list[offline.PartitionInfo]] = {}
    for p in info.partitions:
        out.setdefault(p.topic, []).append(p)
    return out


def list_topics(args: argparse.Namespace) -> int:
    info = offline.describe_log_dir(log_dir_of(args))
    topics = _topics(info)
    if args.json:
        print_json([{"topic": t, "partitions": len(ps), "size_bytes": sum(p.size_bytes for p in ps),
                     "log_end_offsets": sum(p.log_end_offset for p in ps)} for t, ps in topics.items()])
        return EXIT_OK
    for t in topics:
        print(t)
    return EXIT_OK


def _effective_config(overrides: dict[str, Any]) -> dict[str, str]:
    # offline hands over overrides only when they parsed; an unreadable topic.json gives {} (the defaults).
    return LogConfig.from_properties(overrides).to_properties()


def describe(args: argparse.Namespace) -> int:
    path: Path = log_dir_of(args)
    info = offline.describe_log_dir(path)
    topics = _topics(info)
    wanted = args.topics or list(topics)
    missing = [t for t in wanted if t not in topics]
    if missing:
        raise UnknownTopicOrPartitionError(f"unknown topic(s) in {path}: {', '.join(missing)}")
    if args.json:
        print_json([
            {"topic": t, "partitions": topics[t], "overrides": topics[t][0].overrides,
             "config": _effective_config(topics[t][0].overrides)}
            for t in wanted
        ])
        return EXIT_OK
    rows = [
        (t, p.partition, len(p.segments), p.size_bytes, p.log_start_offset, p.log_end_offset,
         "-" if p.recovery_point is None else p.recovery_point)
        for t in wanted for p in topics[t]
    ]
    print_table([Column("topic"), Column("partition", "right"), Column("segments", "right"),
                 Column("size bytes", "right"), Column("log start", "right"), Column("log end", "right"),
                 Column("recovery point", "right")], rows)
    if args.segments:
        print()
        seg_rows = [
            (t, p.partition, s.base_offset, "-" if s.next_base_offset is None else s.next_base_offset,
             s.size_bytes, "-" if s.index_bytes is None else s.index_bytes,
             "-" if s.time_index_bytes is None else s.time_index_bytes, s.log_path.name)
            for t in wanted for p in topics[t] for s in p.segments
        ]
        print_table([Column("topic"), Column("partition", "right"), Column("base offset", "right"),
                     Column("next base", "right"), Column("log bytes", "right"), Column("index bytes", "right"),
                     Column("timeindex bytes", "right"), Column("file")], seg_rows)
    for t in wanted:
        overrides = topics[t][0].overrides
        shown = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "none (engine defaults)"
        note(f"{t}: config overrides: {shown}")
    return EXIT_OK
