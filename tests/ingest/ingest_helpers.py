"""Small writers of OpenAI-style chat files for the importer and durability tests."""

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
