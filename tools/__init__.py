"""seglog's tools: the ``seglog`` command line, replay/record, benchmarks, Spark.

Thin shells over what ``engine`` exports (and ``server``, for ``seglog serve``):
tools import ``engine`` (and, for the format-level readers, nothing below it
that ``engine`` does not re-export). Nothing in ``server``, ``engine``,
``segments`` or ``indexes`` imports from here.
"""
