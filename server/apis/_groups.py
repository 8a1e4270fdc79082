"""What the group APIs share: error-code conversion, group id checks, durations in ms.

Must not import: ``tools``.
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from seglog.engine.coordinator import GroupErrorCode
from seglog.engine.errors import SeglogError
from seglog.engine.validate import validate_group

__all__ = ["code", "group_id_problem", "ms"]


def code(error: GroupErrorCode) -> ErrorCode:
    """The wire form of a coordinator's answer (the numbers are Kafka's in both)."""
    return ErrorCode(int(error))


def ms(duration: datetime.timedelta) -> int:
    return int(duration.total_seconds() * 1000)


def group_id_problem(group_id: str | None) -> bool:
    """Whether ``group_id`` cannot name a group here (empty, NUL, not UTF-8, too long): ``INVALID_GROUP_ID``."""
    if group_id is None:
        return True
    try:
        validate_group(group_id)
    except SeglogError:
        return True
    return False
