"""The checks of caller input, in one place: the API, the command line and the Kafka front end use them.

Each ``validate_*`` function returns its argument when it is valid and raises
otherwise; each error names the value and the rule it breaks, and is a
``SeglogError`` that is also a ``TypeError`` and a ``ValueError``. The rules
(docs/OPERATIONS.md, "Input validation"):

- **topic**: Kafka's: a ``str`` of 1-249 characters from ``[A-Za-z0-9._-]``,
  not ``.`` or ``..`` (``InvalidTopicError``; the check lives in
  ``engine.names``, beside the directory names it protects).
- **partition**: an ``int`` (not a ``bool``) in [0, 1,000,000) (``InvalidTopicError``).
- **offset**: an ``int`` (not a ``bool``) in [0, 2**63-1], Kafka's non-negative
  ``long`` (``InvalidRecordError``).
- **timestamp**: an ``int`` (not a ``bool``) that fits a signed 64-bit ``long``;
  each call says which negative values it gives a meaning (``InvalidRecordError``).
- **group id**: a non-empty ``str``, valid UTF-8 (no lone surrogate), no NUL,
  at most 32,767 UTF-8 bytes (``InvalidRecordError``).
- **header key**: a ``str``, valid UTF-8, no NUL; checked by the batch encoder
  (``segments.batch``), which every append goes through.

Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from seglog.engine.config import LogConfig
from seglog.engine.errors import InvalidConfigError, InvalidRecordError
from seglog.engine.names import MAX_PARTITIONS, MAX_TOPIC_LENGTH, validate_partition, validate_topic
from seglog.indexes.handles import DEFAULT_MIN_OPEN_FILES
from seglog.segments.records import text_problem

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_GROUP_ID_BYTES",
    "MAX_PARTITIONS",
    "MAX_TOPIC_LENGTH",
    "text_problem",
    "validate_group",
    "validate_header_key",
    "validate_int64",
    "validate_offset",
    "validate_open_options",
    "validate_partition",
    "validate_timestamp",
    "validate_topic",
]

INT64_MIN: Final = -(2**63)  # Java's Long.MIN_VALUE: Kafka's offsets and timestamps are longs
INT64_MAX: Final = 2**63 - 1
# Kafka bounds a group id only by its wire type, STRING (an int16 length): no Kafka client can send
# a longer one. The store has no limit of its own (a long id's file is named by its SHA-256).
MAX_GROUP_ID_BYTES: Final = 32_767


def _type_name(value: object) -> str:
    return type(value).__name__


def validate_int64(value: object, what: str, *, minimum: int = INT64_MIN) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) in [``minimum``, 2**63-1].

    ``what`` names the argument in the message (``"committed offset"``).

    Raises:
        InvalidRecordError: not an int, or outside the range.
    """
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidRecordError(f"{what} must be an int, got {_type_name(value)} {value!r}")
    if not minimum <= value <= INT64_MAX:
        low = "-2**63" if minimum == INT64_MIN else str(minimum)
        raise InvalidRecordError(f"{what} {value} is outside [{low}, 2**63-1] (a Kafka long)")
    return value


def validate_offset(value: object, what: str = "offset") -> int:
    """Return ``value`` if it is an offset: an ``int`` (not a ``bool``) in [0, 2**63-1].

    Raises:
        InvalidRecordError: not an int, negative, or beyond int64.
    """
    return validate_int64(value, what, minimum=0)


def validate_timestamp(value: object, what: str = "timestamp") -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) that fits int64 (milliseconds since the epoch).

    Negative values pass: each caller says which it gives a meaning (Kafka's
    ``-1``/``-2``/``-3`` lookup sentinels) and refuses the others.

    Raises:
        InvalidRecordError: not an int, or outside int64.
    """
    return validate_int64(value, what)


def validate_group(group: object) -> str:
    """Return ``group`` if it is a usable consumer group id.

    Kafka's rules where Kafka has them: any text but the empty string (Kafka's
    JoinGroup answers ``INVALID_GROUP_ID`` for it) and at most 32,767 UTF-8
    bytes (the longest a Kafka client can send). seglog's own: valid UTF-8 and
    no NUL (:func:`~segments.records.text_problem`).

    Raises:
        InvalidRecordError: not a str, empty, too long, not valid UTF-8, or holding NUL.
    """
    if not isinstance(group, str):
        raise InvalidRecordError(f"group id must be a str, got {_type_name(group)} {group!r}")
    if not group:
        raise InvalidRecordError("group id is empty; use a non-empty str (Kafka refuses an empty group id too)")
    problem = text_problem(group)
    if problem is not None:
        raise InvalidRecordError(f"group id {_shorten(group)} {problem}")
    size = len(group) if group.isascii() else len(group.encode("utf-8"))
    if size > MAX_GROUP_ID_BYTES:
        raise InvalidRecordError(
            f"group id {_shorten(group)} is {size} UTF-8 bytes long; the maximum is {MAX_GROUP_ID_BYTES} "
            "(the longest a Kafka client can send)"
        )
    return group


def validate_header_key(key: object) -> str:
    """Return ``key`` if it is a usable record header key: a ``str``, valid UTF-8, no NUL.

    Appends check every header key themselves (``segments.batch``); this is
    for front ends that want to refuse a key before they build records.

    Raises:
        InvalidRecordError: not a str, not valid UTF-8, or holding NUL.
    """
    if not isinstance(key, str):
        raise InvalidRecordError(f"header key must be a str, got {_type_name(key)} {key!r}")
    problem = text_problem(key)
    if problem is not None:
        raise InvalidRecordError(f"header key {_shorten(key)} {problem}")
    return key


def validate_open_options(
    path: object,
    config: object,
    flags: Mapping[str, object],
    intervals_ms: Mapping[str, object],
    on_progress: object,
) -> tuple[Path, LogConfig]:
    """The absolute path and the config (``None``: the default) ``Engine.open`` was given, once all are valid.

    ``flags`` and ``intervals_ms`` are the options by name.

    Raises:
        InvalidConfigError: ``path`` is not a str or os.PathLike, or holds NUL; ``config``
            is not a ``LogConfig``; a flag is not a bool; ``on_progress`` is not callable;
            an interval is not a positive int.
    """
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise InvalidConfigError(f"path must be a str or os.PathLike, got {_type_name(path)} {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str) or "\x00" in text:
        raise InvalidConfigError(f"path must be a str path without NUL characters, got {text!r}")
    if config is None:
        config = LogConfig()
    if not isinstance(config, LogConfig):
        raise InvalidConfigError(f"config must be a LogConfig, got {_type_name(config)}")
    for flag, flag_value in flags.items():
        if not isinstance(flag_value, bool):
            raise InvalidConfigError(f"{flag} must be a bool, got {_type_name(flag_value)} {flag_value!r}")
    if on_progress is not None and not callable(on_progress):
        raise InvalidConfigError(f"on_progress must be callable or None, got {_type_name(on_progress)}")
    for name, value in intervals_ms.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidConfigError(f"{name} must be a positive int (milliseconds), got {value!r}")
    return Path(os.path.abspath(text)), config


def check_max_open_files(value: object) -> None:
    """Check ``Engine.open(max_open_files=...)``: ``None`` or an int of at least ``DEFAULT_MIN_OPEN_FILES``.

    Raises:
        InvalidConfigError: anything else.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < DEFAULT_MIN_OPEN_FILES:
        raise InvalidConfigError(
            f"max_open_files must be None or an int of at least {DEFAULT_MIN_OPEN_FILES} (descriptors "
            f"segments may hold at once), got {value!r}"
        )


def _shorten(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to about ``limit`` characters: a 30,000-character id is not a message."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"
