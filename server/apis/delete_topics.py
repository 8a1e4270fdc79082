"""DeleteTopics (key 20), versions 1-6: delete topics by name (topic ids, version 6, are not kept).

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from typing import Final

from kio.schema.delete_topics.v6.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from seglog.engine.errors import SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import Broker, error_code_of
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 20
MIN_VERSION: Final = 1
MAX_VERSION: Final = 6

log = logging.getLogger("seglog.server")


async def handle(broker: Broker, request: DecodedRequest) -> DeleteTopicsResponse:
    body = request.body
    if request.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in body.topics or ()]
    else:
        targets = [(name, None) for name in body.topic_names or ()]
    results = []
    for name, topic_id in targets:
        if name is None:
            message = "topics are addressed by name here: seglog keeps no topic ids"
            log.warning("delete topic %s refused: %s", topic_id, message)
            results.append(DeletableTopicResult(
                name=None, topic_id=topic_id, error_code=ErrorCode.unknown_topic_id, error_message=message
            ))
            continue
        try:
            await broker.engine.delete_topic(str(name))
        except SeglogError as exc:
            code = error_code_of(exc)
            log.warning("delete topic %s refused (%s): %s", name, code.name, exc)
            results.append(DeletableTopicResult(
                name=TopicName(name), topic_id=None, error_code=code, error_message=str(exc)
            ))
            continue
        log.info("deleted topic %s on request", name)
        results.append(DeletableTopicResult(name=TopicName(name), topic_id=None, error_code=ErrorCode.none))
    return DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(results))
