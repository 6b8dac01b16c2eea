"""Small writers of OpenAI-style chat files for the importer and durability tests, and a count
of the imported rows (a store also holds the carried index ingestion writes beside them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def chat_messages(n: int, *, tag: str = "m") -> list[dict[str, Any]]:
    """``n`` alternating user/assistant messages with distinct, searchable text."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"{tag} message number {i}"} for i in range(n)]


def write_json(path: Path, value: Any) -> Path:
    """Write ``value`` as pretty JSON and return the path."""
    path.write_text(json.dumps(value, indent=1), encoding="utf-8")
    return path


def write_jsonl(path: Path, values: list[Any]) -> Path:
    """Write one JSON value per line and return the path."""
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="utf-8")
    return path


def imported_count(log: Any) -> int:
    """How many rows of the store were imported (``run_id = 'ingest'``)."""
    rows = log.execute("SELECT count(*) AS n FROM conversation_history WHERE run_id = 'ingest'")
    return int(rows[0]["n"])


NOT_CARRIED = "substr(session_id, 1, 6) != 'index:'"
"""SQL condition: a row that is not a carried index (those live in ``index:<task>`` sessions)."""
