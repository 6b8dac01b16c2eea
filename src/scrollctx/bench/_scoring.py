"""Score one answer the way its benchmark defines it.

- LongMemEval: the per-type yes/no judge (``scores["judge"]``);
- BEAM: the rubric judge, or for ``event_ordering`` the line-matching judge and Kendall tau-b
  (``scores["judge"]``);
- LoCoMo: token F1 with the category rules (``scores["f1"]``, no model needed; a category-5
  letter answer is first mapped to its option's text, as the official run does) and, when a
  judge is given, the community J judge for categories 1-4 (``scores["j"]``; category 5 is
  excluded from J, as in the published J numbers).

:data:`PRIMARY` names the score each benchmark's tables report first. A judge reply that cannot
be read leaves that score out (the others stay) and is reported in ``malformed``; a reply
counted wrong because it said neither yes nor no is reported in ``unreadable``. A run that
ended without an answer scores 0 on every score its benchmark reports (:func:`zero_scores`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scrollctx.bench._f1 import choose_option, locomo_score
from scrollctx.bench._judge import Judge, Verdict
from scrollctx.bench._questions import Question, locomo_options
from scrollctx.errors import UsageError

__all__ = ["PRIMARY", "Scored", "score_answer", "zero_scores"]

PRIMARY: dict[str, str] = {"beam": "judge", "locomo": "f1", "longmemeval": "judge"}


@dataclass(frozen=True, slots=True)
class Scored:
    """The scores of one answer and the judge verdicts behind them."""

    scores: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    @property
    def malformed(self) -> dict[str, str]:
        """Which judge replies could not be read (their scores are left out), and why."""
        return {k: v.malformed for k, v in self.verdicts.items() if v.malformed is not None}

    @property
    def unreadable(self) -> dict[str, str]:
        """Which judge replies said neither yes nor no (counted wrong, as officially)."""
        return {k: v.unreadable for k, v in self.verdicts.items() if v.unreadable is not None}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``scores``, ``judges``, ``malformed``, ``unreadable``) for records."""
        return {
            "scores": dict(self.scores),
            "judges": {name: verdict.to_dict() for name, verdict in self.verdicts.items()},
            "malformed": self.malformed,
            "unreadable": self.unreadable,
        }


def _require(judge: Judge | None, benchmark: str) -> Judge:
    if judge is None:
        raise UsageError(f"{benchmark} is scored by an LLM judge; pass --judge-model")
    return judge


def _collect(verdicts: dict[str, Verdict], scores: dict[str, float] | None = None) -> Scored:
    found = dict(scores or {})
    for name, verdict in verdicts.items():
        if verdict.score is not None:
            found[name] = verdict.score
    return Scored(found, verdicts)


def zero_scores(question: Question, judge: Judge | None) -> Scored:
    """The scores of a run that ended without an answer: 0 on each score it would have had."""
    names = [PRIMARY[question.benchmark]]
    if question.benchmark == "locomo" and judge is not None and question.category != "5":
        names.append("j")
    return Scored(dict.fromkeys(names, 0.0))


def score_answer(question: Question, answer: str, judge: Judge | None) -> Scored:
    """Score ``answer`` to ``question``; raises UsageError when a needed judge is missing."""
    if question.benchmark == "locomo":
        if question.category == "5":
            answer = choose_option(answer, *locomo_options(question))
        f1 = locomo_score(answer, question.answer, int(question.category))
        if judge is None or question.category == "5":
            return Scored({"f1": f1})
        return _collect({"j": judge.locomo(question.question, question.answer, answer)}, {"f1": f1})
    if question.benchmark == "longmemeval":
        verdict = _require(judge, "longmemeval").longmemeval(
            question.question, question.answer, answer, question.category, question.qid
        )
        return _collect({"judge": verdict})
    if question.benchmark == "beam":
        active = _require(judge, "beam")
        if question.category == "event_ordering":
            verdict = active.beam_ordering(question.question, question.rubric, answer)
        else:
            verdict = active.beam_rubric(question.question, question.rubric, answer)
        return _collect({"judge": verdict})
    raise UsageError(f"unknown benchmark {question.benchmark!r}")
