"""LoCoMo importer: ``locomo10.json``, a JSON array of samples (one conversation each).

Mapping (documented choice, the dataset has two human speakers and no assistant):

- ``speaker_a`` becomes role ``user`` and ``speaker_b`` role ``assistant``; the speaker's name is
  kept in ``name`` and written in the content instead of the role
  (``[Session 3 | 2023-05-08] Caroline: text``), as the LoCoMo paper renders dialogues.
- A turn with an image gets `` [image: <blip_caption>]`` appended to its content; the caption,
  ``img_url`` and ``query`` are also kept in metadata.
- ``session_id`` is ``locomo:<sample_id>:s<N>``; ``task_id`` ``locomo/<sample_id>``;
  ``dedup_key`` ``locomo:<sample_id>:<dia_id>``; metadata carries ``dia_id``, ``session`` (N),
  ``sample_id`` and ``speaker``. Sessions are read in numeric order (1, 2, ... 10), which is
  chronological in the data; ``session_<n>_date_time`` keys without a session are ignored.
- The ``qa`` block, summaries and observations are not events: they are benchmark labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError
from scrollctx.ingest._jsonstream import Sample, iter_array
from scrollctx.ingest._turns import Conversation, parse_date, require
from scrollctx.log import NewEvent

__all__ = ["read_locomo", "sniff_locomo"]

_SESSION_KEY = re.compile(r"session_(\d+)")
_IMAGE_FIELDS = ("blip_caption", "img_url", "query")


def sniff_locomo(sample: Sample) -> bool:
    """A top-level array whose records have ``sample_id`` and a ``conversation`` object."""
    first = sample.first
    return (
        sample.shape == "array"
        and isinstance(first, dict)
        and isinstance(first.get("conversation"), dict)
        and "sample_id" in first
    )


def read_locomo(path: Path, sample: Sample) -> Iterator[NewEvent]:
    """Yield one event per dialogue turn of every sample, sessions in order."""
    for number, record in enumerate(iter_array(path), start=1):
        yield from _sample_events(path, record, f"record {number}")


def _sample_events(path: Path, record: Any, where: str) -> Iterator[NewEvent]:
    sample_id = str(require(record, "sample_id", (str, int), where, path))
    conv = require(record, "conversation", dict, f"{where} ({sample_id})", path)
    roles = {
        str(require(conv, "speaker_a", str, f"{sample_id} conversation", path)): "user",
        str(require(conv, "speaker_b", str, f"{sample_id} conversation", path)): "assistant",
    }
    convo = Conversation(task_id=f"locomo/{sample_id}", source="locomo")
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.fullmatch(key)))
    for number in numbers:
        turns = require(conv, f"session_{number}", list, sample_id, path)
        raw_date = conv.get(f"session_{number}_date_time")
        when = parse_date(raw_date) if isinstance(raw_date, str) else None
        stamp = convo.session(when, number)
        session_id = f"locomo:{sample_id}:s{number}"
        for turn in turns:
            where_turn = f"{sample_id} session_{number} turn"
            speaker = str(require(turn, "speaker", str, where_turn, path))
            dia_id = str(require(turn, "dia_id", str, where_turn, path))
            text = str(require(turn, "text", str, f"{sample_id} {dia_id}", path))
            yield convo.event(
                stamp,
                session_id,
                f"locomo:{sample_id}:{dia_id}",
                role=_role(roles, speaker, path, dia_id),
                speaker=speaker,
                name=speaker,
                text=_with_caption(text, turn),
                metadata=_metadata(turn, sample_id, dia_id, number, speaker, raw_date),
            )


def _role(roles: dict[str, str], speaker: str, path: Path, dia_id: str) -> str:
    if speaker not in roles:
        raise FormatError(
            f"{path}: turn {dia_id} is by {speaker!r}, who is neither speaker_a nor speaker_b",
            path=str(path),
        )
    return roles[speaker]


def _with_caption(text: str, turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


def _metadata(
    turn: dict[str, Any], sample_id: str, dia_id: str, number: int, speaker: str, raw: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "sample_id": sample_id,
        "dia_id": dia_id,
        "session": number,
        "speaker": speaker,
    }
    if raw is not None:
        meta["date_time"] = raw
    meta.update({key: turn[key] for key in _IMAGE_FIELDS if key in turn})
    return meta
