"""``seglog dump FILE|DIR...``: print batches, records and index entries, like ``kafka-dump-log``.

A partition directory stands for its segment files, segment by segment (``.log``,
``.index``, ``.timeindex``, ``.txnindex``), each producer-state snapshot before
the segment starting at its offset; a log directory is refused with a
pointer to ``verify``. Dispatch by suffix: ``.log`` (batch headers with their
producer fields and transactional/control bits; records with ``--print-data`` or
``--deep-iteration``), ``.index`` / ``.timeindex`` (entries, then a check of
every entry against the ``.log`` beside it), ``.txnindex`` (aborted
transactions), ``.snapshot`` (the producers of a producer-state snapshot).
Read-only; a damaged file is reported, not fatal. Exit 1 when a problem (torn
tail, non-consecutive offsets, index mismatch, a snapshot that does not decode) was found.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from seglog.engine import offline
from seglog.engine.names import is_partition_dir_name
from seglog.engine.offline import Finding, Severity
from seglog.segments.kafka_batch import CODEC_NAMES
from seglog.tools._output import (
    EXIT_FINDINGS,
    EXIT_OK,
    UsageError,
    add_command,
    add_json,
    iso,
    note,
    print_json,
    text_of,
)

DESCRIPTION = (
    "Print what a segment file holds, like kafka-dump-log: batch headers of a .log (records with "
    "--print-data), the entries of a .index/.timeindex (checked against the .log beside it) or a .txnindex, "
    "the producers of a .snapshot. A partition directory dumps each of its segments' files in offset order."
)


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "dump",
        help="print batches, records and index entries of segment files (kafka-dump-log)",
        description=DESCRIPTION,
        examples=[
            "seglog dump data/orders-0/00000000000000000000.log --print-data",
            "seglog dump data/orders-0",
            "seglog dump data/orders-0/*.index --verify-index-only",
            "seglog dump data/orders-0/00000000000000000042.snapshot",
            "seglog dump data/orders-0/00000000000000000000.log --json | jq '.files[0].batches | length'",
        ],
    )
    p.add_argument("files", nargs="+", metavar="FILE|DIR",
                   help=".log, .index, .timeindex, .txnindex or .snapshot files, or partition directories "
                        "(DIR/orders-0)")
    p.add_argument("--print-data", action="store_true", help="print each record's key, value and headers")
    p.add_argument("--deep-iteration", action="store_true",
                   help="iterate the records inside batches and report non-consecutive offsets")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run the index checks that need no .log (size, order, base offset)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the .log without printing them")
    p.add_argument("--max-bytes", type=int, default=None, metavar="N",
                   help="stop before the first batch at or beyond byte N of a .log")
    add_json(p, "one document with every file's batches, entries and findings")
    p.set_defaults(func=run)


# What a batch's magic byte says it is: seglog's own format, or a Kafka batch stored by the wire server.
_FORMATS: Final = {0x54: "seglog", 2: "kafka"}


def _codec(h: Any) -> str:
    """The compression codec of a batch (seglog's are never compressed; a Kafka batch's stay as produced)."""
    return CODEC_NAMES.get(h.attributes & 0x07, str(h.attributes & 0x07))


def _batch_dict(b: offline.BatchInfo) -> dict[str, Any]:
    h = b.header
    out: dict[str, Any] = {
        "position": b.position, "base_offset": h.base_offset, "last_offset": h.last_offset,
        "count": h.record_count, "size": h.size, "magic": h.magic, "crc": h.crc, "attributes": h.attributes,
        "format": _FORMATS.get(h.magic, str(h.magic)), "compression": _codec(h),
        "timestamp_type": "LogAppendTime" if h.timestamp_type else "CreateTime",
        "base_timestamp": h.base_timestamp, "max_timestamp": h.max_timestamp,
        "producer_id": h.producer_id, "producer_epoch": h.producer_epoch, "base_sequence": h.base_sequence,
        "is_transactional": h.is_transactional, "is_control": h.is_control,
        "partition_leader_epoch": h.partition_leader_epoch,
    }
    if h.is_control:
        out["control"] = None if b.marker is None else {
            "type": "COMMIT" if b.marker.commit else "ABORT", "coordinator_epoch": b.marker.coordinator_epoch}
    if b.records is not None:
        out["records"] = [
            {"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
             "headers": [[k, v] for k, v in r.headers]}
            for r in b.records
        ]
    return out


def _batch_line(b: offline.BatchInfo) -> str:
    h = b.header
    marker = ""
    if b.marker is not None:  # as kafka-dump-log prints a control record
        marker = f" endTxnMarker: {'COMMIT' if b.marker.commit else 'ABORT'} coordinatorEpoch: " \
                 f"{b.marker.coordinator_epoch}"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
        f"position: {b.position} size: {h.size} {'LogAppendTime' if h.timestamp_type else 'CreateTime'}: "
        f"{h.max_timestamp} ({iso(h.max_timestamp)}) baseTimestamp: {h.base_timestamp} "
        f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} baseSequence: {h.base_sequence} "
        f"magic: {h.magic} compresscodec: {_codec(h)} crc: {h.crc:#010x} isvalid: true{marker}"
    )


def _record_line(r: Any, data: bool) -> str:
    line = f"| offset: {r.offset} timestamp: {r.timestamp} keySize: {-1 if r.key is None else len(r.key)} " \
           f"valueSize: {-1 if r.value is None else len(r.value)} headerKeys: [{','.join(k for k, _ in r.headers)}]"
    if data:
        line += f" key: {text_of(r.key)} payload: {text_of(r.value)}"
    return line


def _dump_log(path: Path, args: argparse.Namespace, findings: list[Finding], doc: dict[str, Any] | None) -> None:
    deep = args.print_data or args.deep_iteration
    batches: list[dict[str, Any]] = []
    for b in offline.dump_log(path, records=deep, max_bytes=args.max_bytes, findings=findings):
        if doc is not None:
            batches.append(_batch_dict(b))
            continue
        print(_batch_line(b))
        for r in b.records or ():
            print(_record_line(r, args.print_data))
    if doc is not None:
        doc["batches"] = batches


def _dump_index(path: Path, args: argparse.Namespace, findings: list[Finding], doc: dict[str, Any] | None) -> None:
    log = path.with_suffix(offline.LOG_SUFFIX)
    active = not args.index_sanity_check and _is_last_segment(log)
    sanity = offline.index_sanity_check(path, active=active)
    findings.extend(sanity)
    if args.index_sanity_check:
        if not any(f.severity is Severity.ERROR for f in sanity):
            note(f"{path} passed sanity check.")
        return
    dump = offline.dump_index(path)
    if not args.verify_index_only:
        if doc is not None:
            doc["entries"] = [e._asdict() for e in dump.entries]
            doc["zero_slots"] = dump.zero_slots
        else:
            for a, b in dump.entries:
                print(f"timestamp: {a} offset: {b}" if dump.kind == "time" else f"offset: {a} position: {b}")
    if not log.exists():
        note(f"{path}: no {log.name} beside it; entries not checked against the log")
        return
    if not any(f.severity is Severity.ERROR for f in sanity):
        scan = offline.scan_segment(log, max_batch_bytes=offline.max_batch_bytes_for(log.parent),
                                    base_offset=dump.base_offset, keep_batches=True)
        findings.extend(offline.verify_index_against_log(dump, scan, active=active))


def _is_last_segment(log: Path) -> bool:
    base = offline.base_offset_of(log)
    if base is None or not log.parent.is_dir():
        return False
    return all(s.base_offset <= base for s in offline.list_segments(log.parent))


def _dump_txn(path: Path, doc: dict[str, Any] | None) -> None:
    dump = offline.dump_txn_index(path)
    if doc is not None:
        doc["entries"] = [t._asdict() for t in dump.entries]
        return
    for t in dump.entries:
        print(f"version: 0 producerId: {t.producer_id} firstOffset: {t.first_offset} "
              f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")


def _dump_snapshot(path: Path, findings: list[Finding], doc: dict[str, Any] | None) -> None:
    dump = offline.dump_snapshot(path)
    if dump.problem is not None:
        findings.append(Finding(Severity.ERROR, offline.Check.SNAPSHOT, path,
                                f"does not decode ({dump.problem}); the engine deletes it and rebuilds the producer "
                                "state from the log", offset=dump.offset))
    if doc is not None:
        doc["offset"] = dump.offset
        doc["producers"] = [
            {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
             "coordinator_epoch": e.coordinator_epoch, "current_txn_first_offset": e.current_txn_first_offset,
             "last_timestamp": e.last_timestamp,
             "batches": [{"first_sequence": b.first_seq, "last_sequence": b.last_seq, "first_offset": b.first_offset,
                          "last_offset": b.last_offset, "offset_delta": b.offset_delta, "timestamp": b.timestamp}
                         for b in e.batches]}
            for e in dump.entries
        ]
        return
    for e in dump.entries:
        txn = "None" if e.current_txn_first_offset is None else e.current_txn_first_offset
        print(f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: "
              f"{e.coordinator_epoch} currentTxnFirstOffset: {txn} lastTimestamp: {e.last_timestamp}")
        for b in e.batches:
            print(f"| firstSequence: {b.first_seq} lastSequence: {b.last_seq} firstOffset: {b.first_offset} "
                  f"lastOffset: {b.last_offset} offsetDelta: {b.offset_delta} timestamp: {b.timestamp}")


def _segment_files(name: str) -> list[Path]:
    """The files ``name`` stands for: itself, or every segment file and snapshot of a partition directory.

    Raises:
        UsageError: no such file or directory, a log directory, or a directory holding no segment.
    """
    path = Path(name)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(f"{path}: no such file or directory")
    segments = offline.list_segments(path)
    if segments:
        # A snapshot holds the state up to its offset: it goes before the segment starting there.
        by_offset = [(offset, 0, snap) for offset, snap in offline.list_snapshots(path)]
        by_offset += [(seg.base_offset, 1, f) for seg in segments for suffix in offline.SEGMENT_SUFFIXES
                      if (f := seg.sibling(suffix)).is_file()]
        return [f for _, _, f in sorted(by_offset, key=lambda t: t[:2])]
    partitions = sorted(child.name for child in path.iterdir() if is_partition_dir_name(child.name) and child.is_dir())
    if partitions:
        raise UsageError(
            f"{path} is a log directory; dump takes a partition directory (such as {path / partitions[0]}) "
            f"or segment files. To check the whole directory: seglog verify {path}"
        )
    raise UsageError(f"{path}: the directory holds no segment files; give a partition directory or segment files")


def run(args: argparse.Namespace) -> int:
    files: list[dict[str, Any]] = []
    all_findings: list[Finding] = []
    paths = [path for name in args.files for path in _segment_files(name)]  # every argument checked first
    for path in paths:
        findings: list[Finding] = []
        doc: dict[str, Any] | None = {"path": str(path)} if args.json else None
        kind = path.name.split(".", 1)[-1]
        if not args.json:
            note(f"Dumping {path}")
        if kind.startswith("log"):
            _dump_log(path, args, findings, doc)
        elif kind.startswith(("index", "timeindex")):
            _dump_index(path, args, findings, doc)
        elif kind.startswith("txnindex"):
            _dump_txn(path, doc)
            findings.extend(offline.index_sanity_check(path))
        elif kind == "snapshot":
            _dump_snapshot(path, findings, doc)
        else:
            note(f"Ignoring unknown file {path}")
            continue
        if doc is not None:
            doc["kind"] = kind
            doc["findings"] = findings
            files.append(doc)
        else:
            for f in findings:
                note(str(f))
        all_findings.extend(findings)
    if args.json:
        print_json({"files": files})
    failed = any(f.severity is not Severity.INFO for f in all_findings)
    return EXIT_FINDINGS if failed else EXIT_OK
