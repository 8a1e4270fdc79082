"""JoinGroup (key 11), versions 0-5: join a consumer group; the answer waits for the group's join phase.

The coordinator (``engine.coordinator``, shared with library consumers) does
what Kafka's does: from version 4 a new member without a group instance id
is first answered ``MEMBER_ID_REQUIRED`` with its id, and joins with it
(KIP-394); the leader's answer lists every member's metadata; version 5
carries ``group_instance_id`` (static membership). Version 0 has no
rebalance timeout: the session timeout serves for both, as in Kafka.

The request parks until the join phase ends (every member rejoined, or the
rebalance timeout passed); its connection answers nothing else meanwhile, as
on a Kafka broker. A session timeout outside the server's bounds
(``group.min.session.timeout.ms``/``group.max.session.timeout.ms``) is
answered ``INVALID_SESSION_TIMEOUT``.

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.join_group.v5.response import JoinGroupResponse, JoinGroupResponseMember
from kio.static.primitive import i32

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.apis._groups import code, group_id_problem, ms
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 11
MIN_VERSION: Final = 0
MAX_VERSION: Final = 5


def _refused(error: ErrorCode, member_id: str) -> JoinGroupResponse:
    return JoinGroupResponse(
        throttle_time=NO_THROTTLE, error_code=error, generation_id=i32(-1), protocol_name="", leader="",
        member_id=member_id, members=(),
    )


async def handle(broker: Broker, request: DecodedRequest) -> JoinGroupResponse:
    body = request.body
    member_id = body.member_id or ""
    if group_id_problem(body.group_id):
        return _refused(ErrorCode.invalid_group_id, member_id)
    session_ms = ms(body.session_timeout)
    rebalance = getattr(body, "rebalance_timeout", None)
    rebalance_ms = ms(rebalance) if rebalance is not None else session_ms
    if rebalance_ms <= 0:  # not given (the schema's default, -1): the session timeout, as for version 0
        rebalance_ms = session_ms
    if not broker.group_min_session_timeout_ms <= session_ms <= broker.group_max_session_timeout_ms:
        return _refused(ErrorCode.invalid_session_timeout, member_id)
    instance = getattr(body, "group_instance_id", None)
    result = await broker.engine.coordinator.join(
        body.group_id, member_id,
        protocol_type=body.protocol_type or "",
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols or ()],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        group_instance_id=instance,
        require_known_member_id=request.api_version >= 4 and instance is None,
        client_id=request.client_id or "",
        client_host=request.client_host,
    )
    return JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=code(result.error),
        generation_id=i32(result.generation_id),
        protocol_name=result.protocol_name or "",
        leader=result.leader_id,
        member_id=result.member_id,
        members=tuple(
            JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
            for m in result.members
        ),
    )
