"""seglog's segment layer: one ``.log`` file of record batches with its indexes.

Owns: the record-batch format (``seglog.segments.batch``: framing, CRC-32C, msgpack
bodies; ``docs/FORMAT.md``), the ``Record`` value (``seglog.segments.records``), the
async file layer (``seglog.segments.fileio``, the only module that talks to
``aiofiles``) with its fault-injection seam (``seglog.segments.faults``),
the names of segment files and the one listing of a partition directory
(``seglog.segments.files``), the one reader of a ``.log`` that every scan uses
(``seglog.segments.reader``: recovery, index rebuilds, the follower, the offline
tools), ``LogSegment`` and ``LogSegments`` (``seglog.segments.segment``: append, read, time
lookup, roll decisions, recovery, truncation), the columnar bulk decode
(``seglog.segments.columns``), and the optional C loops of the codec
(``seglog.segments._speedups``, built from ``_speedups.c``; ``seglog.segments.batch`` is its reference).

Must not import: ``engine`` or ``tools``. Segments know nothing of topics,
partitions or clocks: roll parameters, ``now_ms`` and the index interval arrive
as arguments.
"""

from seglog.segments.batch import (
    BatchHeader,
    ScanResult,
    ScanStop,
    TimestampType,
    decode_batches,
    encode_batch,
    read_header,
    rebase_batch,
    scan_batches,
)
from seglog.segments.errors import CorruptRecordError, RecordTooLargeError, SegmentOffsetOverflowError
from seglog.segments.files import filename_prefix
from seglog.segments.records import Header, Record
from seglog.segments.segment import (
    FetchData,
    LocatedBatch,
    LogOffsetMetadata,
    LogSegment,
    LogSegments,
    RollParams,
)

__all__ = [
    "BatchHeader",
    "CorruptRecordError",
    "FetchData",
    "Header",
    "LocatedBatch",
    "LogOffsetMetadata",
    "LogSegment",
    "LogSegments",
    "Record",
    "RecordTooLargeError",
    "RollParams",
    "ScanResult",
    "ScanStop",
    "SegmentOffsetOverflowError",
    "TimestampType",
    "decode_batches",
    "encode_batch",
    "filename_prefix",
    "read_header",
    "rebase_batch",
    "scan_batches",
]
