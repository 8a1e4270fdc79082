"""Topic names and partition directory names, checked before they touch the file system.

Kafka's rules (``org.apache.kafka.common.internals.Topic``): 1 to 249 characters
from ``[A-Za-z0-9._-]``, and not ``.`` or ``..``. Because those characters hold
no path separator and the two dot names are refused, a valid topic name can
never escape the log directory. A partition lives in ``<topic>-<partition>``.

Must not import: ``tools``.
"""

from __future__ import annotations

import re
import uuid
from typing import Final

from seglog.engine.errors import InvalidTopicError

__all__ = [
    "MAX_DIR_NAME_BYTES",
    "MAX_TOPIC_LENGTH",
    "aside_dir_name",
    "is_aside_dir_name",
    "is_aside_dir_of",
    "is_partition_dir_name",
    "parse_partition_dir",
    "partition_dir_name",
    "validate_partition",
    "validate_topic",
]

MAX_TOPIC_LENGTH: Final = 249  # Kafka's Topic.MAX_NAME_LENGTH
MAX_DIR_NAME_BYTES: Final = 255  # a file name's limit on every common file system (NAME_MAX)
_UUID_HEX: Final = 32  # uuid4().hex
MAX_PARTITIONS: Final = 1_000_000
_LEGAL: Final = re.compile(r"[A-Za-z0-9._-]+")
_DIR: Final = re.compile(r"([A-Za-z0-9._-]+)-(0|[1-9][0-9]*)")


def validate_topic(topic: object) -> str:
    """Return ``topic`` if it is a legal topic name.

    Raises:
        InvalidTopicError: not a ``str``, empty, longer than 249 characters,
            ``.`` or ``..``, or holding a character outside ``[A-Za-z0-9._-]``.
    """
    if not isinstance(topic, str):
        raise InvalidTopicError(f"topic name must be a str, got {type(topic).__name__} {topic!r}")
    if not topic:
        raise InvalidTopicError("topic name is empty; use 1 to 249 characters from [A-Za-z0-9._-]")
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(topic)} characters long; the maximum is {MAX_TOPIC_LENGTH}"
        )
    if not _LEGAL.fullmatch(topic):
        bad = sorted({c for c in topic if not _LEGAL.fullmatch(c)})
        raise InvalidTopicError(
            f"topic name {topic!r} contains illegal character(s) {''.join(bad)!r}; "
            "allowed are ASCII letters, digits, '.', '_' and '-'"
        )
    return topic


def validate_partition(partition: object, partitions: int | None = None) -> int:
    """Return ``partition`` if it is a non-negative int (below ``partitions`` when given).

    Raises:
        InvalidTopicError: not an int, or negative. (A partition beyond the
            topic's count is the caller's ``UnknownTopicOrPartitionError``.)
    """
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidTopicError(f"partition must be an int, got {type(partition).__name__} {partition!r}")
    if partition < 0 or partition >= MAX_PARTITIONS:
        raise InvalidTopicError(f"partition must be in [0, {MAX_PARTITIONS}), got {partition}")
    return partition


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, the directory of one partition's segments."""
    return f"{validate_topic(topic)}-{validate_partition(partition)}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for a partition directory name, else ``None``."""
    match = _DIR.fullmatch(name)
    if match is None:
        return None
    topic = match.group(1)
    if topic in (".", "..") or len(topic) > MAX_TOPIC_LENGTH:
        return None
    return topic, int(match.group(2))


def is_partition_dir_name(name: str) -> bool:
    return parse_partition_dir(name) is not None


def aside_dir_name(topic: str, partition: int, suffix: str) -> str:
    """``<topic>-<partition>.<uuid><suffix>``: where a partition directory is built or set aside.

    Used for ``-delete`` (a deleted partition, removed in the background) and
    ``-create`` (a partition being created, renamed to ``<topic>-<partition>``
    once complete). The topic part is cut short so that the name fits in 255
    bytes, as Kafka's ``LocalLog.logDirNameWithSuffixCappedLength`` does: a
    249-character topic with its partition, a 32-digit uuid and the suffix
    would not fit. Never a partition directory name (it ends with ``suffix``).
    """
    tail = f"-{validate_partition(partition)}.{uuid.uuid4().hex}{suffix}"
    return validate_topic(topic)[: MAX_DIR_NAME_BYTES - len(tail)] + tail


def is_aside_dir_of(name: str, topic: str, partition: int, suffix: str) -> bool:
    """Whether ``name`` is an :func:`aside_dir_name` of this topic and partition (any uuid).

    For a topic long enough to be cut short, another topic with the same first
    ~210 characters matches too: the name cannot tell them apart.
    """
    tail_length = len(f"-{partition}.") + _UUID_HEX + len(suffix)
    stem = topic[: MAX_DIR_NAME_BYTES - tail_length]
    return re.fullmatch(rf"{re.escape(stem)}-{partition}\.[0-9a-f]{{{_UUID_HEX}}}{re.escape(suffix)}", name) is not None


def is_aside_dir_name(name: str, suffix: str) -> bool:
    """Whether ``name`` looks like an :func:`aside_dir_name` with ``suffix`` (Kafka's ``topic-p.uuid-suffix``)."""
    return name.endswith(suffix) and "." in name and "-" in name[: -len(suffix)]
