"""The one build step pyproject.toml cannot declare without an "experimental" warning: the C module.

``seglog.segments._speedups`` (segments/_speedups.c) runs the per-record loops of the
batch codec, ``seglog.segments._kafka_speedups`` (segments/_kafka_speedups.c) the check of a
produced Kafka batch. It is optional: without a C compiler the install still succeeds
and ``seglog.segments.batch`` uses its pure-Python path (same results, slower; see
docs/PERFORMANCE.md "The C fast path").
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # segments/_kafka_records.h, the reader's walk of a Kafka batch's records, is compiled into both.
        Extension(
            "seglog.segments._speedups", sources=["segments/_speedups.c"], depends=["segments/_kafka_records.h"],
            optional=True, extra_compile_args=["-O2"],
        ),
        # The writer's walk of a produced Kafka batch and the reader's of a stored one (segments/kafka_batch.py
        # is their reference).
        Extension(
            "seglog.segments._kafka_speedups", sources=["segments/_kafka_speedups.c"],
            depends=["segments/_kafka_records.h"], optional=True, extra_compile_args=["-O2"],
        ),
    ]
)
