"""EndTxn (key 26), versions 0-3: commit or abort a producer's transaction.

The transaction coordinator writes ``PrepareCommit``/``PrepareAbort``
durably, then the commit or abort marker to every partition of the
transaction and the end of it to every consumer group it committed offsets
for, then ``CompleteCommit``/``CompleteAbort`` (``seglog.engine.transactions``);
the answer comes once the markers are written (Kafka answers after the
``Prepare*`` write and writes the markers after; a client that sends its next
request at once then gets ``CONCURRENT_TRANSACTIONS`` and retries, which this
spares it). Ending a transaction again the way it ended is answered without
an error (a retry); the other way is ``INVALID_TXN_STATE``.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.end_txn.v3.response import EndTxnResponse

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._txn import txn_outcome
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 26
MIN_VERSION: Final = 0
MAX_VERSION: Final = 3
_FENCED_FROM: Final = 2


async def handle(broker: Broker, request: DecodedRequest) -> EndTxnResponse:
    body = request.body
    code = await txn_outcome(
        broker.engine.transactions.end_txn(
            body.transactional_id, int(body.producer_id), int(body.producer_epoch), bool(body.committed)
        ),
        f"EndTxn of {body.transactional_id!r}", request.api_version, _FENCED_FROM,
    )
    return EndTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
