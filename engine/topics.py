"""A topic's state in an engine and its ``topic.json``: partition count, config overrides, effective config.

Owns the ``topic.json`` format (written into every partition directory by
``create_topic``; docs/FORMAT.md §1) and the rules that compare a topic with
what ``create_topic(exist_ok=True)`` asks for. Pure: no file is read or
written here (the engine's file layer does that).

Must not import: ``tools``, ``engine.engine``, ``engine.loader``, ``engine.follow``, ``engine.log``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from seglog.engine._fs import TOPIC_FILE
from seglog.engine.config import LogConfig
from seglog.engine.errors import InvalidConfigError, TopicExistsError
from seglog.engine.names import partition_dir_name
from seglog.engine.validate import validate_partition

__all__ = [
    "TOPIC_FILE",
    "TOPIC_FILE_VERSION",
    "TopicState",
    "check_partition_count",
    "check_same_topic",
    "parse_topic_file",
    "resolve_config",
    "topic_file_bytes",
]

log = logging.getLogger("seglog")

TOPIC_FILE_VERSION: Final = 1  # part of the on-disk format


@dataclass(slots=True)
class TopicState:
    """A topic as an engine knows it: its partition count, its overrides (Kafka's dotted keys) and its config."""

    name: str
    partitions: int
    overrides: dict[str, Any]
    config: LogConfig


def check_same_topic(existing: TopicState, partitions: int, config: LogConfig | None) -> None:
    """Refuse ``create_topic(exist_ok=True)`` for a topic that exists with another shape.

    Raises:
        TopicExistsError: another partition count, or (``config`` given) another effective config.
    """
    if existing.partitions != partitions:
        raise TopicExistsError(
            f"topic {existing.name!r} already exists with {existing.partitions} partition(s), not the "
            f"{partitions} asked for; exist_ok=True accepts only the same partition count: pass "
            f"partitions={existing.partitions}, or delete the topic first"
        )
    if config is None:
        return
    have, want = existing.config.to_properties(), config.to_properties()
    if have != want:
        diff = ", ".join(f"{key} is {have[key]}, asked for {want[key]}" for key in sorted(have)
                         if have[key] != want[key])
        raise TopicExistsError(
            f"topic {existing.name!r} already exists with another config ({diff}); exist_ok=True accepts only "
            "the same config: pass config=None to take the stored one, or delete the topic first"
        )


def check_partition_count(name: str, partitions: int) -> None:
    """Raises ``InvalidConfigError`` (or ``InvalidTopicError`` above Kafka's partition ids) for a bad count."""
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise InvalidConfigError(f"{name} must be a positive int, got {partitions!r}")
    validate_partition(partitions - 1)


def resolve_config(
    base: LogConfig, config: LogConfig | Mapping[str, Any] | None
) -> tuple[LogConfig, dict[str, Any]]:
    """The effective config of a new topic and the keys it overrides in ``base`` (Kafka's dotted form).

    Raises:
        InvalidConfigError: ``config`` is neither a ``LogConfig`` nor a mapping, or a key or value is invalid.
    """
    if config is None:
        return base, {}
    if isinstance(config, LogConfig):
        effective = config
    elif isinstance(config, Mapping):
        props = {str(k).replace("_", "."): v for k, v in config.items()}
        effective = LogConfig.from_properties(props, base=base)
    else:
        raise InvalidConfigError(f"config must be a LogConfig or a mapping of overrides, got {type(config).__name__}")
    base_props = base.to_properties()
    overrides = {k: v for k, v in effective.to_properties().items() if base_props[k] != v}
    return effective, overrides


def topic_file_bytes(topic: TopicState, partition: int) -> bytes:
    """The ``topic.json`` of one partition directory of ``topic``."""
    return json.dumps(
        {
            "version": TOPIC_FILE_VERSION,
            "topic": topic.name,
            "partition": partition,
            "partitions": topic.partitions,
            "config": topic.overrides,
        },
        indent=2,
        sort_keys=True,
    ).encode() + b"\n"


def parse_topic_file(
    topic: str,
    partition: int,
    data: bytes | None,
    *,
    default: LogConfig,
    existing: TopicState | None,
    log_dir: Path,
) -> TopicState:
    """The state of ``topic`` as partition ``partition``'s ``topic.json`` (``data``; ``None``: none read) has it.

    ``existing``: the state already built from another partition's file, which
    keeps its config (every partition holds the same file) and grows its
    partition count to cover this one. A file that does not parse, or holds an
    invalid config, is logged (naming it, under ``log_dir``) and the engine's
    ``default`` config is used: a hint the engine can live without.
    """
    overrides: dict[str, Any] = {}
    partitions = partition + 1
    if data is not None:
        try:
            meta = json.loads(data)
            if not isinstance(meta, dict) or meta.get("topic") != topic:
                raise ValueError("not a topic.json of this topic")
            partitions = int(meta.get("partitions", partitions))
            overrides = dict(meta.get("config", {}))
        except (ValueError, TypeError) as exc:
            log.warning("%s: unreadable (%s); using the engine's default config",
                        log_dir / partition_dir_name(topic, partition) / TOPIC_FILE, exc)
    if existing is not None:  # the topic's config comes from the topic.json read first (not rebuilt)
        existing.partitions = max(existing.partitions, partitions, partition + 1)
        return existing
    try:
        config = LogConfig.from_properties(overrides, base=default)
    except InvalidConfigError as exc:
        log.warning("%s: %s; using the engine's default config",
                    log_dir / partition_dir_name(topic, partition) / TOPIC_FILE, exc)
        overrides, config = {}, default
    return TopicState(topic, max(partitions, partition + 1), overrides, config)
