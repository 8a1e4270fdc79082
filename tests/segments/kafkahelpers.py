"""Kafka RecordBatch v2 (magic 2) batches for tests of the segment layer: as a producer sends them, any codec."""

from __future__ import annotations

import gzip
import struct

import cramjam
import google_crc32c

from seglog.segments.records import Record
from seglog.server.records import encode_batch

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_COMPRESS = {
    1: gzip.compress,
    2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
    3: lambda b: bytes(cramjam.lz4.compress(b)),
    4: lambda b: bytes(cramjam.zstd.compress(b)),
}


def kafka_batch(base_offset: int, records: list[Record], codec: str = "none") -> bytes:
    """A RecordBatch v2 of ``records`` (offsets follow from ``base_offset``), its records compressed with ``codec``."""
    plain = encode_batch([r._replace(offset=base_offset + i) for i, r in enumerate(records)], leader_epoch=-1)
    code = CODECS[codec]
    if code == 0:
        return plain
    body = _COMPRESS[code](plain[61:])
    head = bytearray(plain[:61])
    struct.pack_into(">i", head, 8, 49 + len(body))
    struct.pack_into(">h", head, 21, code)
    return reseal(bytes(head) + body)


def reseal(batch: bytes | bytearray) -> bytes:
    """``batch`` with its CRC-32C computed again (after a test changed bytes it covers)."""
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, google_crc32c.value(bytes(out[21:])))
    return bytes(out)


def records_of(n: int, start_ts: int = 1_000, value: bytes = b"v") -> list[Record]:
    """``n`` records with distinct keys, values and increasing timestamps (and a header on every other one)."""
    return [
        Record(value + str(i).encode(), f"k{i}".encode(), start_ts + i, (("h", b"x"),) if i % 2 else ())
        for i in range(n)
    ]
