"""Reading the benchmarks' own JSON files (questions, labels, chats) with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError, UsageError

__all__ = ["read_json"]


def read_json(path: Path) -> Any:
    """Load a benchmark JSON file; a missing file or bad JSON is a one-line usage error."""
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as exc:
        raise UsageError(f"benchmark file not found: {path}; pass --data DIR") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(
            f"{path} is not valid JSON ({exc}); check the file", path=str(path)
        ) from exc
