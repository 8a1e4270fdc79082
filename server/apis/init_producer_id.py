"""InitProducerId (key 22), versions 0-4: a producer id for idempotent and transactional producers.

Idempotent producers (the default of Java clients since Kafka 3.0;
librdkafka's ``enable.idempotence``) ask for a producer id before their first
Produce: a new id with epoch 0, never handed out before by the log directory
(ids are recorded durably in blocks, so also not after a restart); a producer
that presents the id and epoch it has (version 3 on, KIP-360) gets the same id
with the next epoch. The partitions deduplicate a producer's retries by its
id, epoch and sequence numbers and fence its older epochs
(``seglog.engine.producer_state``).

With a ``transactional_id`` the transaction coordinator answers
(``seglog.engine.transactions``): the id's producer id and its next epoch,
fencing older producers of the id and aborting a transaction the previous one
left open; ``INVALID_TRANSACTION_TIMEOUT`` for a timeout outside
[1 ms, 15 min]; an empty transactional id is ``INVALID_REQUEST``, as in Kafka.
Versions 0-3 get ``INVALID_PRODUCER_EPOCH`` where version 4 gets
``PRODUCER_FENCED``.

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
from seglog.server.apis._groups import ms
from seglog.server.apis._txn import txn_error_code
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 22
MIN_VERSION: Final = 0
MAX_VERSION: Final = 4
_FENCED_FROM: Final = 4  # the version that knows PRODUCER_FENCED

log = logging.getLogger("seglog.server")


def _refused(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE, error_code=code, producer_id=ProducerId(-1), producer_epoch=i16(-1)
    )


async def handle(broker: Broker, request: DecodedRequest) -> InitProducerIdResponse:
    body = request.body
    transactional_id = body.transactional_id
    if transactional_id == "":
        return _refused(ErrorCode.invalid_request)
    producer_id = int(getattr(body, "producer_id", -1))
    producer_epoch = int(getattr(body, "producer_epoch", -1))
    if (producer_id == -1) != (producer_epoch == -1):
        return _refused(ErrorCode.invalid_request)
    try:
        producer_id, epoch = await broker.engine.transactions.init_producer_id(
            transactional_id, ms(body.transaction_timeout), producer_id, producer_epoch
        )
    except SeglogError as exc:
        return _refused(txn_error_code(exc, f"InitProducerId for {transactional_id!r}", request.api_version,
                                       _FENCED_FROM))
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )
