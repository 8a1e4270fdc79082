"""The optional C modules of the segment layer (``_speedups``, ``_kafka_speedups``), imported one way.

Each C module speeds up loops whose Python form, in the module that uses it,
is the reference: a module missing from the build, or ``SEGLOG_PURE_PYTHON=1``
(to compare, or to rule the C out when chasing a bug), leaves the Python path.

Must not import: ``engine`` or ``tools``, nor any other module of ``segments``.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["optional_c_module"]


def optional_c_module(name: str) -> ModuleType | None:
    """``seglog.segments.<name>``, or ``None`` when it is not built or ``SEGLOG_PURE_PYTHON`` is set."""
    if os.environ.get("SEGLOG_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(f"seglog.segments.{name}")
    except ImportError:  # pragma: no cover - built on every supported install; the Python path is tested either way
        return None
