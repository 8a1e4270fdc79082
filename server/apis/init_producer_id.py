"""InitProducerId (key 22), versions 0-4: a producer id for idempotent producers (no transactions yet).

Idempotent producers (the default of kafka-python 3 and of Java clients since
Kafka 3.0; librdkafka's ``enable.idempotence``) ask for a producer id before
their first Produce. The engine hands them out (``Engine.init_producer_id``):
a new id with epoch 0, never handed out before by the log directory (ids are
recorded durably in blocks, so also not after a restart); a producer that
presents the id and epoch it has (version 3 on, KIP-360) gets the same id with
the next epoch. The partitions deduplicate a producer's retries by its id,
epoch and sequence numbers and fence its older epochs
(``seglog.engine.producer_state``). A ``transactional_id`` is refused: there
are no transactions yet.

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from seglog.engine.errors import SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import Broker, error_code_of
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 22
MIN_VERSION: Final = 0
MAX_VERSION: Final = 4

log = logging.getLogger("seglog.server")


def _refused(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE, error_code=code, producer_id=ProducerId(-1), producer_epoch=i16(-1)
    )


async def handle(broker: Broker, request: DecodedRequest) -> InitProducerIdResponse:
    body = request.body
    if body.transactional_id is not None:
        log.warning("InitProducerId for transactional id %r refused: seglog has no transactions yet",
                    body.transactional_id)
        return _refused(ErrorCode.transactional_id_authorization_failed)
    try:
        producer_id, epoch = await broker.engine.init_producer_id(
            int(getattr(body, "producer_id", -1)), int(getattr(body, "producer_epoch", -1))
        )
    except SeglogError as exc:
        log.warning("InitProducerId refused: %s", exc)
        return _refused(error_code_of(exc))
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )
