"""``seglog groups list|describe|reset|delete``: consumer groups — members, state, committed offsets, lag, resets.

Everything is read from the log directory's group store, without the lock
(:func:`seglog.engine.offline.group_store`): committed offsets (the same
ones Kafka clients commit over the wire and library consumers commit), and
each group's membership snapshot, which the engine's group coordinator
writes at every change. Membership lives only in a running engine (``seglog
serve`` or an application): when no engine holds the directory, no group
has active members, whatever the last snapshot said.

``reset`` computes the new positions (earliest, latest, a time, or an
offset) and, as ``kafka-consumer-groups --reset-offsets``, only prints them
unless ``--execute`` is given; like Kafka it refuses a group with active
members (stop its consumers first). ``reset --execute`` and ``delete`` take
the directory lock to commit.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seglog.engine import Engine, offline
from seglog.engine.errors import NonEmptyGroupError, UnknownTopicOrPartitionError
from seglog.tools._output import (
    EXIT_OK,
    Column,
    UsageError,
    add_command,
    add_json,
    add_log_dir,
    iso,
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
        help="list consumer groups, show members, committed offsets and lag, reset positions",
        description="Consumer groups of a log directory (library consumers and Kafka clients alike): members, "
        "state, committed offsets, lag, resets.",
        examples=[
            "seglog groups list --state --log-dir data",
            "seglog groups describe billing --log-dir data",
            "seglog groups reset billing --topic orders --to-datetime 2026-11-22T10:00:00Z --execute",
        ],
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    ls = add_command(sub, "list", help="list groups (with --state: state, members, lag)", func=list_groups,
                     examples=["seglog groups list --json --log-dir data",
                               "seglog groups list --state --log-dir data"])
    ls.add_argument("--state", action="store_true",
                    help="a table of each group's state, members, protocol and total lag")
    add_log_dir(ls)
    add_json(ls, "the group names (with --state: one object per group)")

    d = add_command(sub, "describe", help="state, members, and per partition the committed offset, lag and owner",
                    func=describe,
                    examples=["seglog groups describe billing --log-dir data",
                              "seglog groups describe billing --members --log-dir data"])
    d.add_argument("group", metavar="GROUP")
    d.add_argument("--members", action="store_true", help="one row per member (id, client, host, partitions)")
    add_log_dir(d)
    add_json(d, "one object per partition (with --members: per member)")

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


# -- what the store says ----------------------------------------------------------------------------


class _View:
    """The group store of a directory, and whether an engine holds the directory (so membership is live)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.image = offline.group_store(path)
        self.holder = offline.lock_holder(path)

    def names(self) -> list[str]:
        return sorted(set(self.image.offsets) | {g for g in self.image.snapshots if self._members(g)})

    def snapshot(self, group: str) -> dict[str, Any]:
        return self.image.snapshots.get(group) or {}

    def _members(self, group: str) -> list[dict[str, Any]]:
        if self.holder is None:
            return []  # no engine runs: nobody is a member, whatever the last snapshot said
        members = self.snapshot(group).get("members")
        return [m for m in members if isinstance(m, dict)] if isinstance(members, list) else []

    def members(self, group: str) -> list[dict[str, Any]]:
        return self._members(group)

    def state(self, group: str) -> str:
        if self.holder is None:
            return "Empty"
        state = self.snapshot(group).get("state")
        return state if isinstance(state, str) else "Empty"

    def owners(self, group: str) -> dict[tuple[str, int], dict[str, Any]]:
        """(topic, partition) -> the member the group's assignment gives it to."""
        out: dict[tuple[str, int], dict[str, Any]] = {}
        for member in self.members(group):
            for entry in member.get("assignment") or ():
                if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list):
                    for partition in entry[1]:
                        out[(str(entry[0]), int(partition))] = member
        return out

    def lag_rows(self, group: str) -> list[dict[str, Any]]:
        rows = []
        offsets = self.image.offsets.get(group, {})
        owners = self.owners(group)
        for tp in sorted(set(offsets) | set(owners)):
            topic, partition = tp
            committed = offsets.get(tp)
            owner = owners.get(tp, {})
            row: dict[str, Any] = {
                "topic": topic, "partition": partition, "committed": committed, "log_start_offset": None,
                "log_end_offset": None, "lag": None, "member_id": owner.get("member_id"),
                "client_id": owner.get("client_id"), "host": owner.get("client_host"),
            }
            try:
                info = offline.partition_info(self.path, topic, partition)
            except UnknownTopicOrPartitionError:
                rows.append(row)
                continue
            row["log_start_offset"], row["log_end_offset"] = info.log_start_offset, info.log_end_offset
            if committed is not None:
                row["lag"] = max(0, info.log_end_offset - max(committed, info.log_start_offset))
            rows.append(row)
        return rows

    def summary(self, group: str) -> str:
        snap = self.snapshot(group)
        if self.holder is None:
            return (f"group {group}: no engine holds {self.path}, so no member is active "
                    f"(generation {snap.get('generation', 0)})")
        members = self.members(group)
        who = f"pid {self.holder}" if self.holder else "another process"
        return (f"group {group}: {self.state(group)}, generation {snap.get('generation', 0)}, protocol "
                f"{snap.get('protocol') or '-'}, {len(members)} member(s) (as of {iso(snap.get('updated_ms'))}, "
                f"from the engine of {who})")

    def refuse_if_active(self, group: str, action: str) -> None:
        members = self.members(group)
        if members:
            raise NonEmptyGroupError(
                f"group {group!r} has {len(members)} active member(s) (state {self.state(group)}): {action} only a "
                "group without members; stop its consumers first (Kafka refuses the same)",
                "NON_EMPTY_GROUP",
            )


# -- the actions ----------------------------------------------------------------------------------


def list_groups(args: argparse.Namespace) -> int:
    view = _View(log_dir_of(args))
    names = view.names()
    if not args.state:
        if args.json:
            print_json(names)
        else:
            for name in names:
                print(name)
        return EXIT_OK
    rows = []
    for name in names:
        lags = [r["lag"] for r in view.lag_rows(name) if r["lag"] is not None]
        snap = view.snapshot(name)
        rows.append({"group": name, "state": view.state(name), "members": len(view.members(name)),
                     "protocol": (snap.get("protocol") or None) if view.holder is not None else None,
                     "lag": sum(lags) if lags else None})
    if args.json:
        print_json(rows)
        return EXIT_OK
    print_table([Column("group"), Column("state"), Column("members", "right"), Column("protocol"),
                 Column("lag", "right")],
                [(r["group"], r["state"], r["members"], _dash(r["protocol"]), _dash(r["lag"])) for r in rows])
    if view.holder is None:
        note(f"no engine holds {view.path}: no group has active members")
    return EXIT_OK


def describe(args: argparse.Namespace) -> int:
    path: Path = log_dir_of(args)
    view = _View(path)
    if args.group not in view.names():
        raise UnknownTopicOrPartitionError(f"group {args.group!r} has no committed offsets and no members in {path}")
    note(view.summary(args.group))
    if args.members:
        members = view.members(args.group)
        rows: list[dict[str, Any]] = [{"member_id": m.get("member_id"), "group_instance_id": m.get("group_instance_id"),
                 "client_id": m.get("client_id"), "host": m.get("client_host"),
                 "partitions": list(m.get("assignment") or [])} for m in members]
        if args.json:
            print_json(rows)
            return EXIT_OK
        print_table([Column("member"), Column("instance"), Column("client"), Column("host"), Column("partitions")],
                    [(r["member_id"], _dash(r["group_instance_id"]), r["client_id"], r["host"],
                      " ".join(f"{t}-{p}" for t, ps in r["partitions"] for p in ps) or "-") for r in rows])
        return EXIT_OK
    rows = view.lag_rows(args.group)
    if args.json:
        print_json(rows)
        return EXIT_OK
    print_table([Column("topic"), Column("partition", "right"), Column("committed", "right"),
                 Column("log end", "right"), Column("lag", "right"), Column("member"), Column("host"),
                 Column("client")],
                [(r["topic"], r["partition"], _dash(r["committed"]), _dash(r["log_end_offset"]), _dash(r["lag"]),
                  _dash(r["member_id"]), _dash(r["host"]), _dash(r["client_id"])) for r in rows])
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
    view = _View(path)
    view.refuse_if_active(args.group, "offsets can be reset for")
    partitions = [p.partition for p in offline.describe_log_dir(path, topic=args.topic).partitions]
    if not partitions:
        raise UnknownTopicOrPartitionError(f"unknown topic {args.topic!r} in {path}")
    previous = view.image.offsets.get(args.group, {})
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
    _View(path).refuse_if_active(args.group, "one can delete")

    async def work() -> bool:
        async with Engine.open(path) as engine:
            return await engine.delete_group(args.group)

    if not run_async(work()):
        raise UnknownTopicOrPartitionError(f"group {args.group!r} has no committed offsets in {path}")
    note(f"deleted group {args.group}")
    return EXIT_OK
