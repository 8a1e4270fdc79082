"""Helpers shared by the engine tests."""

from __future__ import annotations

import os
from pathlib import Path


def open_log_files_under(root: Path) -> list[str]:
    """The ``.log`` files below ``root`` that this process still holds open (Linux ``/proc``)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)) and target.endswith(".log"):
            out.append(target)
    return out
