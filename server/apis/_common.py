"""Small values every API handler uses (kio's typed forms of "no throttle", node 0, ...).

Must not import: ``tools``.
"""

from __future__ import annotations

import datetime
from typing import Final

from kio.static.primitive import i32Timedelta

__all__ = ["NO_THROTTLE"]

NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))
