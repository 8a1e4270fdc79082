"""DescribeConfigs (key 32), versions 1-4: a topic's configs (and the server's defaults as broker configs).

Resource type 2 (topic) lists the topic's effective ``LogConfig`` in Kafka's
names, each marked as a topic override or a default; type 4 (broker) lists the
server's default ``LogConfig``. ``configuration_keys`` narrows the list.

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from seglog.engine.errors import SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._configs import DEFAULT_CONFIG, ConfigEntry, topic_configs
from seglog.server.broker import NODE_ID, Broker, error_code_of
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 32
MIN_VERSION: Final = 1
MAX_VERSION: Final = 4

# Kafka's ConfigResource.Type values, part of the protocol.
TOPIC: Final = 2
BROKER: Final = 4

log = logging.getLogger("seglog.server")


async def handle(broker: Broker, request: DecodedRequest) -> DescribeConfigsResponse:
    body = request.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    results = [_describe(broker, resource, synonyms) for resource in body.resources or ()]
    return DescribeConfigsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


def _describe(broker: Broker, resource: Any, synonyms: bool) -> DescribeConfigsResult:
    kind, name = int(resource.resource_type), str(resource.resource_name)

    def result(code: ErrorCode, message: str | None, entries: list[ConfigEntry]) -> DescribeConfigsResult:
        keys = resource.configuration_keys
        if keys:
            entries = [e for e in entries if e.name in set(keys)]
        return DescribeConfigsResult(
            error_code=code,
            error_message=message,
            resource_type=i8(kind),
            resource_name=name,
            configs=tuple(
                DescribeConfigsResourceResult(
                    name=e.name,
                    value=e.value,
                    read_only=kind == BROKER,
                    config_source=i8(e.source),
                    is_sensitive=False,
                    synonyms=(DescribeConfigsSynonym(name=e.name, value=e.value, source=i8(e.source)),)
                    if synonyms else (),
                    documentation=None,
                )
                for e in entries
            ),
        )

    if kind == TOPIC:
        try:
            return result(ErrorCode.none, None, topic_configs(broker.engine, name))
        except SeglogError as exc:
            code = error_code_of(exc)
            log.warning("describe configs of topic %s refused (%s): %s", name, code.name, exc)
            return result(code, str(exc), [])
    if kind == BROKER and name in ("", str(NODE_ID)):
        defaults = broker.engine.config.to_properties()
        return result(ErrorCode.none, None, [ConfigEntry(k, v, DEFAULT_CONFIG) for k, v in sorted(defaults.items())])
    message = f"resource type {kind} {name!r} is not described here; topics (2) and broker {NODE_ID} (4) are"
    log.warning("describe configs refused: %s", message)
    return result(ErrorCode.invalid_request, message, [])
