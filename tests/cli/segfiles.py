"""Build seglog log directories byte by byte, without an Engine, for inspection and CLI tests.

Segments are written with ``seglog.segments.batch.encode_batch`` and the index classes,
following the segment layer's index rule (an entry when more than
``index_interval`` bytes were appended since the last one, checked before the
batch; the final time-index entry at close), so a directory built here is what
a cleanly closed engine leaves behind. The byte-editing helpers then damage it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, format_checkpoint
from seglog.indexes import OffsetIndex, TimeIndex
from seglog.segments.batch import TimestampType, encode_batch
from seglog.segments.records import Record

T0 = 1_763_800_000_000  # 2025-11-22T08:26:40Z, a fixed base timestamp in ms


def records(n: int, *, ts: int = T0, step: int = 10, key: bytes | None = None, prefix: str = "v") -> list[Record]:
    """``n`` records with values ``v0, v1, ...`` and timestamps ``ts, ts+step, ...``."""
    return [Record(f"{prefix}{i}".encode(), key, ts + i * step, ()) for i in range(n)]


def write_segment(
    directory: Path,
    base_offset: int,
    batches: Sequence[Sequence[Record]],
    *,
    index_interval: int = 0,
    max_index_size: int = 4096,
) -> int:
    """Write one segment (``.log``, ``.index``, ``.timeindex``) starting at ``base_offset``; returns its next offset."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"{base_offset:020d}"
    offset, position, since = base_offset, 0, 0
    max_ts, max_ts_offset = -1, base_offset
    oidx = OffsetIndex(f"{stem}.index", base_offset, max_index_size)
    tidx = TimeIndex(f"{stem}.timeindex", base_offset, max_index_size)
    try:
        with open(f"{stem}.log", "wb") as log:
            for recs in batches:
                data = encode_batch(offset, list(recs), timestamp_type=TimestampType.CREATE_TIME, now_ms=T0)
                last = offset + len(recs) - 1
                batch_max = max(r.timestamp or T0 for r in recs)
                if batch_max > max_ts:
                    max_ts, max_ts_offset = batch_max, last
                if since > index_interval:
                    oidx.append(last, position)
                    tidx.maybe_append(max_ts, max_ts_offset)
                    since = 0
                since += len(data)
                log.write(data)
                position += len(data)
                offset = last + 1
        if max_ts >= 0:
            tidx.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
    finally:
        oidx.close()
        tidx.close()
    return offset


def write_partition(
    log_dir: Path,
    topic: str,
    partition: int,
    segments: Sequence[Sequence[Sequence[Record]]],
    *,
    partitions: int = 1,
    index_interval: int = 0,
    config: dict[str, object] | None = None,
) -> tuple[Path, list[int]]:
    """Write a partition directory whose segments follow on; returns (directory, base offsets)."""
    directory = log_dir / f"{topic}-{partition}"
    directory.mkdir(parents=True, exist_ok=True)
    meta = {"version": 1, "topic": topic, "partition": partition, "partitions": partitions, "config": config or {}}
    (directory / "topic.json").write_text(json.dumps(meta))
    bases, offset = [], 0
    for batches in segments:
        bases.append(offset)
        offset = write_segment(directory, offset, batches, index_interval=index_interval)
    return directory, bases


def write_checkpoints(log_dir: Path, ends: dict[tuple[str, int], int], starts: dict[tuple[str, int], int] | None = None,
                      *, clean: bool = True) -> None:
    """Write both checkpoint files and (``clean``) the clean-shutdown marker, as a clean close does."""
    (log_dir / RECOVERY_POINT_CHECKPOINT).write_bytes(format_checkpoint(ends))
    (log_dir / LOG_START_OFFSET_CHECKPOINT).write_bytes(format_checkpoint(starts or dict.fromkeys(ends, 0)))
    if clean:
        (log_dir / ".clean-shutdown").write_bytes(b"")


def simple_log_dir(log_dir: Path, *, clean: bool = True) -> Path:
    """``orders`` with 2 partitions: partition 0 has 3 segments of 4 batches x 3 records; partition 1 one segment."""
    seg = lambda k: [records(3, ts=T0 + (k * 4 + b) * 100) for b in range(4)]  # noqa: E731
    write_partition(log_dir, "orders", 0, [seg(0), seg(1), seg(2)], partitions=2)
    write_partition(log_dir, "orders", 1, [[records(2)]], partitions=2)
    write_checkpoints(log_dir, {("orders", 0): 36, ("orders", 1): 2}, clean=clean)
    return log_dir


def flip_byte(path: Path, position: int) -> None:
    """Invert the byte at ``position`` (a bit-rot stand-in)."""
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0xFF]))


def truncate(path: Path, size: int) -> None:
    os.truncate(path, size)


def append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
