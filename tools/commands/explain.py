"""``seglog explain TOPIC PARTITION --offset N | --timestamp T``: show how a lookup finds its answer.

A thin shell over :func:`seglog.engine.offline.explain_offset` / ``explain_timestamp``
(read-only, straight from the files): the segment chosen, the index slots the
search probed and the entry it settled on, the batches scanned from there and
the bytes read, and the result.
"""

from __future__ import annotations

import argparse
from typing import Any

from seglog.engine import offline
from seglog.tools._output import EXIT_OK, add_command, add_json, add_log_dir, iso, log_dir_of, print_json, time_arg


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "explain",
        help="show the lookup path of an offset or a timestamp: segment, index entries, bytes scanned",
        description="Explain how a read at an offset, or a lookup by timestamp (offset_for_timestamp), "
        "finds its record: the segment chosen, the index slots probed, the batches scanned and the result.",
        examples=[
            "seglog explain orders 0 --offset 1234 --log-dir data",
            "seglog explain orders 0 --timestamp 2026-11-22T10:00:00Z --json",
        ],
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("partition", type=int, metavar="PARTITION")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--offset", type=int, metavar="N", help="explain a read at offset N")
    target.add_argument("--timestamp", type=time_arg, metavar="T",
                        help="explain the lookup of the earliest offset whose timestamp is >= T "
                        "(ISO 8601 or epoch ms)")
    add_log_dir(p)
    add_json(p, "the explanation")
    p.set_defaults(func=run)


def _probes(probes: list[offline.IndexProbe], what: str) -> str:
    return ", ".join(f"slot {p.slot} ({what} {p.key})" for p in probes) or "none"


def run(args: argparse.Namespace) -> int:
    path = log_dir_of(args)
    if args.offset is not None:
        ex = offline.explain_offset(path, args.topic, args.partition, args.offset)
    else:
        ex = offline.explain_timestamp(path, args.topic, args.partition, args.timestamp)
    if args.json:
        print_json(ex)
        return EXIT_OK
    target = f"offset {ex.value}" if ex.target == "offset" else f"timestamp {ex.value} ({iso(ex.value)})"
    print(f"lookup:        {target} in {ex.topic}-{ex.partition} (log start {ex.log_start_offset}, "
          f"log end {ex.log_end_offset})")
    for base, largest in ex.segments_considered:
        verdict = "chosen" if base == ex.segment_base_offset else "skipped: all timestamps are below the target"
        print(f"segment tried: {base:020d}.log, largest timestamp {largest} ({iso(largest)}): {verdict}")
    if ex.segment_path is None:
        print(f"result:        {ex.message}")
        return EXIT_OK
    print(f"segment:       {ex.segment_path} (base offset {ex.segment_base_offset})")
    if ex.time_index_entry is not None:
        print(f"time index:    probed {_probes(ex.time_index_probes, 'timestamp')} -> entry "
              f"(timestamp {ex.time_index_entry.timestamp}, offset {ex.time_index_entry.offset})")
    if ex.offset_index_entry is not None:
        print(f"offset index:  {ex.index_entries} entries; looking up offset {ex.offset_index_target}, probed "
              f"{_probes(ex.offset_index_probes, 'offset')} -> entry (offset {ex.offset_index_entry.offset}, "
              f"position {ex.offset_index_entry.position})")
    print(f"scan:          from position {ex.scan_start_position}: {len(ex.batches_scanned)} batch(es), "
          f"{ex.bytes_scanned} bytes")
    for position, base, last, max_ts in ex.batches_scanned:
        print(f"               batch @{position}: offsets {base}..{last}, max timestamp {max_ts}")
    if ex.result_offset is None:
        print("result:        no record" + (" at or after the target" if ex.target == "timestamp" else ""))
    else:
        print(f"result:        offset {ex.result_offset}, timestamp {ex.result_timestamp} "
              f"({iso(ex.result_timestamp)}), in the batch at position {ex.result_position}")
    return EXIT_OK
