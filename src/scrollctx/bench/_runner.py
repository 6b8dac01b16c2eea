"""Run one system over a list of questions: parallel workers, scoring, resumable results.

``run_questions`` skips every question whose latest record for this system is final (see
:mod:`scrollctx.bench._results`), prepares each history's base store once (the first worker to
need it builds it; the others wait for it), answers each question in its own probe folder,
scores the answer and appends one record. Workers are threads (``workers`` at most); each
question gets its own agent, kernel process and probe store; the backbone is loaded once per
worker and shared by its questions (released when the run ends).

Record fields: ``benchmark, size, system, model, model_settings (endpoint, options, view
knobs, replaced prompt files), judge_model, judge_settings, qid, history, category,
question, reference, answer, run_status, failure, failure_type, status, error, scores, judges,
malformed, tokens_in, tokens_out, turns, wall_time_s, corpus_tokens, corpus_share,
ingest_tokens_in, ingest_tokens_out, trace, session_id, budget (the window C and which rule
chose it), finished_at``. ``status`` is ``scored``,
``unscored`` (the judge reply behind the benchmark's primary score could not be read; other
scores, such as LoCoMo's F1 beside an unreadable J, are kept) or ``error`` (the model or judge
could not be reached, or the run could not start; the question runs again on the next
invocation).
``corpus_share`` is the task's input tokens divided by the tokens of the history it was asked
over (the paper's "share of the corpus" in §4.4). A run that ended without an answer (step
limit, context overflow) is ``scored`` with its failure recorded and 0 on every score its
benchmark reports (LoCoMo's J included); one that ended on a provider or sandbox error (by its
``failure_type``) is an ``error``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scrollctx.bench._histories import BaseStore
from scrollctx.bench._judge import Judge
from scrollctx.bench._questions import Question
from scrollctx.bench._results import ResultFile
from scrollctx.bench._scoring import PRIMARY, score_answer, zero_scores
from scrollctx.bench._systems import Attempt, System
from scrollctx.errors import (
    BackendError,
    BackendUnavailable,
    MissingCredentials,
    RateLimited,
    RequestRejected,
    SandboxUnavailable,
    ScrollError,
    UsageError,
)

__all__ = ["RunSummary", "run_questions"]

Progress = Callable[[dict[str, Any]], None]

_INFRASTRUCTURE = frozenset(
    cls.__name__
    for cls in (
        BackendUnavailable,
        RateLimited,
        MissingCredentials,
        BackendError,
        RequestRejected,
        SandboxUnavailable,
    )
)
"""``failure_type`` values (the error classes the loop names) that say the run never happened."""


@dataclass(slots=True)
class RunSummary:
    """What one ``run_questions`` call did."""

    system: str
    questions: int
    skipped: int
    statuses: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    first_error: str | None = None
    """The ``error`` of the first record that ended in error, if any."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "system": self.system,
            "questions": self.questions,
            "skipped": self.skipped,
            "statuses": dict(self.statuses),
            "seconds": round(self.seconds, 2),
            "first_error": self.first_error,
        }


def run_questions(
    questions: Sequence[Question],
    system: System,
    results: ResultFile,
    *,
    judge: Judge | None,
    size: str | None = None,
    workers: int = 1,
    keep_stores: bool = False,
    progress: Progress | None = None,
) -> RunSummary:
    """Answer and score every unfinished question with ``system``; append one record each."""
    if workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}")
    missing = sorted({q.history.key for q in questions if q.history.path is None})
    if missing:
        raise UsageError(
            f"{len(missing)} histories are not in the data ({', '.join(missing[:3])}…); BEAM "
            "10M ships questions only and 1M 9 of its 35 chats: add the chats, pass "
            "--skip-missing, or choose another size"
        )
    _check_judge(questions, judge)
    done = results.finished()
    todo = [q for q in questions if (system.name, q.qid) not in done]
    summary = RunSummary(system.name, len(questions), len(questions) - len(todo))
    started = time.perf_counter()
    context = _Context(system, results, judge, size, keep_stores, progress)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench")
    try:
        for future in [pool.submit(context.run_one, question) for question in todo]:
            record = future.result()
            status = str(record["status"])
            summary.statuses[status] = summary.statuses.get(status, 0) + 1
            if status == "error" and summary.first_error is None:
                summary.first_error = str(record.get("error"))
    except BaseException:
        # Ctrl-C or a bug: questions not yet started are dropped, running ones finish and
        # are recorded, so a rerun resumes exactly after them.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        system.release_backends()
    summary.seconds = time.perf_counter() - started
    return summary


def _check_judge(questions: Sequence[Question], judge: Judge | None) -> None:
    if judge is None and any(q.benchmark in ("beam", "longmemeval") for q in questions):
        raise UsageError("BEAM and LongMemEval are scored by an LLM judge; pass --judge-model")


@dataclass(slots=True)
class _Context:
    system: System
    results: ResultFile
    judge: Judge | None
    size: str | None
    keep_stores: bool
    progress: Progress | None

    def run_one(self, question: Question) -> dict[str, Any]:
        record = self._base_record(question)
        probe_dir = self.system.work_dir / "probes" / self.system.name / _safe(question.qid)
        try:
            base = self.system.base_store(question.history)
            attempt = self.system.answer(question, base, probe_dir)
            record.update(_cost(attempt, base))
            record.update(self._score(question, attempt))
        except ScrollError as exc:
            record.update(status="error", error=f"{type(exc).__name__}: {exc}")
        finally:
            if not self.keep_stores and probe_dir.exists():
                shutil.rmtree(probe_dir, ignore_errors=True)
        record["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.results.append(record)
        if self.progress is not None:
            self.progress(record)
        return record

    def _base_record(self, question: Question) -> dict[str, Any]:
        return {
            "benchmark": question.benchmark,
            "size": self.size,
            "system": self.system.name,
            "model": self.system.settings.model,
            "model_settings": self.system.settings.record(),
            "judge_model": self.judge.name if self.judge else None,
            "judge_settings": self.judge.settings() if self.judge else None,
            "qid": question.qid,
            "history": question.history.key,
            "category": question.category,
            "question": question.question,
            "reference": question.answer,
            "error": None,
        }

    def _score(self, question: Question, attempt: Attempt) -> dict[str, Any]:
        outcome: dict[str, Any] = {
            "answer": attempt.answer,
            "run_status": attempt.run_status,
            "failure": attempt.failure,
            "failure_type": attempt.failure_type,
        }
        if attempt.answer is None and attempt.failure_type in _INFRASTRUCTURE:
            return {**outcome, "status": "error", "error": attempt.failure}
        if attempt.answer is None:
            return {**outcome, **zero_scores(question, self.judge).to_dict(), "status": "scored"}
        scored = score_answer(question, attempt.answer, self.judge)
        status = "scored" if PRIMARY[question.benchmark] in scored.scores else "unscored"
        return {**outcome, **scored.to_dict(), "status": status}


def _cost(attempt: Attempt, base: BaseStore) -> dict[str, Any]:
    share = attempt.tokens_in / base.corpus_tokens if base.corpus_tokens else None
    return {
        "tokens_in": attempt.tokens_in,
        "tokens_out": attempt.tokens_out,
        "turns": attempt.turns,
        "wall_time_s": attempt.wall_time_s,
        "corpus_tokens": base.corpus_tokens,
        "corpus_share": share,
        "ingest_tokens_in": base.ingest_tokens_in,
        "ingest_tokens_out": base.ingest_tokens_out,
        "trace": attempt.trace_path,
        "session_id": attempt.session_id,
        "budget": dict(attempt.budget),
    }


def _safe(qid: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in qid)
