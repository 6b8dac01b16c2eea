"""Side-by-side retrieval evaluation: ``ms.search`` against fair baselines on the same rows.

Protocol (one run, every system):

- every conversation (a LoCoMo sample, a BEAM chat) of the chosen split (``_split``) is ingested
  with ``ingest_path`` into its own fresh store under a work folder, then embedded with
  ``embed_pending`` (the semantic channel's own code path), so FTS5, the vectors and the
  baselines see exactly the same rows with the same corpus statistics; the rows each system
  ranks are checked to be the same set before any question is asked;
- the query is the raw question text; ``ms.search(question, k=depth, scope="task")`` runs with
  the conversation's task bound, in its default mode and in each single channel, and every
  baseline of ``_rankers`` ranks the full text of the same rows;
- each ranked list of rows becomes a list of turn ids (repeats removed); the session list keeps
  the first occurrence of each session; both are scored against the question's gold ids, and
  each question remembers its conversation, so intervals can be clustered by conversation.

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

from scrollctx.bench._bootstrap import Interval, paired_interval
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
from scrollctx.bench._rankers import (
    BASELINES,
    OURS,
    PartialCounter,
    Ranker,
    Turn,
    baseline_rankers,
    surface_rankers,
)
from scrollctx.bench._split import SPLITS, split_of
from scrollctx.errors import UsageError
from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog, Kind
from scrollctx.surface import Encoder, embed_pending, open_surface

__all__ = [
    "LEVELS",
    "Conversation",
    "RetrievalReport",
    "SectionResult",
    "Turn",
    "beam_conversations",
    "evaluate_retrieval",
    "locomo_conversations",
    "prepare_store",
    "read_turns",
]

LEVELS: tuple[str, ...] = ("turn", "session")
Progress = Callable[[str], None]
CEILING_K = 5
"""recall_all@k is unreachable for a question with more than this many gold turns."""


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

    @property
    def split(self) -> str:
        """``dev`` or ``test`` (see ``_split``)."""
        return split_of(self.section, self.key)


@dataclass(slots=True)
class SectionResult:
    """Per-question scores of every system on one benchmark section (``locomo``, ``beam/100K``)."""

    name: str
    systems: tuple[str, ...] = ()
    counts: LabelCounts = field(default_factory=LabelCounts)
    conversations: int = 0
    turns: int = 0
    rows: dict[str, dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    """The conversation of each question (the bootstrap's cluster)."""
    gold_sizes: list[int] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    unmapped_hits: dict[str, int] = field(default_factory=dict)
    gold_missing: int = 0
    partial_results: int = 0
    """Searches ``ms.search`` marked partial (a budget cut them short)."""

    @property
    def n(self) -> int:
        """Questions scored."""
        return len(self.groups)

    @property
    def ceiling(self) -> float:
        """The highest recall_all@5 any system can reach: questions with at most 5 gold turns."""
        return sum(1 for g in self.gold_sizes if g <= CEILING_K) / self.n if self.n else 0.0

    def means(self, system: str, level: str, group: str | None = None) -> dict[str, float]:
        """Mean scores of ``system`` at ``level``, over all questions or one group."""
        rows = self.rows.get(system, {}).get(level, [])
        if group is not None:
            rows = [row for row, g in zip(rows, self.groups, strict=True) if g == group]
        return mean_scores(rows)

    def difference(self, ours: str, theirs: str, metric: str, level: str = "turn") -> Interval:
        """``ours - theirs`` on ``metric``: the mean and its 95% interval (by conversation)."""
        a, b = ([row[metric] for row in self.rows[system][level]] for system in (ours, theirs))
        return paired_interval(a, b, self.clusters)

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
            "recall_all@5_ceiling": self.ceiling,
            "metrics": {s: {lv: self.means(s, lv) for lv in LEVELS} for s in self.systems},
            "by_group": {
                g: {
                    "n": self.groups.count(g),
                    **{s: {lv: self.means(s, lv, g) for lv in LEVELS} for s in self.systems},
                }
                for g in groups
            },
            "mean_query_ms": {
                s: 1000 * self.seconds.get(s, 0.0) / self.n if self.n else 0.0 for s in self.systems
            },
            "unmapped_hits": dict(self.unmapped_hits),
            "gold_missing": self.gold_missing,
            "partial_results": self.partial_results,
        }


@dataclass(slots=True)
class RetrievalReport:
    """The outcome of one evaluation run: sections in the order they were run."""

    ks: tuple[int, ...]
    depth: int
    split: str = "test"
    semantic: bool = True
    sections: list[SectionResult] = field(default_factory=list)

    @property
    def systems(self) -> tuple[str, ...]:
        """Every system of the run, ``ms.search``'s first."""
        if not self.semantic:
            return ("ms.search bm25", "rank_bm25", "bm25s")
        return OURS + BASELINES

    @property
    def ours(self) -> str:
        """The system the targets are about: ``ms.search`` in its default mode."""
        return self.systems[0]

    @property
    def baselines(self) -> tuple[str, ...]:
        """The systems ``ms.search`` is compared with."""
        return tuple(s for s in self.systems if s in BASELINES)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-able data."""
        return {
            "ks": list(self.ks),
            "depth": self.depth,
            "split": self.split,
            "systems": list(self.systems),
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
    split: str = "test",
    encoder: Encoder | None = None,
    work_dir: Path | None = None,
    limit: int | None = None,
    depth: int = 10,
    ks: Sequence[int] = DEFAULT_KS,
    progress: Progress | None = None,
) -> RetrievalReport:
    """Run every system over every probe of ``conversations`` in ``split``; return the scores.

    Args:
        split: ``dev``, ``test`` or ``all`` conversations (see ``_split``).
        encoder: the semantic channel's encoder; None runs the lexical systems only.
        work_dir: where the per-conversation stores go (a temporary folder when ``None``).
        limit: evaluate at most this many conversations per section (after the split).
        depth: how many rows each system returns per question (``k`` of ``ms.search``).
        progress: called with one line per conversation.
    """
    if depth < max(ks):
        raise UsageError(f"depth {depth} is below the largest k {max(ks)}; raise --depth")
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    report = RetrievalReport(tuple(ks), depth, split, encoder is not None)
    chosen = [c for c in conversations if split == "all" or c.split == split]
    with _work_folder(work_dir) as folder:
        for conversation in _limited(chosen, limit):
            section = _section(report, conversation.section)
            if progress is not None:
                progress(f"{conversation.section}: {conversation.key} ({conversation.split})")
            _evaluate_conversation(conversation, folder, section, report, encoder)
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
    section = SectionResult(name, report.systems)
    report.sections.append(section)
    return section


@dataclass(frozen=True, slots=True)
class PreparedStore:
    """One conversation's store, ready to search: its file, rows and task."""

    db_path: Path
    turns: list[Turn]
    task_id: str | None


def prepare_store(
    conversation: Conversation, folder: Path, encoder: Encoder | None
) -> PreparedStore:
    """Ingest (and embed, with ``encoder``) one conversation into a fresh store under ``folder``.

    Raises:
        UsageError: the store already exists (a reused work folder).
        RuntimeError: the rows the systems would rank differ (a bug, never a data problem).
    """
    db_path = folder / conversation.key.replace("/", "-") / "history.db"
    if db_path.exists():
        raise UsageError(f"{db_path} already exists; use an empty --work folder")
    with EventLog.open(db_path) as log:
        ingest_path(log, conversation.source, format=conversation.format)
        if encoder is not None:
            embed_pending(log, encoder)
        turns = read_turns(log, conversation.id_field)
        task_id = _task_id(log)
        _check_same_rows(log, turns, task_id, encoder)
    return PreparedStore(db_path, turns, task_id)


def _check_same_rows(
    log: EventLog, turns: list[Turn], task_id: str | None, encoder: Encoder | None
) -> None:
    """The baselines rank ``turns``; ms.search ranks the task's searchable rows: the same set."""
    indexed = {
        int(r[0])
        for r in log.execute(
            "SELECT seq FROM conversation_history WHERE searchable = 1 AND task_id IS ?",
            (task_id,),
        )
    }
    if indexed != {t.seq for t in turns}:
        raise RuntimeError(f"{log.path}: ms.search and the baselines would rank different rows")
    if encoder is not None and log.embedded_through(encoder.name) != log.last_seq():
        raise RuntimeError(f"{log.path}: not every row was embedded")


def _evaluate_conversation(
    conversation: Conversation,
    folder: Path,
    section: SectionResult,
    report: RetrievalReport,
    encoder: Encoder | None,
) -> None:
    store = prepare_store(conversation, folder, encoder)
    section.conversations += 1
    section.turns += len(store.turns)
    section.counts.merge(conversation.counts)
    counter = PartialCounter()
    with open_surface(store.db_path, task_id=store.task_id) as ms:
        rankers = surface_rankers(ms, counter, semantic=encoder is not None)
        rankers |= baseline_rankers(store.turns, encoder)
        _score_probes(conversation, store.turns, rankers, section, report)
    section.partial_results += counter.partial


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


def _score_probes(
    conversation: Conversation,
    turns: Sequence[Turn],
    rankers: dict[str, Ranker],
    section: SectionResult,
    report: RetrievalReport,
) -> None:
    by_seq = {t.seq: t for t in turns}
    session_of_turn = {t.turn_id: t.session for t in turns}
    for probe in conversation.probes:
        section.gold_missing += sum(1 for g in probe.gold if g not in session_of_turn)
        gold_sessions = {session_of_turn.get(g, f"missing:{g}") for g in probe.gold}
        for system in report.systems:
            started = time.perf_counter()
            seqs = rankers[system](probe.question, report.depth)
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
        section.clusters.append(conversation.key)
        section.gold_sizes.append(len(probe.gold))


def _turn_id(seq: int, by_seq: dict[int, Turn]) -> str:
    turn = by_seq.get(seq)
    return turn.turn_id if turn is not None else f"seq:{seq}"
