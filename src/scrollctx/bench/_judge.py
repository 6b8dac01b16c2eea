"""LLM-as-judge scoring for LongMemEval, BEAM and LoCoMo (J), over any backend.

A :class:`Judge` wraps one :class:`~scrollctx.agent.Backend` (any model spec that
``resolve_model`` accepts) and asks it the benchmark's rubric question at temperature 0.

Invariants:

- A reply the parser cannot read is recorded as malformed (``Verdict.malformed`` says why, the
  raw reply is kept) and its ``score`` is ``None``: it is never counted as right or wrong.
- Reasoning blocks (``<think>…</think>``) and Markdown code fences are ignored when parsing.
- LongMemEval: the first standalone ``yes`` or ``no`` in the reply decides (the official code
  looks for ``yes`` anywhere; we also require the reply to say one of the two).
- BEAM: each rubric item gets a JSON ``{"score": 1.0|0.5|0.0}``; the question scores the mean
  over items. BEAM's reference code casts each item score to an integer, so 0.5 becomes 0;
  ``beam_integer_cast`` (default on, for comparability with published numbers) reproduces
  that, and the uncast mean is kept in ``detail["uncast"]`` either way.
- Provider failures (:class:`~scrollctx.errors.BackendError`) propagate: a question whose judge
  could not be reached has no verdict at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scrollctx.agent import Backend, ChatRequest, Completion
from scrollctx.bench import _judge_prompts as prompts
from scrollctx.bench._kendall import ordering_score

__all__ = ["Judge", "Verdict", "parse_json_reply", "parse_yes_no"]

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_CORRECT_WRONG = re.compile(r"\b(correct|wrong|incorrect)\b", re.IGNORECASE)
_ITEM_SCORES = (0.0, 0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's decision on one answer.

    ``score`` is in [0, 1], or ``None`` when a reply was malformed (``malformed`` says why).
    ``replies`` are the judge's raw replies; ``detail`` holds per-item scores, matches, tau.
    """

    score: float | None
    replies: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)
    malformed: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for result files."""
        return {
            "score": self.score,
            "malformed": self.malformed,
            "detail": dict(self.detail),
            "replies": list(self.replies),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
        }


def _visible(reply: str) -> str:
    return _THINK.sub("", reply).strip()


def parse_yes_no(reply: str) -> bool | None:
    """Return True for yes, False for no, None when the reply says neither."""
    match = _YES_NO.search(_visible(reply))
    return None if match is None else match.group(1).lower() == "yes"


def parse_json_reply(reply: str) -> dict[str, Any] | None:
    """Return the first JSON object in ``reply`` (fences and reasoning ignored), or None."""
    text = _visible(reply)
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _item_score(reply: str) -> tuple[float | None, str | None]:
    data = parse_json_reply(reply)
    if data is None or "score" not in data:
        return None, "no JSON object with a 'score' in the reply"
    try:
        value = float(data["score"])
    except (TypeError, ValueError):
        return None, f"score {data['score']!r} is not a number"
    if value not in _ITEM_SCORES:
        return None, f"score {value} is not one of 0, 0.5, 1"
    return value, None


class Judge:
    """Scores answers with a judge model following each benchmark's rubric.

    Example::

        judge = Judge(resolve_model("openai:gpt-4.1-mini"))
        verdict = judge.longmemeval("q", "Paris", "It was Paris.", "multi-session", "q1")
    """

    def __init__(
        self,
        backend: Backend,
        *,
        max_tokens: int | None = 512,
        beam_integer_cast: bool = True,
    ) -> None:
        self.backend = backend
        self.max_tokens = max_tokens
        self.beam_integer_cast = beam_integer_cast

    @property
    def name(self) -> str:
        """The judge's model spec as it will be recorded (``openai:gpt-4.1-mini``)."""
        return (
            f"{self.backend.name}:{self.backend.model}" if self.backend.model else self.backend.name
        )

    def _ask(self, prompt: str) -> Completion:
        options: dict[str, Any] = {"temperature": 0.0}
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        request = ChatRequest(messages=[{"role": "user", "content": prompt}], options=options)
        return self.backend.complete(request)

    def _verdict(
        self,
        completions: Sequence[Completion],
        score: float | None,
        malformed: str | None = None,
        **detail: Any,
    ) -> Verdict:
        usages = [c.usage for c in completions if c.usage is not None]
        return Verdict(
            score=None if malformed else score,
            replies=tuple(c.text for c in completions),
            detail=detail,
            malformed=malformed,
            tokens_in=sum(u.prompt_tokens for u in usages),
            tokens_out=sum(u.completion_tokens for u in usages),
        )

    # -- LongMemEval -------------------------------------------------------------------------

    def longmemeval(
        self, question: str, answer: object, response: str, question_type: str, question_id: str
    ) -> Verdict:
        """Judge one LongMemEval answer with the prompt for its type (or abstention)."""
        template = _lme_template(question_type, question_id)
        completion = self._ask(template.format(question=question, answer=answer, response=response))
        said = parse_yes_no(completion.text)
        if said is None:
            return self._verdict([completion], None, "the reply says neither yes nor no")
        return self._verdict([completion], 1.0 if said else 0.0, label="yes" if said else "no")

    # -- BEAM --------------------------------------------------------------------------------

    def beam_rubric(self, question: str, rubric: Sequence[str], response: str) -> Verdict:
        """Grade every rubric item 1 / 0.5 / 0; the question scores the mean over items."""
        completions, items, problems = [], [], []
        for criterion in rubric:
            prompt = prompts.BEAM_RUBRIC_ITEM.format(
                question=question, criterion=criterion, response=response
            )
            completion = self._ask(prompt)
            completions.append(completion)
            value, problem = _item_score(completion.text)
            items.append(value)
            if problem:
                problems.append(f"item {len(items)}: {problem}")
        if not rubric:
            return self._verdict(completions, None, "the question has no rubric items")
        if problems:
            return self._verdict(completions, None, "; ".join(problems), items=items)
        scored = [float(v) for v in items if v is not None]
        uncast = sum(scored) / len(scored)
        cast = sum(float(int(v)) for v in scored) / len(scored)
        score = cast if self.beam_integer_cast else uncast
        return self._verdict(
            completions, score, items=scored, uncast=uncast, integer_cast=self.beam_integer_cast
        )

    def beam_ordering(self, question: str, rubric: Sequence[str], response: str) -> Verdict:
        """Match response lines to the reference events, then score Kendall tau-b as (tau+1)/2."""
        lines = [line.strip() for line in response.splitlines() if line.strip()]
        if not rubric:
            return self._verdict([], None, "the question has no rubric items")
        if not lines:
            return self._verdict([], 0.0, matches=[], tau=None, positions=[None] * len(rubric))
        events = "\n".join(f"{i}. {item}" for i, item in enumerate(rubric, 1))
        numbered = "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))
        completion = self._ask(
            prompts.BEAM_ORDERING.format(question=question, events=events, lines=numbered)
        )
        matches, problem = _ordering_matches(completion.text, len(lines), len(rubric))
        if problem is not None:
            return self._verdict([completion], None, problem)
        result = ordering_score(matches, len(rubric))
        return self._verdict(
            [completion],
            result.score,
            matches=matches,
            tau=result.tau,
            positions=list(result.positions),
            precision=result.precision,
            recall=result.recall,
        )

    # -- LoCoMo J ----------------------------------------------------------------------------

    def locomo(self, question: str, answer: object, response: str) -> Verdict:
        """The community "J" judge: a generous CORRECT / WRONG."""
        completion = self._ask(
            prompts.LOCOMO_J.format(question=question, answer=answer, response=response)
        )
        match = _CORRECT_WRONG.search(_visible(completion.text))
        if match is None:
            return self._verdict([completion], None, "the reply says neither CORRECT nor WRONG")
        correct = match.group(1).lower() == "correct"
        return self._verdict([completion], 1.0 if correct else 0.0)


def _lme_template(question_type: str, question_id: str) -> str:
    if question_id.endswith("_abs"):
        return prompts.LME_ABSTENTION
    if question_type == "temporal-reasoning":
        return prompts.LME_TEMPORAL
    if question_type == "knowledge-update":
        return prompts.LME_KNOWLEDGE_UPDATE
    if question_type == "single-session-preference":
        return prompts.LME_PREFERENCE
    return prompts.LME_FACTUAL


def _ordering_matches(reply: str, lines: int, items: int) -> tuple[list[int | None], str | None]:
    data = parse_json_reply(reply)
    raw = data.get("matches") if data is not None else None
    if not isinstance(raw, list):
        return [], "no JSON object with a 'matches' list in the reply"
    if len(raw) != lines:
        return [], f"'matches' has {len(raw)} entries for {lines} response lines"
    matches: list[int | None] = []
    for entry in raw:
        if entry is None:
            matches.append(None)
        elif isinstance(entry, int) and not isinstance(entry, bool) and 1 <= entry <= items:
            matches.append(entry - 1)
        else:
            return [], f"match {entry!r} is not null or an event number 1-{items}"
    return matches, None
