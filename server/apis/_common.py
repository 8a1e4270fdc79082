"""Small values every API handler uses (kio's typed forms of "no throttle", node 0, ...).

Must not import: ``tools``.
"""

from __future__ import annotations

import datetime
import typing
from typing import Final

from kio.static.primitive import TZAware, i32Timedelta

__all__ = ["NO_THROTTLE", "kafka_time", "kafka_timeout"]

NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def kafka_time(ms: int) -> TZAware:
    """An epoch-millisecond time (Kafka's -1 "none" included) as kio's int64 timestamp field takes it."""
    # A cast, not TZAware.parse: kio 0.6's check wants whole seconds (microsecond == 0), which a
    # millisecond time rarely is; its writer sends round(timestamp() * 1000), exact to the ms.
    return typing.cast(TZAware, _EPOCH + datetime.timedelta(milliseconds=ms))


def kafka_timeout(ms: int) -> i32Timedelta:
    """A duration in milliseconds as kio's int32 duration field takes it."""
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))
