"""The Kafka RecordBatch v2 codec of the wire front end (server/records.py): CPU time per record.

    .venv/bin/python bench/kafka_records_bench.py [--records 10000] [--value-bytes 100] [--rounds 7]

Prints CPU microseconds per record (the best of --rounds, process time: what a
busy shared machine disturbs least) for decode_batch of one uncompressed batch
built by kafka-python's reference builder, encode_batch of the same records,
and kafka-python's own reader as a yardstick. This is the work the server does
per record today (a Produce decodes, a Fetch encodes; docs/PERFORMANCE.md,
"Kafka clients over the wire").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from seglog.server.records import decode_batch, encode_batch


def best_us_per_record(action: Callable[[], object], records: int, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        action()
        samples.append(time.process_time() - start)
    return min(samples) / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i in range(args.records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"x" * args.value_bytes, headers=[])
    data = bytes(builder.build())
    decoded = decode_batch(data).records
    records = [r._replace(offset=i) for i, r in enumerate(decoded)]
    n, rounds = args.records, args.rounds
    actions: dict[str, Callable[[], object]] = {
        "decode_batch": lambda: decode_batch(data),
        "encode_batch": lambda: encode_batch(records),
        "kafka-python's reader": lambda: list(DefaultRecordBatch(data)),
    }
    for name, action in actions.items():
        print(f"{name:24}{best_us_per_record(action, n, rounds):6.2f} us/record")


if __name__ == "__main__":
    main()
