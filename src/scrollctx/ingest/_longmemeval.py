"""LongMemEval importer: a JSON array of questions, each with its own haystack of sessions.

Mapping (documented choices):

- Each question is its own conversation (memory is rebuilt per question): ``task_id``
  ``longmemeval/<question_id>``; ``session_id`` ``lme:<question_id>:<haystack_session_id>`` (a
  session id repeated inside one haystack gets ``#2``, ``#3``... so both copies are kept);
  ``dedup_key`` ``lme:<question_id>:<haystack_session_id>:t<turn position>``.
- Sessions are ordered chronologically by ``haystack_dates`` (stable, so equal dates keep the
  file order; undated sessions keep their place after the dated ones before them). The oracle
  file is not sorted; S and M are.
- ``step_index`` is the chronological session number (1-based). Metadata: ``question_id``,
  ``question_type``, ``haystack_session_id``, ``has_answer`` (exactly as in the source, absent
  when the source has none), ``answer_session`` (the session is in ``answer_session_ids``),
  ``turn`` (1-based position in the source session, the official turn-id suffix) and
  ``date_time`` (the raw date).
- The question, answer and question date are labels, not history: they are not imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError
from scrollctx.ingest._jsonstream import Sample, iter_array
from scrollctx.ingest._turns import Conversation, parse_date, require
from scrollctx.log import NewEvent

__all__ = ["read_longmemeval", "sniff_longmemeval"]


def sniff_longmemeval(sample: Sample) -> bool:
    """A top-level array whose records have ``question_id`` and ``haystack_sessions``."""
    first = sample.first
    return (
        sample.shape == "array"
        and isinstance(first, dict)
        and "question_id" in first
        and isinstance(first.get("haystack_sessions"), list)
    )


def read_longmemeval(path: Path, sample: Sample) -> Iterator[NewEvent]:
    """Yield one event per haystack turn of every question, sessions in date order."""
    for number, record in enumerate(iter_array(path), start=1):
        yield from _question_events(path, record, f"record {number}")


def _question_events(path: Path, record: Any, where: str) -> Iterator[NewEvent]:
    qid = str(require(record, "question_id", (str, int), where, path))
    sessions = require(record, "haystack_sessions", list, qid, path)
    ids = require(record, "haystack_session_ids", list, qid, path)
    dates = record.get("haystack_dates") or [None] * len(sessions)
    if not len(sessions) == len(ids) == len(dates):
        raise FormatError(
            f"{path}: question {qid} has {len(sessions)} haystack_sessions, {len(ids)} "
            f"haystack_session_ids and {len(dates)} haystack_dates; they must match",
            path=str(path),
        )
    gold = {str(s) for s in record.get("answer_session_ids") or []}
    convo = Conversation(task_id=f"longmemeval/{qid}", source="longmemeval")
    base = {"question_id": qid, "question_type": record.get("question_type")}
    seen: dict[str, int] = {}
    for position in _chronological(dates):
        sid = str(ids[position])
        seen[sid] = seen.get(sid, 0) + 1
        session_id = f"lme:{qid}:{sid}" + (f"#{seen[sid]}" if seen[sid] > 1 else "")
        raw_date = dates[position]
        stamp = convo.session(parse_date(raw_date) if isinstance(raw_date, str) else None)
        turns = sessions[position]
        if not isinstance(turns, list):
            raise FormatError(f"{path}: {qid} session {sid} is not a list", path=str(path))
        for turn_no, turn in enumerate(turns, start=1):
            where_turn = f"{qid} session {sid} turn {turn_no}"
            role = str(require(turn, "role", str, where_turn, path))
            text = str(require(turn, "content", str, where_turn, path))
            meta = dict(base, haystack_session_id=sid, answer_session=sid in gold, turn=turn_no)
            if raw_date is not None:
                meta["date_time"] = raw_date
            if "has_answer" in turn:
                meta["has_answer"] = turn["has_answer"]
            yield convo.event(
                stamp,
                session_id,
                f"{session_id}:t{turn_no}",
                role=role,
                speaker=role,
                text=text,
                metadata=meta,
            )


def _chronological(dates: list[Any]) -> list[int]:
    """Positions sorted by date; an undated session stays after the dated one before it."""
    keys: list[datetime] = []
    last = datetime.min
    for raw in dates:
        when = parse_date(raw) if isinstance(raw, str) else None
        last = when or last
        keys.append(last)
    return sorted(range(len(dates)), key=lambda i: keys[i])
