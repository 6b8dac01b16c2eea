"""Side-by-side retrieval evaluation: ``ms.search`` against a BM25 baseline on the same turns.

Protocol (one run, both systems):

- every conversation (a LoCoMo sample, a BEAM chat) is ingested with ``ingest_path`` into its
  own fresh store under a work folder, so FTS5 and the baseline see exactly the same documents
  and the same corpus statistics: the conversation's turns, nothing else;
- the query is the raw question text; ``ms.search(question, k=depth, scope="task")`` runs with
  the conversation's task bound, and BM25Okapi ranks the full text of the same rows;
- each ranked list of rows becomes a list of turn ids (repeats removed); the session list keeps
  the first occurrence of each session; both are scored against the question's gold ids.

Hits that map to no turn id (a row without ``dia_id``/``id``) still take their rank, and are
counted in ``unmapped_hits``; gold turns missing from the store stay gold and are counted in
``gold_missing``. Neither happens with a correct importer.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.bench._bm25 import TOKENIZERS, BM25Baseline
from scrollctx.bench._labels import (
    BeamChat,
    LabelCounts,
    LocomoConversation,
    Probe,
    beam_chats,
    load_locomo,
    normalize_dia_id,
)
from scrollctx.bench._metrics import (
    DEFAULT_KS,
    first_occurrences,
    mean_scores,
    score_ranking,
    session_ranking,
)
from scrollctx.errors import UsageError
from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog, Kind
from scrollctx.surface import MemorySurface, open_surface

__all__ = [
    "LEVELS",
    "PAIRED_METRICS",
    "SYSTEMS",
    "Conversation",
    "RetrievalReport",
    "SectionResult",
    "Turn",
    "evaluate_retrieval",
    "locomo_conversations",
    "beam_conversations",
    "read_turns",
]

SYSTEMS: tuple[str, ...] = ("ms.search", "BM25")
LEVELS: tuple[str, ...] = ("turn", "session")
PAIRED_METRICS: tuple[str, ...] = ("mrr", "recall_all@5")
"""Metrics whose per-question wins and losses are counted (turn level)."""
Progress = Callable[[str], None]
Ranker = Callable[[str, int], list[int]]


@dataclass(frozen=True, slots=True)
class Turn:
    """One ingested row as the evaluation sees it."""

    seq: int
    turn_id: str
    session: str
    text: str


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation to evaluate: the file to ingest, its section and its probes."""

    section: str
    key: str
    source: Path
    format: str
    probes: tuple[Probe, ...]
    counts: LabelCounts
    id_field: str
    """The metadata key that carries the turn id (``dia_id`` or ``id``)."""


@dataclass(slots=True)
class SectionResult:
    """Mean scores of both systems on one benchmark section (``locomo``, ``beam/100K``)."""

    name: str
    counts: LabelCounts = field(default_factory=LabelCounts)
    conversations: int = 0
    turns: int = 0
    rows: dict[str, dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    unmapped_hits: dict[str, int] = field(default_factory=dict)
    gold_missing: int = 0
    partial_results: int = 0
    """Searches ``ms.search`` marked partial (a budget cut them short)."""

    @property
    def n(self) -> int:
        """Questions scored."""
        return len(self.groups)

    def means(self, system: str, level: str, group: str | None = None) -> dict[str, float]:
        """Mean scores of ``system`` at ``level``, over all questions or one group."""
        rows = self.rows.get(system, {}).get(level, [])
        if group is not None:
            rows = [row for row, g in zip(rows, self.groups, strict=True) if g == group]
        return mean_scores(rows)

    def paired(self, metric: str, level: str = "turn") -> tuple[int, int, int]:
        """Count questions where ``ms.search`` scores higher, BM25 scores higher, or they tie."""
        ours, theirs = (self.rows.get(s, {}).get(level, []) for s in SYSTEMS)
        pairs = [(a[metric], b[metric]) for a, b in zip(ours, theirs, strict=True)]
        wins = sum(1 for a, b in pairs if a > b)
        losses = sum(1 for a, b in pairs if a < b)
        return wins, losses, len(pairs) - wins - losses

    def to_dict(self) -> dict[str, Any]:
        """Return the section as JSON-able data (means overall and per group)."""
        groups = sorted(set(self.groups), key=lambda g: (len(g), g))
        return {
            "name": self.name,
            "n": self.n,
            "questions": self.counts.total,
            "excluded": dict(self.counts.excluded),
            "conversations": self.conversations,
            "turns": self.turns,
            "metrics": {s: {lv: self.means(s, lv) for lv in LEVELS} for s in SYSTEMS},
            "by_group": {
                g: {
                    "n": self.groups.count(g),
                    **{s: {lv: self.means(s, lv, g) for lv in LEVELS} for s in SYSTEMS},
                }
                for g in groups
            },
            "mean_query_ms": {
                s: 1000 * self.seconds.get(s, 0.0) / self.n if self.n else 0.0 for s in SYSTEMS
            },
            "paired_turn": {m: self.paired(m) for m in PAIRED_METRICS},
            "unmapped_hits": dict(self.unmapped_hits),
            "gold_missing": self.gold_missing,
            "partial_results": self.partial_results,
        }


@dataclass(slots=True)
class RetrievalReport:
    """The outcome of one evaluation run: sections in the order they were run."""

    ks: tuple[int, ...]
    depth: int
    bm25_tokens: str = "whitespace"
    sections: list[SectionResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-able data."""
        return {
            "ks": list(self.ks),
            "depth": self.depth,
            "bm25_tokens": self.bm25_tokens,
            "systems": list(SYSTEMS),
            "sections": [s.to_dict() for s in self.sections],
        }


# -- what to evaluate ---------------------------------------------------------------------------


def locomo_conversations(path: Path, work_dir: Path) -> list[Conversation]:
    """Split ``locomo10.json`` into one single-sample file per conversation under ``work_dir``."""
    conversations = []
    for sample in load_locomo(path):
        source = work_dir / f"locomo-{sample.sample_id}.json"
        source.write_text(json.dumps([dict(sample.sample)]), encoding="utf-8")
        conversations.append(_locomo_conversation(sample, source))
    return conversations


def _locomo_conversation(sample: LocomoConversation, source: Path) -> Conversation:
    return Conversation(
        "locomo", sample.sample_id, source, "locomo", sample.probes, sample.counts, "dia_id"
    )


def beam_conversations(chats_root: Path, sizes: Sequence[str]) -> list[Conversation]:
    """Return one conversation per BEAM chat of ``sizes`` that has a ``chat.json``."""
    return [_beam_conversation(chat) for chat in beam_chats(chats_root, sizes)]


def _beam_conversation(chat: BeamChat) -> Conversation:
    return Conversation(
        f"beam/{chat.size}",
        f"{chat.size}/{chat.name}",
        chat.chat_path,
        "beam",
        chat.probes,
        chat.counts,
        "id",
    )


# -- running -----------------------------------------------------------------------------------


def evaluate_retrieval(
    conversations: Sequence[Conversation],
    *,
    work_dir: Path | None = None,
    limit: int | None = None,
    depth: int = 10,
    ks: Sequence[int] = DEFAULT_KS,
    bm25_tokens: str = "whitespace",
    progress: Progress | None = None,
) -> RetrievalReport:
    """Run both systems over every probe of ``conversations`` and return the mean scores.

    Args:
        work_dir: where the per-conversation stores go (a temporary folder when ``None``).
        limit: evaluate at most this many conversations per section.
        depth: how many rows each system returns per question (``k`` of ``ms.search``).
        bm25_tokens: the baseline's tokenizer (``whitespace`` or ``words``).
        progress: called with one line per conversation.
    """
    if depth < max(ks):
        raise UsageError(f"depth {depth} is below the largest k {max(ks)}; raise --depth")
    if bm25_tokens not in TOKENIZERS:
        raise UsageError(
            f"unknown BM25 tokenizer {bm25_tokens!r}; choose from {', '.join(TOKENIZERS)}"
        )
    report = RetrievalReport(tuple(ks), depth, bm25_tokens)
    with _work_folder(work_dir) as folder:
        for conversation in _limited(conversations, limit):
            section = _section(report, conversation.section)
            if progress is not None:
                progress(f"{conversation.section}: {conversation.key}")
            _evaluate_conversation(conversation, folder, section, report)
    return report


@contextmanager
def _work_folder(work_dir: Path | None) -> Iterator[Path]:
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        yield work_dir
        return
    with tempfile.TemporaryDirectory(prefix="scroll-bench-") as name:
        yield Path(name)


def _limited(conversations: Sequence[Conversation], limit: int | None) -> Iterator[Conversation]:
    taken: dict[str, int] = {}
    for conversation in conversations:
        if limit is not None and taken.get(conversation.section, 0) >= limit:
            continue
        taken[conversation.section] = taken.get(conversation.section, 0) + 1
        yield conversation


def _section(report: RetrievalReport, name: str) -> SectionResult:
    for section in report.sections:
        if section.name == name:
            return section
    section = SectionResult(name)
    report.sections.append(section)
    return section


def _evaluate_conversation(
    conversation: Conversation, folder: Path, section: SectionResult, report: RetrievalReport
) -> None:
    db_path = folder / conversation.key.replace("/", "-") / "history.db"
    if db_path.exists():
        raise UsageError(f"{db_path} already exists; use an empty --work folder")
    with EventLog.open(db_path) as log:
        ingest_path(log, conversation.source, format=conversation.format)
        turns = read_turns(log, conversation.id_field)
        task_id = _task_id(log)
    section.conversations += 1
    section.turns += len(turns)
    section.counts.merge(conversation.counts)
    with open_surface(db_path, task_id=task_id) as ms:
        rankers = {
            "ms.search": _surface_ranker(ms, section),
            "BM25": _bm25_ranker(turns, report.bm25_tokens),
        }
        _score_probes(conversation.probes, turns, rankers, section, report)


def _task_id(log: EventLog) -> str | None:
    # One conversation per store, so one task; the first keeps a malformed import scorable.
    rows = log.execute(
        "SELECT task_id FROM conversation_history WHERE task_id IS NOT NULL ORDER BY seq LIMIT 1"
    )
    return str(rows[0][0]) if rows else None


def read_turns(log: EventLog, id_field: str) -> list[Turn]:
    """Return the imported turns of ``log`` in seq order, with their id, session and full text."""
    turns = []
    for event in log.span(1, log.last_seq()):
        if event.kind != Kind.CONVERSATION:
            continue
        raw_id = (event.metadata or {}).get(id_field)
        turn_id = _canonical_turn_id(raw_id, id_field)
        session = str(event.step_index) if event.step_index is not None else "?"
        turns.append(Turn(event.seq, turn_id or f"seq:{event.seq}", session, log.full_text(event)))
    return turns


def _canonical_turn_id(raw: Any, id_field: str) -> str | None:
    if raw is None:
        return None
    if id_field == "dia_id":
        return normalize_dia_id(str(raw))
    return str(raw)


def _surface_ranker(ms: MemorySurface, section: SectionResult) -> Ranker:
    def rank(question: str, k: int) -> list[int]:
        hits = ms.search(question, k=k, scope="task")
        if hits.partial:
            section.partial_results += 1
        return [int(hit["seq"]) for hit in hits]

    return rank


def _bm25_ranker(turns: Sequence[Turn], tokens: str) -> Ranker:
    index = BM25Baseline([t.text for t in turns], tokens=tokens)

    def rank(question: str, k: int) -> list[int]:
        return [turns[i].seq for i in index.rank(question, k)]

    return rank


def _score_probes(
    probes: Sequence[Probe],
    turns: Sequence[Turn],
    rankers: dict[str, Ranker],
    section: SectionResult,
    report: RetrievalReport,
) -> None:
    by_seq = {t.seq: t for t in turns}
    session_of_turn = {t.turn_id: t.session for t in turns}
    for probe in probes:
        section.gold_missing += sum(1 for g in probe.gold if g not in session_of_turn)
        gold_sessions = {session_of_turn.get(g, f"missing:{g}") for g in probe.gold}
        for system, ranker in rankers.items():
            started = time.perf_counter()
            seqs = ranker(probe.question, report.depth)
            section.seconds[system] = section.seconds.get(system, 0.0) + (
                time.perf_counter() - started
            )
            turn_ids = first_occurrences(_turn_id(s, by_seq) for s in seqs)
            unmapped = sum(1 for t in turn_ids if t.startswith("seq:"))
            section.unmapped_hits[system] = section.unmapped_hits.get(system, 0) + unmapped
            sessions = session_ranking(turn_ids, lambda t: session_of_turn.get(t, t))
            levels = section.rows.setdefault(system, {})
            levels.setdefault("turn", []).append(score_ranking(turn_ids, probe.gold, report.ks))
            levels.setdefault("session", []).append(
                score_ranking(sessions, gold_sessions, report.ks)
            )
        section.groups.append(probe.group)


def _turn_id(seq: int, by_seq: dict[int, Turn]) -> str:
    turn = by_seq.get(seq)
    return turn.turn_id if turn is not None else f"seq:{seq}"
