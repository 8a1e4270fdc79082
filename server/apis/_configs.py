"""A topic's configs as Kafka's admin APIs list them (CreateTopics v5+, DescribeConfigs).

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from seglog.engine import Engine

__all__ = ["DEFAULT_CONFIG", "TOPIC_CONFIG", "ConfigEntry", "topic_configs"]

# Kafka's ConfigSource values (DescribeConfigsResponse), part of the protocol.
TOPIC_CONFIG: Final = 1
DEFAULT_CONFIG: Final = 5


class ConfigEntry(NamedTuple):
    name: str
    value: str
    source: int


def topic_configs(engine: Engine, topic: str) -> list[ConfigEntry]:
    """Every config of ``topic``: value and whether the topic overrides it. Raises like ``Engine.topic_config``."""
    overridden = set(engine.topic_overrides(topic))
    return [
        ConfigEntry(name, value, TOPIC_CONFIG if name in overridden else DEFAULT_CONFIG)
        for name, value in sorted(engine.topic_config(topic).to_properties().items())
    ]
