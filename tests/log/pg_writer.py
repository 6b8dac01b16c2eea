"""A writer process for the PostgreSQL tests: appends keyed batches and acknowledges each.

Usage: python pg_writer.py URL NAME BATCHES SIZE REPLICA_DIR

Batch ``b`` holds SIZE events with dedup keys ``NAME:b:i``, so a rerun re-sends the same
events; after each batch's append returned (committed) it prints ``ack b`` and flushes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scrollctx.log import Kind, NewEvent
from scrollctx.log._postgres import PostgresEventStore


def main(url: str, name: str, batches: int, size: int, replica_dir: str) -> None:
    replica = Path(replica_dir) / "history.db"
    with PostgresEventStore.open(url, replica_path=replica, retry_for=30.0) as store:
        for batch in range(batches):
            store.append_many(
                NewEvent(
                    session_id=name,
                    kind=Kind.USER_MESSAGE,
                    content=f"{name} batch {batch} event {i} " + "filler " * 20,
                    dedup_key=f"{name}:{batch}:{i}",
                )
                for i in range(size)
            )
            print(f"ack {batch}", flush=True)


if __name__ == "__main__":
    url, name, batches, size, replica_dir = sys.argv[1:6]
    main(url, name, int(batches), int(size), replica_dir)
