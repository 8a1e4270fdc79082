"""FindCoordinator (key 10), versions 0-2: which node coordinates a consumer group or a transactional id.

seglog is a one-node cluster: node 0 at the advertised address coordinates
every group (key type 0) and every transactional id (key type 1). Another key
type is ``INVALID_REQUEST``.

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
_TRANSACTION: Final = 1  # Kafka's CoordinatorType.TRANSACTION


async def handle(broker: Broker, request: DecodedRequest) -> FindCoordinatorResponse:
    key_type = int(getattr(request.body, "key_type", _GROUP))
    if key_type not in (_GROUP, _TRANSACTION):
        return FindCoordinatorResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_request,
            error_message=f"unknown coordinator key type {key_type}: 0 (group) or 1 (transaction)",
            node_id=BrokerId(-1), host="", port=i32(-1),
        )
    return FindCoordinatorResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        node_id=BrokerId(NODE_ID), host=broker.host, port=i32(broker.port),
    )
