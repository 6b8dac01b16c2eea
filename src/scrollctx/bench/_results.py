"""Result files: one JSON line per (system, question), appended as each question finishes.

Invariants:

- A record is written whole: one ``write`` of a line ending in ``\\n``, flushed and fsynced
  before :meth:`ResultFile.append` returns, under a lock shared by the run's workers.
- Resuming: :meth:`ResultFile.finished` names the (system, qid) pairs whose latest record is
  final (``status`` ``scored`` or ``unscored``); a pair whose latest record is an ``error``
  (the model or judge could not be reached) runs again. The last record of a pair wins.
- A file killed in the middle of a write ends in a torn line; opening it for appending cuts that
  tail (the record was never complete) and says so through :attr:`ResultFile.repaired`. Any
  other line that is not a JSON object is a :class:`~scrollctx.errors.FormatError` naming the
  line: nothing in the file is rewritten or dropped.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError

__all__ = ["FINAL_STATUSES", "ResultFile", "latest_records", "read_records"]

FINAL_STATUSES: frozenset[str] = frozenset({"scored", "unscored"})
"""``scored``: the primary score is there; ``unscored``: its judge reply could not be read."""


def _parse(line: str, path: Path, number: int) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{path} line {number} is not JSON ({exc.msg}); it is not a result file or was "
            "edited; move it aside or fix the line",
            path=str(path),
        ) from exc
    if not isinstance(value, dict) or "qid" not in value or "system" not in value:
        raise FormatError(
            f"{path} line {number} is not a result record (needs 'system' and 'qid')",
            path=str(path),
        )
    return value


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Yield every complete record of a result file (a torn last line is skipped)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise FormatError(f"result file not found: {path}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise FormatError(
            f"{path} is not UTF-8 text; is it a result file?", path=str(path)
        ) from exc
    lines = text.split("\n")
    complete, tail = lines[:-1], lines[-1]
    for number, line in enumerate(complete, 1):
        if line.strip():
            yield _parse(line, path, number)
    del tail  # a final line without its newline was torn by a kill: never complete


def latest_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last record of each (system, qid), in first-seen order."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        latest[(str(record["system"]), str(record["qid"]))] = record
    return list(latest.values())


class ResultFile:
    """An append-only JSONL result file shared by a run's workers.

    Example::

        results = ResultFile(Path("results.jsonl"))
        todo = [q for q in questions if ("scroll", q.qid) not in results.finished()]
        results.append({"system": "scroll", "qid": "q1", "status": "scored", ...})
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.repaired = self._repair_tail()
        self._records = list(read_records(self.path)) if self.path.exists() else []

    def _repair_tail(self) -> int:
        """Cut a torn final line; return how many bytes were cut."""
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return 0
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        with self.path.open("r+b") as handle:
            handle.truncate(keep)
        return len(data) - keep

    def records(self) -> list[dict[str, Any]]:
        """Every record read or appended so far."""
        with self._lock:
            return list(self._records)

    def finished(self) -> set[tuple[str, str]]:
        """(system, qid) pairs whose latest record is final: a rerun skips them."""
        return {
            (str(r["system"]), str(r["qid"]))
            for r in latest_records(self.records())
            if r.get("status") in FINAL_STATUSES
        }

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as a line, durable before returning."""
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self._records.append(record)
