"""The errors of the Kafka front end; each carries the Kafka error code a client is answered with.

They join seglog's tree under :class:`~seglog.engine.errors.SeglogError`::

    SeglogError
    └── KafkaProtocolError          (server) a request or record batch that breaks Kafka's protocol
        ├── FrameError              a frame size out of bounds, or a request that cannot be decoded:
        │                           the connection is closed (no answer can be matched to it)
        ├── CorruptBatchError       a record batch failing its length, CRC or record checks (CORRUPT_MESSAGE)
        ├── InvalidBatchError       a well-formed batch seglog refuses (INVALID_RECORD)
        ├── BatchTimestampError     a record timestamp below -1 (INVALID_TIMESTAMP)
        ├── BatchTooLargeError      records over what a stored batch may hold uncompressed (MESSAGE_TOO_LARGE)
        └── UnsupportedCompressionError  a compression codec outside gzip/snappy/lz4/zstd

The numeric codes are Kafka's (``org.apache.kafka.common.protocol.Errors``);
they are plain ints here so that the record codec needs no protocol library.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import ClassVar, Final

from seglog.engine.errors import SeglogError

__all__ = [
    "CORRUPT_MESSAGE",
    "INVALID_RECORD",
    "INVALID_TIMESTAMP",
    "UNSUPPORTED_COMPRESSION_TYPE",
    "BatchTimestampError",
    "BatchTooLargeError",
    "CorruptBatchError",
    "FrameError",
    "InvalidBatchError",
    "KafkaProtocolError",
    "UnsupportedCompressionError",
]

# Kafka's error codes (org.apache.kafka.common.protocol.Errors), part of the wire protocol.
UNKNOWN_SERVER_ERROR: Final = -1
CORRUPT_MESSAGE: Final = 2
MESSAGE_TOO_LARGE: Final = 10
INVALID_REQUEST: Final = 42
INVALID_TIMESTAMP: Final = 32
UNSUPPORTED_COMPRESSION_TYPE: Final = 76
INVALID_RECORD: Final = 87


class KafkaProtocolError(SeglogError):
    """A request or record batch that breaks Kafka's protocol; ``error_code`` is Kafka's answer to it."""

    error_code: ClassVar[int] = INVALID_REQUEST


class FrameError(KafkaProtocolError):
    """A frame that cannot be served: a size out of bounds, a header or body that does not decode.

    No response can be matched to such a frame, so the connection is closed
    (Kafka's broker does the same); the client reconnects.
    """


class CorruptBatchError(KafkaProtocolError):
    """A record batch whose lengths, CRC-32C, record count or offset deltas are wrong."""

    error_code = CORRUPT_MESSAGE


class InvalidBatchError(KafkaProtocolError):
    """A well-formed record batch that seglog does not accept (old magic, control batch, null header value...)."""

    error_code = INVALID_RECORD


class BatchTimestampError(KafkaProtocolError):
    """A record timestamp below -1 (Kafka's ``NO_TIMESTAMP``); seglog stores only timestamps >= 0."""

    error_code = INVALID_TIMESTAMP


class BatchTooLargeError(KafkaProtocolError):
    """A compressed batch whose records exceed what a stored batch may hold uncompressed (64 MiB)."""

    error_code = MESSAGE_TOO_LARGE


class UnsupportedCompressionError(KafkaProtocolError):
    """A batch compressed with a codec other than gzip, snappy, lz4 or zstd."""

    error_code = UNSUPPORTED_COMPRESSION_TYPE
