"""InitProducerId (key 22), versions 0-4: a producer id for idempotent producers (no transactions).

Idempotent producers (the default of kafka-python 3 and of Java clients since
Kafka 3.0) ask for a producer id before their first Produce. Ids increase
within and across server runs (they start from the current time in ms); a
producer that presents its id and epoch (version 3 on, KIP-360) gets the next
epoch of the same id. seglog accepts the producer id, epoch and sequence
numbers in the batches but does not yet deduplicate by them: a producer retry
after a lost answer may store a batch twice, as without idempotence. A
``transactional_id`` is refused: there are no transactions yet.

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 22
MIN_VERSION: Final = 0
MAX_VERSION: Final = 4

_MAX_EPOCH: Final = 32767  # Kafka's Short.MAX_VALUE: past it, a new producer id

log = logging.getLogger("seglog.server")


async def handle(broker: Broker, request: DecodedRequest) -> InitProducerIdResponse:
    body = request.body
    if body.transactional_id is not None:
        log.warning("InitProducerId for transactional id %r refused: seglog has no transactions yet",
                    body.transactional_id)
        return InitProducerIdResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=ProducerId(-1),
            producer_epoch=i16(-1),
        )
    producer_id = int(getattr(body, "producer_id", -1))
    epoch = int(getattr(body, "producer_epoch", -1))
    if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
        epoch += 1
    else:
        producer_id, epoch = broker.new_producer_id(), 0
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )
