"""Gold labels for retrieval: LoCoMo evidence dialog ids and BEAM ``source_chat_ids``.

Each benchmark question becomes a :class:`Probe`: the raw question text and the set of turn ids
that hold its evidence. Turn ids are strings: LoCoMo ``D<session>:<turn>`` and BEAM message ids
(``"17"``). Invariants:

- every gold id of a probe resolves to a turn of its conversation; probes left with no gold id
  are excluded and counted, never scored;
- LoCoMo category 5 (adversarial) and BEAM ``abstention`` questions are excluded and counted;
- the order of probes follows the source files, so runs are deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.bench._files import read_json
from scrollctx.errors import UsageError

__all__ = [
    "BEAM_SIZES",
    "BeamChat",
    "LabelCounts",
    "LocomoConversation",
    "Probe",
    "beam_chats",
    "flatten_source_ids",
    "load_locomo",
    "normalize_dia_id",
    "resolve_evidence",
]

BEAM_SIZES: tuple[str, ...] = ("100K", "500K", "1M")
_ADVERSARIAL = 5
_DIA_ID = re.compile(r"^D:?0*(\d+):0*(\d+)$")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True, slots=True)
class Probe:
    """One retrieval question: its text and the turn ids of its evidence."""

    qid: str
    question: str
    gold: frozenset[str]
    group: str
    """LoCoMo category code (``"1"``…``"4"``) or BEAM ability (``"knowledge_update"``)."""


@dataclass(slots=True)
class LabelCounts:
    """How many questions a benchmark has and why some were not scored."""

    total: int = 0
    excluded: dict[str, int] = field(default_factory=dict)

    def exclude(self, reason: str) -> None:
        """Count one question left out for ``reason``."""
        self.excluded[reason] = self.excluded.get(reason, 0) + 1

    @property
    def scored(self) -> int:
        """Questions kept for scoring."""
        return self.total - sum(self.excluded.values())

    def merge(self, other: LabelCounts) -> None:
        """Add ``other``'s counts to these."""
        self.total += other.total
        for reason, count in other.excluded.items():
            self.excluded[reason] = self.excluded.get(reason, 0) + count


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    """One LoCoMo sample: its raw JSON object, its turn ids and its scored probes."""

    sample_id: str
    sample: Mapping[str, Any]
    turn_ids: frozenset[str]
    probes: tuple[Probe, ...]
    counts: LabelCounts


@dataclass(frozen=True, slots=True)
class BeamChat:
    """One BEAM chat: the folder holding ``chat.json``, its message ids and scored probes."""

    size: str
    name: str
    chat_path: Path
    turn_ids: frozenset[str]
    probes: tuple[Probe, ...]
    counts: LabelCounts


# -- LoCoMo ------------------------------------------------------------------------------------


def normalize_dia_id(token: str) -> str | None:
    """Return the canonical ``D<session>:<turn>`` form of one evidence token, or ``None``.

    Leading zeros are dropped (``D30:05`` -> ``D30:5``) and a stray colon after ``D`` is
    removed (``D:11:26`` -> ``D11:26``); anything else (``D``) is not a dialog id.
    """
    match = _DIA_ID.match(token.strip())
    if match is None:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def resolve_evidence(evidence: Iterable[Any], known: Iterable[str]) -> frozenset[str]:
    """Split, normalize and resolve raw LoCoMo evidence strings against a conversation's ids.

    Strings are split on ``;`` and whitespace (``"D8:6; D9:17"``, ``"D9:1 D4:4"``); ids that
    do not exist in the conversation (``D10:19`` where session 10 is shorter) are dropped.
    """
    known_ids = set(known)
    found: set[str] = set()
    for raw in evidence:
        for token in re.split(r"[;\s]+", str(raw)):
            dia_id = normalize_dia_id(token) if token else None
            if dia_id is not None and dia_id in known_ids:
                found.add(dia_id)
    return frozenset(found)


def load_locomo(path: Path) -> list[LocomoConversation]:
    """Read ``locomo10.json`` and return its conversations with their scored probes."""
    samples = read_json(path)
    if not isinstance(samples, list):
        raise UsageError(f"{path} is not a LoCoMo file (expected a JSON list of samples)")
    return [_locomo_conversation(sample, path) for sample in samples]


def _locomo_conversation(sample: Any, path: Path) -> LocomoConversation:
    if not isinstance(sample, dict) or "conversation" not in sample or "qa" not in sample:
        raise UsageError(f"{path} holds an entry that is not a LoCoMo sample")
    sample_id = str(sample.get("sample_id", "?"))
    turn_ids = frozenset(_locomo_turn_ids(sample["conversation"]))
    counts = LabelCounts()
    probes = []
    for index, qa in enumerate(sample["qa"]):
        counts.total += 1
        probe = _locomo_probe(sample_id, index, qa, turn_ids, counts)
        if probe is not None:
            probes.append(probe)
    return LocomoConversation(sample_id, sample, turn_ids, tuple(probes), counts)


def _locomo_turn_ids(conversation: Mapping[str, Any]) -> Iterator[str]:
    for key, turns in conversation.items():
        if _SESSION_KEY.match(key) and isinstance(turns, list):
            for turn in turns:
                dia_id = normalize_dia_id(str(turn.get("dia_id", "")))
                if dia_id is not None:
                    yield dia_id


def _locomo_probe(
    sample_id: str, index: int, qa: Mapping[str, Any], known: frozenset[str], counts: LabelCounts
) -> Probe | None:
    if qa.get("category") == _ADVERSARIAL:
        counts.exclude("category 5 (adversarial)")
        return None
    gold = resolve_evidence(qa.get("evidence") or [], known)
    if not gold:
        counts.exclude("no resolvable evidence")
        return None
    question = str(qa.get("question", ""))
    return Probe(f"{sample_id}#{index}", question, gold, str(qa.get("category")))


# -- BEAM --------------------------------------------------------------------------------------


def flatten_source_ids(value: Any) -> list[str]:
    """Flatten a BEAM ``source_chat_ids`` value (a list, or a dict of lists) to unique ids.

    Order of first appearance is kept; ``None`` and empty containers give ``[]``.
    """
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, Mapping):
            stack[0:0] = list(item.values())
        elif isinstance(item, list | tuple):
            stack[0:0] = list(item)
        elif item is not None and str(item) not in found:
            found.append(str(item))
    return found


def beam_chats(root: Path, sizes: Iterable[str]) -> list[BeamChat]:
    """Return the BEAM chats of ``sizes`` under ``root`` (``…/beam/chats``) that have a chat file.

    Chats are ordered by size as given, then by their numeric folder name.
    """
    chats = []
    for size in sizes:
        if size not in BEAM_SIZES:
            raise UsageError(f"unknown BEAM size {size!r}; choose from {', '.join(BEAM_SIZES)}")
        folders = [p for p in (root / size).glob("*") if (p / "chat.json").is_file()]
        for folder in sorted(folders, key=lambda p: (len(p.name), p.name)):
            chats.append(_beam_chat(size, folder))
    return chats


def _beam_chat(size: str, folder: Path) -> BeamChat:
    chat_path = folder / "chat.json"
    turn_ids = frozenset(_beam_message_ids(read_json(chat_path)))
    questions_path = folder / "probing_questions" / "probing_questions.json"
    questions = read_json(questions_path) if questions_path.is_file() else {}
    counts = LabelCounts()
    probes = []
    for ability, items in questions.items():
        for index, item in enumerate(items):
            counts.total += 1
            probe = _beam_probe(
                f"beam/{size}/{folder.name}", ability, index, item, turn_ids, counts
            )
            if probe is not None:
                probes.append(probe)
    return BeamChat(size, folder.name, chat_path, turn_ids, tuple(probes), counts)


def _beam_message_ids(chat: Any) -> Iterator[str]:
    stack = [chat]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "role" in item and "id" in item:
                yield str(item["id"])
            stack.extend(v for v in item.values() if isinstance(v, list | dict))
        elif isinstance(item, list):
            stack.extend(item)


def _beam_probe(
    chat_key: str,
    ability: str,
    index: int,
    item: Mapping[str, Any],
    known: frozenset[str],
    counts: LabelCounts,
) -> Probe | None:
    if ability == "abstention":
        counts.exclude("abstention")
        return None
    gold = frozenset(i for i in flatten_source_ids(item.get("source_chat_ids")) if i in known)
    if not gold:
        counts.exclude("no resolvable source_chat_ids")
        return None
    return Probe(f"{chat_key}#{ability}/{index}", str(item.get("question", "")), gold, ability)
