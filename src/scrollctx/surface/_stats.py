"""Facts about a store for ``scroll stats``, read through the same read-only surface."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrollctx.surface._surface import MemorySurface

__all__ = ["store_stats"]


def store_stats(ms: MemorySurface, db_path: Path) -> dict[str, Any]:
    """Return events, sessions, kinds with counts, last seq, fts5, payload files/bytes, db size."""
    counts = ms.sql_query(
        "SELECT count(*) AS events, count(DISTINCT session_id) AS sessions "
        "FROM hist.conversation_history"
    )[0]
    kinds = ms.sql_query(
        "SELECT kind, count(*) AS events FROM hist.conversation_history "
        "GROUP BY kind ORDER BY events DESC, kind"
    )
    last = ms.sql_query("SELECT seq FROM hist.sqlite_sequence WHERE name = 'conversation_history'")
    files, payload_bytes = _payload_usage(db_path.parent / "payloads")
    return {
        "store": str(db_path.parent),
        "events": counts["events"],
        "sessions": counts["sessions"],
        "kinds": {row["kind"]: row["events"] for row in kinds},
        "last_seq": last[0]["seq"] if last else 0,
        "fts5": ms.has_fts5,
        "payload_files": files,
        "payload_bytes": payload_bytes,
        "db_bytes": sum(
            p.stat().st_size
            for p in (db_path, db_path.with_name(db_path.name + "-wal"))
            if p.is_file()
        ),
    }


def _payload_usage(root: Path) -> tuple[int, int]:
    if not root.is_dir():
        return 0, 0
    sizes = [
        p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")
    ]
    return len(sizes), sum(sizes)
