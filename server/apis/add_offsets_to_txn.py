"""AddOffsetsToTxn (key 25), versions 0-3: add a consumer group's offsets to a producer's transaction.

Sent before TxnOffsetCommit: the transaction coordinator records the group, so
that the end of the transaction commits or drops the offsets the producer
commits for it (``seglog.engine.transactions``). An invalid group id is
``INVALID_GROUP_ID``.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse
from kio.schema.errors import ErrorCode

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import group_id_problem
from seglog.server.apis._txn import txn_outcome
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 25
MIN_VERSION: Final = 0
MAX_VERSION: Final = 3
_FENCED_FROM: Final = 2


async def handle(broker: Broker, request: DecodedRequest) -> AddOffsetsToTxnResponse:
    body = request.body
    if group_id_problem(body.group_id):
        return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_group_id)
    code = await txn_outcome(
        broker.engine.transactions.add_offsets(
            body.transactional_id, int(body.producer_id), int(body.producer_epoch), body.group_id
        ),
        f"AddOffsetsToTxn of {body.transactional_id!r}", request.api_version, _FENCED_FROM,
    )
    return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
