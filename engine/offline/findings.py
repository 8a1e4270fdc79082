"""What the offline checks report: a :class:`Finding` per problem, with its :class:`Severity` and :class:`Check`.

Must not import: ``tools``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["INDEX_HINT", "LOG_HINT", "Check", "Finding", "Severity"]

INDEX_HINT: Final = "indexes are rebuilt from the .log on open, or run 'seglog recover DIR'"
LOG_HINT: Final = "recovery truncates the segment here ('seglog recover DIR')"


class Severity(enum.StrEnum):
    """How bad a :class:`Finding` is. ``verify`` fails (exit 1) on errors and warnings."""

    ERROR = "error"  # bytes are wrong or inconsistent: recovery would cut or rebuild something
    WARNING = "warning"  # consistent but not what seglog leaves behind (stray files, gaps, stale checkpoints)
    INFO = "info"  # normal for a running or crashed engine (preallocated index slots of the active segment)


class Check(enum.StrEnum):
    """What a finding is about: stable names for scripts and ``--json`` output."""

    DIRECTORY = "directory"  # the log directory or a partition directory itself
    FILE_NAME = "file-name"  # a segment file whose name is not a 20-digit base offset
    TOPIC_FILE = "topic-file"  # <topic>-<p>/topic.json
    CHECKPOINT = "checkpoint"  # recovery-point / log-start-offset checkpoint files
    GROUP_FILE = "group-file"  # consumer-offsets/offsets.log (and the older <group>.json files)
    BATCH = "batch"  # an invalid batch (magic, length, CRC, offsets): it and all after it would be cut
    TORN_TAIL = "torn-tail"  # the last batch (or its header) is cut short: a torn write
    ZERO_TAIL = "zero-tail"  # preallocated zero bytes after the last batch
    OFFSETS = "offsets"  # offsets out of order, overlapping or missing between segments
    RECORDS = "records"  # record-level problems found by deep iteration
    OFFSET_INDEX = "offset-index"
    TIME_INDEX = "time-index"
    TXN_INDEX = "txn-index"
    SNAPSHOT = "snapshot"  # a producer-state <offset>.snapshot that does not decode or is not where one belongs
    INDEX_SIZE = "index-size"  # index length not a whole number of entries, or untrimmed slots
    ORPHAN = "orphan"  # an index file without its .log
    MISSING_INDEX = "missing-index"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (or note) found in one file: where it is, which offsets, what is wrong."""

    severity: Severity
    check: Check
    path: Path
    message: str
    position: int | None = None  # byte position in ``path`` (a batch start, an index slot's byte)
    offset: int | None = None  # the offset involved, when there is one

    def __str__(self) -> str:
        where = f"{self.path}" if self.position is None else f"{self.path} @{self.position}"
        at = "" if self.offset is None else f" (offset {self.offset})"
        return f"{self.severity.value} [{self.check.value}] {where}{at}: {self.message}"
