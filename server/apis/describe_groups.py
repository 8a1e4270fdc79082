"""DescribeGroups (key 15), versions 0-5: each group's state, protocol and members.

As Kafka: the protocol and each member's metadata and assignment are given
only while the group is ``Stable``; a group the coordinator does not know is
answered ``Dead`` with no error; a group with only committed offsets is
``Empty``. Authorized operations are not computed (version 3 on: the
"not requested" value).

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.describe_groups.v5.response import DescribedGroup, DescribedGroupMember, DescribeGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.static.primitive import i32

from seglog.engine.coordinator import GroupState
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 15
MIN_VERSION: Final = 0
MAX_VERSION: Final = 5

_NOT_REQUESTED: Final = i32(-(2**31))  # Kafka's "authorized operations were not asked for"


async def handle(broker: Broker, request: DecodedRequest) -> DescribeGroupsResponse:
    described = []
    for group_id in request.body.groups or ():
        desc = broker.engine.coordinator.describe(group_id) if group_id else None
        if desc is None:
            described.append(DescribedGroup(
                error_code=ErrorCode.none, group_id=GroupId(group_id), group_state=GroupState.DEAD.value,
                protocol_type="", protocol_data="", members=(), authorized_operations=_NOT_REQUESTED,
            ))
            continue
        described.append(DescribedGroup(
            error_code=ErrorCode.none,
            group_id=GroupId(group_id),
            group_state=desc.state.value,
            protocol_type=desc.protocol_type,
            protocol_data=desc.protocol,
            members=tuple(
                DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment,
                )
                for m in desc.members
            ),
            authorized_operations=_NOT_REQUESTED,
        ))
    return DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=tuple(described))
