"""Read-only, offline views of a log directory: describe, dump, verify, explain, reads, and bulk reads by range.

Owns the logic behind ``seglog dump``, ``verify``,
``explain``, ``topics``/``offsets``/``consume``/``groups`` on a directory (the
command line only prints what this package returns), and the planning and
range scans of bulk readers (the Spark source): everything that reads a log
directory's files without an ``Engine``.

Everything here is synchronous and works on the files directly: it takes no
lock, opens every file read-only, writes nothing, and trusts no byte it reads.
Every ``.log`` is read by the one segment reader (``seglog.segments.reader``,
the rules recovery applies too) and every partition directory is listed by
``seglog.segments.files``, so an offline answer never disagrees with the
engine's about what a file holds. A damaged file is a :class:`Finding` for
``verify`` and ``dump``; for a read, a batch that fails a check in a sealed
segment (or before the log end) is a ``CorruptRecordError``, never an end to
stop at quietly, and never records from the wrong place. Every scan is bounded
by the file's size (taken once, when the file is opened, so a file that grows
meanwhile is read up to that size), and every batch by the topic's largest
batch size before anything is allocated. Files are read with ``pread`` rather
than mmap'd: a live engine may truncate a file under us, which turns an mmap
access into SIGBUS but a ``pread`` only into a short read.

Inspecting a directory an engine has open is allowed and safe, but racy by
nature: the active segment may show a torn tail that is simply an append in
flight, and its indexes are preallocated (zero slots) until the engine closes.

Modules: ``listing`` (partitions, segments, topic.json, checkpoints, groups,
opening a ``.log``), ``segment_scan`` (one ``.log`` scanned, its tail, the log
end), ``indexes`` (index files read raw and checked), ``snapshots`` (producer-state
snapshots decoded and checked), ``findings``, ``dump``,
``describe``, ``verify``, ``explain``, ``reads`` and ``ranges`` (bulk reads),
``transactions`` (a partition's last stable offset and aborted transactions, for
``read_committed`` bulk reads).
The recovery plan (``seglog recover --dry-run``) is not here: it is the open's
own, ``seglog.engine.loader.dry_run_recovery``, which scans with this
package's :func:`scan_segment`.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log`` /
``seglog.engine.loader`` (it must work on directories an engine would refuse,
and without an event loop; the loader imports this package).
"""

from seglog.engine.offline.describe import (
    LogDirInfo,
    PartitionInfo,
    describe_log_dir,
    describe_partition,
    partition_info,
)
from seglog.engine.offline.dump import BatchInfo, dump_log
from seglog.engine.offline.explain import (
    IndexProbe,
    LookupExplanation,
    explain_offset,
    explain_timestamp,
    offset_for_timestamp,
)
from seglog.engine.offline.findings import Check, Finding, Severity
from seglog.engine.offline.indexes import (
    IndexDump,
    TxnIndexDump,
    dump_index,
    dump_txn_index,
    index_sanity_check,
    verify_index_against_log,
)
from seglog.engine.offline.listing import (
    SegmentInfo,
    group_offsets,
    group_store,
    list_partitions,
    list_segments,
    lock_holder,
    log_start_offsets,
    max_batch_bytes_for,
    partition_path,
)
from seglog.engine.offline.ranges import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_ROWS_PER_CHUNK,
    NO_END,
    Bounds,
    ColumnBuffers,
    PartitionPlan,
    RecordColumns,
    SegmentRange,
    TraceHook,
    append_trace,
    log_end_offset,
    plan_partition,
    scan_range,
    scan_range_buffers,
)
from seglog.engine.offline.reads import read_records
from seglog.engine.offline.segment_scan import SegmentScan, TailKind, scan_segment
from seglog.engine.offline.snapshots import SnapshotDump, dump_snapshot, list_snapshots
from seglog.engine.offline.transactions import PartitionTransactions, partition_transactions
from seglog.engine.offline.verify import VerifyProgress, VerifyReport, verify
from seglog.segments.files import (
    INDEX_SUFFIX,
    LEFTOVER_SUFFIXES,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    base_offset_of,
    segment_file_name,
)

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_ROWS_PER_CHUNK",
    "INDEX_SUFFIX",
    "LEFTOVER_SUFFIXES",
    "LOG_SUFFIX",
    "NO_END",
    "SEGMENT_SUFFIXES",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "BatchInfo",
    "Bounds",
    "Check",
    "ColumnBuffers",
    "Finding",
    "IndexDump",
    "IndexProbe",
    "LogDirInfo",
    "LookupExplanation",
    "PartitionInfo",
    "PartitionPlan",
    "PartitionTransactions",
    "RecordColumns",
    "SegmentInfo",
    "SegmentRange",
    "SegmentScan",
    "Severity",
    "SnapshotDump",
    "TailKind",
    "TraceHook",
    "TxnIndexDump",
    "VerifyProgress",
    "VerifyReport",
    "append_trace",
    "base_offset_of",
    "describe_log_dir",
    "describe_partition",
    "dump_index",
    "dump_log",
    "dump_snapshot",
    "dump_txn_index",
    "explain_offset",
    "explain_timestamp",
    "group_offsets",
    "group_store",
    "index_sanity_check",
    "list_partitions",
    "list_segments",
    "list_snapshots",
    "lock_holder",
    "log_end_offset",
    "log_start_offsets",
    "max_batch_bytes_for",
    "offset_for_timestamp",
    "partition_info",
    "partition_path",
    "partition_transactions",
    "plan_partition",
    "read_records",
    "scan_range",
    "scan_range_buffers",
    "scan_segment",
    "segment_file_name",
    "verify",
    "verify_index_against_log",
]
