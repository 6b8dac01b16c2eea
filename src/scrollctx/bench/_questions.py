"""Benchmark questions for QA runs: LongMemEval (S, M, oracle), BEAM (every tier) and LoCoMo.

Each question becomes a :class:`Question` bound to the :class:`History` it is asked over: a file
holding exactly that one conversation, in a format an importer reads. BEAM chats are used in
place (``chats/<tier>/<n>/chat.json``); a LongMemEval question and a LoCoMo sample are written
to a one-element JSON array under the run's work folder, so a history is read without parsing
the whole benchmark file again (LongMemEval M is 2.7 GB).

Invariants:

- questions come in source order, after the ``categories`` filter, cut at ``limit``;
- ``qid`` is unique within a benchmark and stable across runs (result files resume by it);
- a BEAM tier whose chats are absent (10M ships only questions) yields questions whose
  ``history.path`` is ``None``; the runner refuses them with a clear message;
- ``answer`` is text (LoCoMo and LongMemEval have a few integer answers);
- unknown categories or tiers are a :class:`~scrollctx.errors.UsageError` naming the valid ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.bench._files import read_json
from scrollctx.errors import FormatError, UsageError
from scrollctx.ingest import iter_array
from scrollctx.ingest._turns import natural_key

__all__ = [
    "BEAM_ABILITIES",
    "BEAM_TIERS",
    "BENCHMARKS",
    "LME_TYPES",
    "LOCOMO_CATEGORIES",
    "History",
    "Question",
    "beam_questions",
    "categories_of",
    "locomo_options",
    "locomo_questions",
    "longmemeval_questions",
]

BENCHMARKS: tuple[str, ...] = ("beam", "locomo", "longmemeval")
BEAM_TIERS: tuple[str, ...] = ("100K", "500K", "1M", "10M")
BEAM_ABILITIES: tuple[str, ...] = (
    "abstention",
    "contradiction_resolution",
    "event_ordering",
    "information_extraction",
    "instruction_following",
    "knowledge_update",
    "multi_session_reasoning",
    "preference_following",
    "summarization",
    "temporal_reasoning",
)
LME_TYPES: tuple[str, ...] = (
    "knowledge-update",
    "multi-session",
    "single-session-assistant",
    "single-session-preference",
    "single-session-user",
    "temporal-reasoning",
)
LOCOMO_CATEGORIES: tuple[str, ...] = ("1", "2", "3", "4", "5")
_TIER_ALIASES = {"128K": "100K"}
_BEAM_ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary")
_BEAM_ANSWER_KEYS_LAST = ("expected_compliance",)


@dataclass(frozen=True, slots=True)
class History:
    """The conversation a question is asked over: a file holding exactly that conversation."""

    key: str
    """``beam/100K/1``, ``locomo/conv-26``, ``longmemeval/<question_id>``."""
    path: Path | None
    format: str


@dataclass(frozen=True, slots=True)
class Question:
    """One benchmark question with everything its scorer needs."""

    benchmark: str
    qid: str
    history: History
    question: str
    answer: str
    category: str
    rubric: tuple[str, ...] = ()
    question_date: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def categories_of(benchmark: str) -> tuple[str, ...]:
    """The category names ``--categories`` accepts for ``benchmark``."""
    if benchmark == "beam":
        return BEAM_ABILITIES
    if benchmark == "longmemeval":
        return (*LME_TYPES, "abstention")
    if benchmark == "locomo":
        return LOCOMO_CATEGORIES
    raise UsageError(f"unknown benchmark {benchmark!r}; choose one of: {', '.join(BENCHMARKS)}")


def _check_categories(benchmark: str, categories: Iterable[str] | None) -> frozenset[str] | None:
    if categories is None:
        return None
    wanted = frozenset(categories)
    unknown = sorted(wanted - set(categories_of(benchmark)))
    if unknown:
        raise UsageError(
            f"unknown {benchmark} categor{'ies' if len(unknown) > 1 else 'y'} "
            f"{', '.join(unknown)}; choose from: {', '.join(categories_of(benchmark))}"
        )
    return wanted


def _take(questions: Iterator[Question], limit: int | None) -> list[Question]:
    if limit is not None and limit < 1:
        raise UsageError(f"limit must be at least 1, got {limit}")
    taken: list[Question] = []
    for question in questions:
        if limit is not None and len(taken) >= limit:
            break
        taken.append(question)
    return taken


def _write_single(folder: Path, name: str, record: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name.replace('/', '_')}.json"
    text = json.dumps([record], ensure_ascii=False)
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return target


# -- LongMemEval -----------------------------------------------------------------------------


def longmemeval_questions(
    path: Path,
    work_dir: Path,
    *,
    categories: Iterable[str] | None = None,
    limit: int | None = None,
) -> list[Question]:
    """Questions of a LongMemEval file (S, M or oracle; the schema is the same).

    ``categories`` are question types, plus ``abstention`` for the ``_abs`` questions. Each
    selected question's haystack is written to ``work_dir/histories/longmemeval/``.
    """
    wanted = _check_categories("longmemeval", categories)
    if not Path(path).is_file():
        raise UsageError(f"LongMemEval file not found: {path}; pass the S, M or oracle JSON file")
    folder = work_dir / "histories" / "longmemeval"
    return _take(_lme_iter(Path(path), folder, wanted), limit)


def _lme_iter(path: Path, folder: Path, wanted: frozenset[str] | None) -> Iterator[Question]:
    for record in iter_array(path):
        if not isinstance(record, dict) or "question_id" not in record:
            raise FormatError(f"{path} holds an entry without question_id", path=str(path))
        qid, kind = str(record["question_id"]), str(record.get("question_type", ""))
        is_abs = "_abs" in qid  # the official scorer's test
        if wanted is not None and kind not in wanted and not (is_abs and "abstention" in wanted):
            continue
        history = History(f"longmemeval/{qid}", _write_single(folder, qid, record), "longmemeval")
        yield Question(
            benchmark="longmemeval",
            qid=qid,
            history=history,
            question=str(record.get("question", "")),
            answer=str(record.get("answer", "")),
            category=kind,
            question_date=record.get("question_date"),
            extra={"abstention": is_abs},
        )


# -- BEAM ------------------------------------------------------------------------------------


def beam_questions(
    chats_root: Path,
    size: str,
    *,
    categories: Iterable[str] | None = None,
    limit: int | None = None,
    available_only: bool = False,
) -> list[Question]:
    """Probing questions of one BEAM tier under ``chats_root`` (``…/beam/chats``).

    ``size`` is ``100K`` (alias ``128K``), ``500K``, ``1M`` or ``10M``; ``categories`` are
    abilities. Chats are taken in numeric order, abilities in file order. ``available_only``
    leaves out the chats whose ``chat.json`` is absent (before ``limit`` is applied).
    """
    tier = _TIER_ALIASES.get(size, size)
    if tier not in BEAM_TIERS:
        raise UsageError(f"unknown BEAM size {size!r}; choose from: {', '.join(BEAM_TIERS)}")
    wanted = _check_categories("beam", categories)
    folder = Path(chats_root) / tier
    if not folder.is_dir():
        raise UsageError(f"BEAM tier folder not found: {folder}; pass --data DIR")
    return _take(_beam_iter(folder, tier, wanted, available_only), limit)


def _beam_iter(
    folder: Path, tier: str, wanted: frozenset[str] | None, available_only: bool
) -> Iterator[Question]:
    chats = [p for p in folder.iterdir() if (p / "probing_questions").is_dir()]
    if available_only:
        chats = [p for p in chats if (p / "chat.json").is_file()]
    for chat in sorted(chats, key=lambda p: natural_key(p.name)):
        data = read_json(chat / "probing_questions" / "probing_questions.json")
        if not isinstance(data, dict):
            raise FormatError(f"{chat} probing_questions.json is not a JSON object")
        chat_file = chat / "chat.json"
        history = History(
            f"beam/{tier}/{chat.name}", chat_file if chat_file.is_file() else None, "beam"
        )
        for ability, items in data.items():
            if wanted is not None and ability not in wanted:
                continue
            for index, item in enumerate(items if isinstance(items, list) else []):
                yield _beam_question(history, ability, index, item)


def _beam_question(history: History, ability: str, index: int, item: Mapping[str, Any]) -> Question:
    rubric = item.get("rubric") or []
    return Question(
        benchmark="beam",
        qid=f"{history.key}/{ability}/{index}",
        history=history,
        question=str(item.get("question", "")),
        answer=_beam_answer(item),
        category=ability,
        rubric=tuple(str(r) for r in (rubric if isinstance(rubric, list) else [rubric])),
        extra={"difficulty": item.get("difficulty")},
    )


def _beam_answer(item: Mapping[str, Any]) -> str:
    for key in (*_BEAM_ANSWER_KEYS, *_BEAM_ANSWER_KEYS_LAST):
        if item.get(key) is not None:
            return str(item[key])
    return ""


# -- LoCoMo ----------------------------------------------------------------------------------


def locomo_questions(
    path: Path,
    work_dir: Path,
    *,
    categories: Iterable[str] | None = None,
    limit: int | None = None,
) -> list[Question]:
    """QA items of ``locomo10.json``; ``categories`` are the codes ``"1"``…``"5"``.

    Category-5 (adversarial) items carry ``adversarial_answer`` instead of ``answer``; their
    reference answer is "Not mentioned in the conversation" and the adversarial answer is kept
    in ``extra`` (the official run offers both as a two-option choice).
    """
    wanted = _check_categories("locomo", categories)
    samples = read_json(Path(path))
    if not isinstance(samples, list):
        raise FormatError(f"{path} is not a LoCoMo file (expected a JSON list of samples)")
    folder = work_dir / "histories" / "locomo"
    return _take(_locomo_iter(samples, folder, wanted), limit)


def locomo_options(question: Question) -> tuple[str, str]:
    """The two options (a) and (b) of a category-5 question, in the order it is posed.

    One option is "Not mentioned in the conversation", the other the adversarial answer; the
    official run orders them at random, ours by a hash of the question id, so a rerun poses
    the same question and the scorer knows which letter is which.
    """
    options = (question.answer, str(question.extra.get("adversarial_answer", "")))
    if hashlib.sha256(question.qid.encode()).digest()[0] % 2:
        return options[1], options[0]
    return options


def _locomo_iter(
    samples: list[Any], folder: Path, wanted: frozenset[str] | None
) -> Iterator[Question]:
    for sample in samples:
        if not isinstance(sample, dict) or "qa" not in sample:
            raise FormatError("a LoCoMo entry has no 'qa' list; check the file")
        sample_id = str(sample.get("sample_id", "?"))
        selected = [
            (index, qa)
            for index, qa in enumerate(sample["qa"])
            if wanted is None or str(qa.get("category")) in wanted
        ]
        if not selected:
            continue
        history = History(f"locomo/{sample_id}", _write_single(folder, sample_id, sample), "locomo")
        for index, qa in selected:
            yield _locomo_question(history, sample_id, index, qa)


def _locomo_question(
    history: History, sample_id: str, index: int, qa: Mapping[str, Any]
) -> Question:
    category = str(qa.get("category"))
    extra: dict[str, Any] = {"evidence": list(qa.get("evidence") or [])}
    if category == "5":
        answer = "Not mentioned in the conversation"
        extra["adversarial_answer"] = str(qa.get("adversarial_answer", qa.get("answer", "")))
    else:
        answer = str(qa.get("answer", ""))
    return Question(
        benchmark="locomo",
        qid=f"locomo/{sample_id}/{index}",
        history=history,
        question=str(qa.get("question", "")),
        answer=answer,
        category=category,
        extra=extra,
    )
