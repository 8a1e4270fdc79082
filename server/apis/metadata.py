"""Metadata (key 3), versions 0-12: the brokers (one: this server) and the topics' partitions and leaders.

Topics named in the request that do not exist are created when auto-creation
is on and the request allows it (``allow_auto_topic_creation``, version 4 on;
always allowed below, as Kafka does). Version 0 reads an empty topic list as
"all topics"; from version 1 on, null means all and an empty list none.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import LEADER_EPOCH, NODE_ID, Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 3
MIN_VERSION: Final = 0
MAX_VERSION: Final = 12

_NODE: Final = BrokerId(NODE_ID)


async def handle(broker: Broker, request: DecodedRequest) -> MetadataResponse:
    body = request.body
    requested = body.topics
    names: list[str]
    if requested is None or (request.api_version == 0 and not requested):
        names = broker.engine.topics()
    else:
        names = [t.name for t in requested]
    allow_create = bool(getattr(body, "allow_auto_topic_creation", True))
    topics = []
    for name in dict.fromkeys(names):  # a name asked twice is answered once
        code = await broker.ensure_topic(name, allow_create=allow_create) if name is not None else (
            ErrorCode.invalid_topic_exception
        )
        topics.append(_topic(broker, name or "", code))
    return MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=(MetadataResponseBroker(node_id=_NODE, host=broker.host, port=i32(broker.port)),),
        cluster_id=broker.cluster_id,
        controller_id=_NODE,
        topics=tuple(topics),
    )


def _topic(broker: Broker, name: str, code: ErrorCode) -> MetadataResponseTopic:
    partitions: tuple[MetadataResponsePartition, ...] = ()
    if code == ErrorCode.none:
        try:
            count = broker.engine.partitions_for(name)
        except LookupError:  # deleted since ensure_topic looked
            code = ErrorCode.unknown_topic_or_partition
        else:
            partitions = tuple(
                MetadataResponsePartition(
                    error_code=ErrorCode.none,
                    partition_index=i32(p),
                    leader_id=_NODE,
                    leader_epoch=i32(LEADER_EPOCH),
                    replica_nodes=(_NODE,),
                    isr_nodes=(_NODE,),
                    offline_replicas=(),
                )
                for p in range(count)
            )
    return MetadataResponseTopic(
        error_code=code, name=TopicName(name), topic_id=None, is_internal=False, partitions=partitions
    )
