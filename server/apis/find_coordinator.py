"""FindCoordinator (key 10), versions 0-2: which node coordinates a consumer group — always this one.

seglog is a one-node cluster: node 0 at the advertised address coordinates
every group. A transaction coordinator (key type 1) is not offered: there are
no transactions yet, and the answer is ``COORDINATOR_NOT_AVAILABLE``.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v2.response import FindCoordinatorResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import NODE_ID, Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 10
MIN_VERSION: Final = 0
MAX_VERSION: Final = 2

_GROUP: Final = 0  # Kafka's CoordinatorType.GROUP


async def handle(broker: Broker, request: DecodedRequest) -> FindCoordinatorResponse:
    if int(getattr(request.body, "key_type", _GROUP)) != _GROUP:
        return FindCoordinatorResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.coordinator_not_available,
            error_message="seglog has no transaction coordinator (no transactions yet)",
            node_id=BrokerId(-1), host="", port=i32(-1),
        )
    return FindCoordinatorResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        node_id=BrokerId(NODE_ID), host=broker.host, port=i32(broker.port),
    )
