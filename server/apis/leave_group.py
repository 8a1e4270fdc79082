"""LeaveGroup (key 13), versions 0-3: members leave; the group rebalances without them at once.

Versions 0-2 name one member; version 3 a batch of members, each by member id
and group instance id (a member id of ``""`` removes the static member of
that instance id, as Kafka's admin tools do), each answered with its own error.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.leave_group.v3.response import LeaveGroupResponse, MemberResponse

from seglog.engine.coordinator import GroupErrorCode
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import code, group_id_problem
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 13
MIN_VERSION: Final = 0
MAX_VERSION: Final = 3


async def handle(broker: Broker, request: DecodedRequest) -> LeaveGroupResponse:
    body = request.body
    batch = request.api_version >= 3
    leaving: list[tuple[str, str | None]] = (
        [(m.member_id or "", m.group_instance_id) for m in body.members or ()]
        if batch
        else [(body.member_id or "", None)]
    )
    if group_id_problem(body.group_id):
        return LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_group_id, members=())
    error, member_errors = broker.engine.coordinator.leave(body.group_id, leaving)
    if not batch and error is GroupErrorCode.NONE and member_errors:
        error = member_errors[0]  # versions 0-2 answer the one member's error at the top
    return LeaveGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=code(error),
        members=tuple(
            MemberResponse(member_id=member_id, group_instance_id=instance, error_code=code(member_error))
            for (member_id, instance), member_error in zip(leaving, member_errors, strict=False)
        ) if batch else (),
    )
