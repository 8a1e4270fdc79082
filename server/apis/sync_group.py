"""SyncGroup (key 14), versions 0-3: the leader hands in the assignment; every member gets its share.

A follower's request parks until the leader's arrives (or the group starts
another rebalance: ``REBALANCE_IN_PROGRESS``). Version 3 carries
``group_instance_id``.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.sync_group.v3.response import SyncGroupResponse

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import code, group_id_problem
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 14
MIN_VERSION: Final = 0
MAX_VERSION: Final = 3


async def handle(broker: Broker, request: DecodedRequest) -> SyncGroupResponse:
    body = request.body
    if group_id_problem(body.group_id):
        return SyncGroupResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_group_id, assignment=b"")
    result = await broker.engine.coordinator.sync(
        body.group_id, int(body.generation_id), body.member_id or "",
        group_instance_id=getattr(body, "group_instance_id", None),
        assignments={a.member_id: bytes(a.assignment) for a in body.assignments or ()},
    )
    return SyncGroupResponse(throttle_time=NO_THROTTLE, error_code=code(result.error), assignment=result.assignment)
