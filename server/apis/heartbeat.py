"""Heartbeat (key 12), versions 0-3: a member is alive; ``REBALANCE_IN_PROGRESS`` asks it to rejoin.

Version 3 carries ``group_instance_id``.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v3.response import HeartbeatResponse

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import code, group_id_problem
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 12
MIN_VERSION: Final = 0
MAX_VERSION: Final = 3


async def handle(broker: Broker, request: DecodedRequest) -> HeartbeatResponse:
    body = request.body
    if group_id_problem(body.group_id):
        return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_group_id)
    error = broker.engine.coordinator.heartbeat(
        body.group_id, body.member_id or "", int(body.generation_id),
        group_instance_id=getattr(body, "group_instance_id", None),
    )
    return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=code(error))
