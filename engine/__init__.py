"""seglog's public async API: a log directory of topics, partitions and segments.

Owns: ``Engine`` (a log directory), ``PartitionLog``, ``LogConfig``, ``Record``
and the result types, the exception tree (``engine.errors``), recovery and
checkpoints, retention, consumer-group offsets, and the read-only inspection
module used by the tools.

Must not import: ``tools``. Everything ``tools`` needs is exported here.
"""

from engine import errors

__all__ = ["errors"]
