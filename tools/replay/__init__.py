"""Recorded workloads: the file format, its validator, replay, reports and recording.

Owns: the workload format of docs/WORKLOADS.md (Parquet or JSON Lines, Spark's
Kafka-source columns first) and its validator (:mod:`seglog.tools.replay.format`,
:mod:`seglog.tools.replay.validate`); the replay plan (:mod:`seglog.tools.replay.plan`: who
sends what, in which order, when, into which partition); the pacing clock
(:mod:`seglog.tools.replay.pacing`); the async runner (:mod:`seglog.tools.replay.runner`);
latency/throughput statistics, the JSON report, the terminal summary and the
PNG plots (:mod:`seglog.tools.replay.stats`, :mod:`seglog.tools.replay.report`,
:mod:`seglog.tools.replay.plots`); recording from a log directory or from an
application's calls (:mod:`seglog.tools.replay.recorder`); and the generator of the
bundled sample workload (:mod:`seglog.tools.replay.sample`).

Uses only what ``engine`` exports (``Engine``, ``LogConfig``, ``Record``,
``errors``) and the file system listing of a log directory for the storage
figures of a report. Must not import ``segments`` or ``indexes``.

The submodules that need the ``replay`` extra (pyarrow, hdrhistogram) or the
``plots`` extra (matplotlib, for :mod:`seglog.tools.replay.plots` only) import it at
module level; this package's ``__init__`` imports none of them, so ``seglog
--help`` works without the extras.
"""
