"""``LogConfig``: the per-topic log settings, with Kafka's names and defaults.

Every field is a Kafka topic config (``segment.bytes`` → ``segment_bytes``) with
Kafka's default and Kafka's validator, except where a lower bound had to be
raised for seglog's format (noted on the field). Lower layers receive explicit
values taken from here and declare no defaults of their own.

Must not import: ``tools``.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from seglog.engine.errors import InvalidConfigError
from seglog.segments.batch import MIN_BATCH_SIZE

__all__ = [
    "CREATE_TIME",
    "DEFAULT_FILE_DELETE_DELAY_MS",
    "DEFAULT_FLUSH_MESSAGES",
    "DEFAULT_FLUSH_MS",
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_RETENTION_BYTES",
    "DEFAULT_RETENTION_MS",
    "DEFAULT_SEGMENT_BYTES",
    "DEFAULT_SEGMENT_INDEX_BYTES",
    "DEFAULT_SEGMENT_JITTER_MS",
    "DEFAULT_SEGMENT_MS",
    "LOG_APPEND_TIME",
    "LONG_MAX",
    "LogConfig",
    "TimestampType",
]

LONG_MAX: Final = 2**63 - 1  # Java's Long.MAX_VALUE: Kafka's "never" for flush.messages / flush.ms
INT_MAX: Final = 2**31 - 1

CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"
TimestampType = Literal["CreateTime", "LogAppendTime"]

# Kafka's defaults (storage/.../log/LogConfig.java and ServerLogConfigs).
DEFAULT_SEGMENT_BYTES: Final = 1024 * 1024 * 1024  # 1 GiB
DEFAULT_SEGMENT_MS: Final = 7 * 24 * 60 * 60 * 1000  # 7 days
DEFAULT_SEGMENT_JITTER_MS: Final = 0
DEFAULT_SEGMENT_INDEX_BYTES: Final = 10 * 1024 * 1024  # 10 MiB
DEFAULT_INDEX_INTERVAL_BYTES: Final = 4096
DEFAULT_FLUSH_MESSAGES: Final = LONG_MAX
DEFAULT_FLUSH_MS: Final = LONG_MAX
DEFAULT_RETENTION_MS: Final = 7 * 24 * 60 * 60 * 1000  # 7 days
DEFAULT_RETENTION_BYTES: Final = -1  # unlimited
DEFAULT_FILE_DELETE_DELAY_MS: Final = 60_000
DEFAULT_MAX_MESSAGE_BYTES: Final = 1024 * 1024 + 12  # 1 MiB + Kafka's 12-byte LOG_OVERHEAD
DEFAULT_PREALLOCATE: Final = False

# seglog's smallest segment: room for a few small batches (a batch header is 61
# bytes). Kafka 3.x accepts 14 (a legacy record's overhead), which no seglog
# batch fits into; tests use sizes such as 64 KiB.
MIN_SEGMENT_BYTES: Final = 256
# The time index reserves its last slot for the entry written at roll/close, so
# an index must hold at least two 12-byte entries to ever take one at append.
MIN_SEGMENT_INDEX_BYTES: Final = 24
# Kafka accepts max.message.bytes=0, which refuses every batch; seglog refuses a
# limit below its smallest batch (one record without key or value), which would.
MIN_MAX_MESSAGE_BYTES: Final = MIN_BATCH_SIZE

_C = TypeVar("_C")


def _keyword_fields_only(cls: type[_C]) -> type[_C]:
    """Make the dataclass ``__init__`` refuse a positional argument or an unknown field with
    ``InvalidConfigError`` (naming the known fields), not the bare ``TypeError`` Python raises."""
    generated: Callable[..., None] = cls.__init__

    @functools.wraps(generated)
    def __init__(self: _C, *args: object, **kwargs: Any) -> None:
        if args:
            raise InvalidConfigError(
                f"{cls.__name__} takes keyword arguments only (segment_bytes=..., ...), got {len(args)} positional"
            )
        unknown = sorted(set(kwargs) - {f.name for f in dataclasses.fields(cls)})  # type: ignore[arg-type]
        if unknown:
            known = ", ".join(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
            raise InvalidConfigError(f"unknown {cls.__name__} field(s) {', '.join(unknown)}; known fields: {known}")
        generated(self, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign,assignment]
    return cls


@_keyword_fields_only
@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Per-topic log settings (Kafka topic configs, snake_case).

    Frozen and validated on construction: a value outside its range raises
    :class:`~seglog.engine.errors.InvalidConfigError` naming the Kafka key. Build one
    from Kafka's dotted keys with :meth:`from_properties`; derive a variant with
    :meth:`with_overrides`.
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    """``segment.bytes``: the active segment rolls before it would exceed this size."""
    segment_ms: int = DEFAULT_SEGMENT_MS
    """``segment.ms``: the active segment rolls this long after its first record's timestamp."""
    segment_jitter_ms: int = DEFAULT_SEGMENT_JITTER_MS
    """``segment.jitter.ms``: a random amount in [0, min(jitter, segment.ms)) taken off ``segment_ms``."""
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    """``segment.index.bytes``: preallocated size of each ``.index`` and ``.timeindex``."""
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    """``index.interval.bytes``: bytes of batches between two offset-index entries."""
    flush_messages: int = DEFAULT_FLUSH_MESSAGES
    """``flush.messages``: fsync after this many unflushed records (1: before every append returns)."""
    flush_ms: int = DEFAULT_FLUSH_MS
    """``flush.ms``: fsync data older than this many milliseconds."""
    retention_ms: int = DEFAULT_RETENTION_MS
    """``retention.ms``: delete segments whose newest record is older than this (-1: keep forever)."""
    retention_bytes: int = DEFAULT_RETENTION_BYTES
    """``retention.bytes``: delete the oldest segments while a partition is larger than this (-1: no limit)."""
    file_delete_delay_ms: int = DEFAULT_FILE_DELETE_DELAY_MS
    """``file.delete.delay.ms``: how long a segment lives as ``.deleted`` before removal."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """``max.message.bytes``: largest record batch (one ``append`` call) accepted, in bytes on disk."""
    message_timestamp_type: TimestampType = CREATE_TIME
    """``message.timestamp.type``: ``CreateTime`` keeps the producer's timestamps, ``LogAppendTime`` overwrites."""
    preallocate: bool = DEFAULT_PREALLOCATE
    """``preallocate``: reserve ``segment_bytes`` on disk when a segment is created."""

    def __post_init__(self) -> None:
        for name, expected in _FIELD_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise InvalidConfigError(
                    f"{_kafka_key(name)} must be {_TYPE_NAMES[expected]}, got {type(value).__name__} {value!r}"
                )
        _at_least("segment_bytes", self.segment_bytes, MIN_SEGMENT_BYTES, INT_MAX)
        _at_least("segment_ms", self.segment_ms, 1)
        _at_least("segment_jitter_ms", self.segment_jitter_ms, 0)
        _at_least("segment_index_bytes", self.segment_index_bytes, MIN_SEGMENT_INDEX_BYTES, INT_MAX)
        _at_least("index_interval_bytes", self.index_interval_bytes, 0, INT_MAX)
        _at_least("flush_messages", self.flush_messages, 1)
        _at_least("flush_ms", self.flush_ms, 0)
        _at_least("retention_ms", self.retention_ms, -1, hint="; -1 keeps records forever")
        _at_least("file_delete_delay_ms", self.file_delete_delay_ms, 0)
        _at_least(
            "max_message_bytes", self.max_message_bytes, MIN_MAX_MESSAGE_BYTES, INT_MAX,
            hint=f"; {MIN_MAX_MESSAGE_BYTES} bytes is the smallest batch (one record without key or value)",
        )
        # Kafka reads every negative retention.bytes as "no limit"; seglog takes only its documented
        # -1, so that a typo such as -7 is refused rather than silently turning retention off.
        _at_least("retention_bytes", self.retention_bytes, -1, hint="; -1 means no limit")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise InvalidConfigError(
                f"message.timestamp.type must be 'CreateTime' or 'LogAppendTime', got {self.message_timestamp_type!r}"
            )

    # -- Kafka's dotted keys -------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], *, base: LogConfig | None = None) -> LogConfig:
        """Build a config from Kafka's dotted keys (``{"segment.bytes": "65536"}``).

        Values may be ints, bools or their string forms, as in a ``.properties``
        file. Keys not given keep the value of ``base`` (default: Kafka's defaults).

        Raises:
            InvalidConfigError: ``props`` is not a mapping with ``str`` keys,
                ``base`` is not a ``LogConfig``, an unknown key, a value that
                does not parse, or a value outside its allowed range.
        """
        if not isinstance(props, Mapping):
            raise InvalidConfigError(
                f"from_properties takes a mapping of Kafka config keys to values (such as "
                f"{{'segment.bytes': '65536'}}), got {type(props).__name__} {props!r}"
            )
        if base is not None and not isinstance(base, LogConfig):
            raise InvalidConfigError(f"base must be a LogConfig or None, got {type(base).__name__}")
        overrides: dict[str, Any] = {}
        for key, raw in props.items():
            if not isinstance(key, str):
                raise InvalidConfigError(f"log config keys must be str (such as 'segment.bytes'), got {key!r}")
            name = key.replace(".", "_").replace("-", "_")
            if name not in _FIELD_TYPES:
                known = ", ".join(sorted(_kafka_key(n) for n in _FIELD_TYPES))
                raise InvalidConfigError(f"unknown log config {key!r}; known keys: {known}")
            overrides[name] = _parse(key, _FIELD_TYPES[name], raw)
        return dataclasses.replace(base if base is not None else cls(), **overrides)

    def to_properties(self) -> dict[str, str]:
        """This config as Kafka's dotted keys with string values."""
        out: dict[str, str] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            out[_kafka_key(field.name)] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    def overrides_from(self, base: LogConfig) -> dict[str, Any]:
        """The fields of this config that differ from ``base`` (snake_case keys)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(base, f.name)
        }

    def with_overrides(self, **overrides: Any) -> LogConfig:
        """A copy with some fields replaced (snake_case names), validated again.

        Raises:
            InvalidConfigError: an unknown field or a value outside its range.
        """
        unknown = set(overrides) - set(_FIELD_TYPES)
        if unknown:
            raise InvalidConfigError(f"unknown log config field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **overrides)

    # -- derived values ----------------------------------------------------------

    @property
    def timestamp_is_log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def initial_segment_size(self) -> int:
        """Bytes to preallocate for a new ``.log`` (Kafka's ``initFileSize``)."""
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """A roll jitter for a new segment: 0, or uniform in [0, min(jitter, segment.ms)).

        Kafka draws it once per segment (``LogConfig.randomSegmentJitter``).
        """
        if self.segment_jitter_ms == 0:
            return 0
        return (rng or random).randrange(min(self.segment_jitter_ms, self.segment_ms))


def _kafka_key(name: str) -> str:
    return name.replace("_", ".")


def _at_least(name: str, value: int, low: int, high: int = LONG_MAX, *, hint: str = "") -> None:
    if not low <= value <= high:
        upper = {INT_MAX: "2**31-1 (a 32-bit int)", LONG_MAX: "2**63-1 (a 64-bit long)"}.get(high, str(high))
        raise InvalidConfigError(f"{_kafka_key(name)} must be at least {low} and at most {upper}{hint}, got {value}")


_FIELD_TYPES: Final[dict[str, type]] = {
    f.name: (bool if f.name == "preallocate" else str if f.name == "message_timestamp_type" else int)
    for f in dataclasses.fields(LogConfig)
}
_TYPE_NAMES: Final[dict[type, str]] = {int: "an int", bool: "a bool", str: "a str"}


def _parse(key: str, kind: type, raw: Any) -> Any:
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise InvalidConfigError(f"{key} must be true or false, got {raw!r}")
    if kind is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            try:
                return int(raw.strip())
            except ValueError:
                pass
        raise InvalidConfigError(f"{key} must be an integer, got {raw!r}")
    if not isinstance(raw, str):
        raise InvalidConfigError(f"{key} must be a string, got {raw!r}")
    return raw.strip()
