"""ListTransactions (key 66), versions 0-2: the transactional ids the coordinator knows, filtered as Kafka does.

Kafka's ``TransactionStateManager.listTransactionStates``: ``state_filters``
keeps ids in those states (Kafka's names, case-sensitive; a name Kafka does
not know comes back in ``unknown_state_filters`` and matches nothing),
``producer_id_filters`` ids of those producer ids, version 1's
``duration_filter`` (>= 0) transactions running longer than that many
milliseconds, version 2's ``transactional_id_pattern`` ids the regular
expression matches whole (Python's ``re`` syntax, close to Java's for common
patterns; one that does not compile is ``INVALID_REGULAR_EXPRESSION``). An
empty filter keeps everything.

Must not import: ``tools``.
"""

from __future__ import annotations

import re
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v2.response import ListTransactionsResponse, TransactionState
from kio.schema.types import ProducerId, TransactionalId

from seglog.engine.transactions import TransactionState as TxnState
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 66
MIN_VERSION: Final = 0
MAX_VERSION: Final = 2

# States Kafka knows that seglog's coordinator never shows (KIP-890's fencing state): known, never matched.
_KNOWN_ELSEWHERE: Final = frozenset({"PrepareEpochFence"})


async def handle(broker: Broker, request: DecodedRequest) -> ListTransactionsResponse:
    body = request.body
    unknown: list[str] = []
    states: set[TxnState] = set()
    for name in body.state_filters:
        state = TxnState.from_kafka_name(name)
        if state is not None:
            states.add(state)
        elif name not in _KNOWN_ELSEWHERE:
            unknown.append(name)
    pattern = None
    text = getattr(body, "transactional_id_pattern", None)
    if text:
        try:
            pattern = re.compile(text)
        except re.error:
            return ListTransactionsResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_regular_expression,
                                            unknown_state_filters=(), transaction_states=())
    # State filters were given but none names a state seglog shows: nothing matches (Kafka checks the
    # names given, not the states they resolved to).
    nothing = bool(body.state_filters) and not states
    found = [] if nothing else broker.engine.transactions.list_transactions(
        states=states, producer_ids={int(p) for p in body.producer_id_filters},
        min_duration_ms=int(getattr(body, "duration_filter", -1)), pattern=pattern,
    )
    return ListTransactionsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            TransactionState(transactional_id=TransactionalId(r.transactional_id),
                             producer_id=ProducerId(r.producer_id), transaction_state=r.state.kafka_name)
            for r in found
        ),
    )
