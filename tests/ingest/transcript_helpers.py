"""Reading the transcript fixtures raw, for tests that derive expected counts on their own."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from scrollctx.log import EventLog

TRANSCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"


def raw_records(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL fixture, parsed with the standard library only."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def kind_role_counts(
    log: EventLog, where: str = "run_id = 'ingest'", params: tuple[Any, ...] = ()
) -> Counter:
    """(kind, role) -> number of rows in the store matching ``where`` (default: every imported
    row; the carried index ingestion writes beside them is Scroll's own state)."""
    rows = log.execute(
        f"SELECT kind, role, count(*) AS n FROM conversation_history WHERE {where} GROUP BY 1, 2",
        params,
    )
    return Counter({(row["kind"], row["role"]): row["n"] for row in rows})


def rows(log: EventLog, where: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows as dicts with ``metadata`` and ``tool_input`` decoded."""
    found = []
    for row in log.execute(
        f"SELECT * FROM conversation_history WHERE {where} ORDER BY seq", params
    ):
        item = dict(row)
        item["metadata"] = json.loads(item["metadata"])
        item["tool_input"] = None if item["tool_input"] is None else json.loads(item["tool_input"])
        found.append(item)
    return found
