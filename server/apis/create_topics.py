"""CreateTopics (key 19), versions 2-7: create topics with a partition count and config overrides.

One node, so the replication factor must be 1 or -1 (the default); a manual
replica assignment may only name node 0, and then gives the partition count.
``num_partitions`` -1 takes the server's default (``--auto-create-partitions``).
Configs are Kafka's topic keys that seglog's ``LogConfig`` knows; anything
else is ``INVALID_CONFIG``. ``validate_only`` checks without creating.

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from kio.schema.create_topics.v7.response import CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32

from seglog.engine import LogConfig
from seglog.engine.errors import SeglogError
from seglog.engine.validate import validate_topic
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._configs import topic_configs
from seglog.server.broker import NODE_ID, Broker, error_code_of
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 19
MIN_VERSION: Final = 2
MAX_VERSION: Final = 7

log = logging.getLogger("seglog.server")


async def handle(broker: Broker, request: DecodedRequest) -> CreateTopicsResponse:
    body = request.body
    validate_only = bool(getattr(body, "validate_only", False))
    results = [await _create(broker, topic, validate_only) for topic in body.topics or ()]
    return CreateTopicsResponse(throttle_time=NO_THROTTLE, topics=tuple(results))


async def _create(broker: Broker, topic: Any, validate_only: bool) -> CreatableTopicResult:
    name = str(topic.name)

    def failed(code: ErrorCode, message: str) -> CreatableTopicResult:
        log.warning("create topic %s refused (%s): %s", name, code.name, message)
        return CreatableTopicResult(
            name=TopicName(name), topic_id=None, error_code=code, error_message=message, configs=None
        )

    partitions = int(topic.num_partitions)
    replication = int(topic.replication_factor)
    assignments = topic.assignments or ()
    if assignments:
        if partitions != -1 or replication != -1:
            return failed(ErrorCode.invalid_request, "give either a replica assignment or partitions and replication")
        if any(tuple(a.broker_ids) != (NODE_ID,) for a in assignments):
            return failed(ErrorCode.invalid_replica_assignment, f"this one-node cluster has only node {NODE_ID}")
        partitions = len(assignments)
    if partitions == -1:
        partitions = broker.auto_create_partitions
    if partitions < 1:
        return failed(ErrorCode.invalid_partitions, f"the number of partitions must be positive, got {partitions}")
    if replication not in (-1, 1):
        return failed(
            ErrorCode.invalid_replication_factor,
            f"replication factor {replication} is more than the 1 node of this cluster; use 1 or -1",
        )
    overrides = {str(c.name): c.value for c in topic.configs or () if c.value is not None}
    try:
        validate_topic(name)
        LogConfig.from_properties(overrides, base=broker.engine.config)
        if validate_only:
            if name in broker.engine.topics():
                return failed(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        else:
            await broker.engine.create_topic(name, partitions=partitions, config=overrides or None)
            log.info("created topic %s with %d partition(s) on request", name, partitions)
    except SeglogError as exc:
        return failed(error_code_of(exc), str(exc))
    configs: tuple[CreatableTopicConfigs, ...] = ()
    if not validate_only:
        configs = tuple(
            CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=False, config_source=i8(e.source), is_sensitive=False
            )
            for e in topic_configs(broker.engine, name)
        )
    return CreatableTopicResult(
        name=TopicName(name),
        topic_id=None,
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=i32(partitions),
        replication_factor=i16(1),
        configs=configs,
    )
