"""LLM-as-judge scoring for LongMemEval, BEAM and LoCoMo (J), over any backend.

A :class:`Judge` wraps one :class:`~scrollctx.agent.Backend` (any model spec that
``resolve_model`` accepts) and asks it the benchmark's rubric question at temperature 0
(``options`` add to or override the request options, e.g. a judge's own ``max_tokens``).
Each reply is read the way the benchmark's own evaluator reads it:

- LongMemEval: correct when the lower-cased reply contains ``yes`` anywhere, wrong otherwise,
  so ``No. (… yes …)`` is correct, as in the official code. A reply that says neither ``yes``
  nor ``no`` is counted wrong too and flagged ``unreadable`` (reported beside the score).
- BEAM rubric items: the reply's JSON object, found as BEAM's evaluator finds it (the whole
  reply; a fenced block; the first ``{…}``), else repaired with ``json_repair`` (truncated or
  badly quoted JSON). The item's ``score`` is cast to an integer, as BEAM's code does for nine
  of its ten abilities (0.5 counts 0; ``beam_integer_cast=False`` keeps the float): a value off
  the 0 / 0.5 / 1 scale is kept as the cast makes it, and flagged in ``detail["off_scale"]``.
- BEAM event ordering: each line of the answer is matched to a reference event
  (``ordering_match="pairwise"``: BEAM's way, one yes/no question per line and unused event,
  first yes wins; ``"batch"``: one call for all lines), then ranked (``ordering_rank``,
  see :mod:`scrollctx.bench._kendall`).
- LoCoMo J follows the Mem0 evaluation harness (the source of the published J numbers): the
  reply's JSON ``label`` is correct only when it is exactly ``CORRECT``; a reply without JSON
  that names exactly one of CORRECT / WRONG is read by that word.

Invariants:

- Reasoning blocks (``<think>…</think>``) are removed before any reading (the official judges
  never send them; a local reasoning judge does).
- A reply the benchmark's own code could not read either (no JSON with a ``score`` or a
  ``matches`` list that fits, no LoCoMo label) is recorded as malformed
  (``Verdict.malformed`` says why, the raw reply is kept) and its ``score`` is ``None``: it is
  never counted as right or wrong. BEAM's code stops the whole evaluation there.
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
from scrollctx.bench._judge_prompts import JudgePrompts
from scrollctx.bench._kendall import OrderingScore, beam_ordering_score, ordering_score
from scrollctx.errors import MissingDependency, UsageError

__all__ = [
    "ORDERING_MATCHES",
    "ORDERING_RANKS",
    "Judge",
    "Verdict",
    "parse_beam_json",
    "parse_json_reply",
    "said_yes",
]

ORDERING_MATCHES = ("pairwise", "batch")
ORDERING_RANKS = ("all-lines", "matched-lines")

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_LABEL_WORD = re.compile(r"\b(CORRECT|WRONG|INCORRECT)\b")
_FENCED = re.compile(r"```(?:json)?\s*(\[.*\]|\{.*\})\s*```", re.DOTALL)
_FIRST_JSON = re.compile(r"(\{.*?\}|\[.*?\])", re.DOTALL)
_ITEM_SCALE = (0.0, 0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's decision on one answer.

    ``score`` is the benchmark's score, or ``None`` when a reply was malformed (``malformed``
    says why). ``unreadable`` notes a reply counted wrong because it said neither yes nor no.
    ``replies`` are the judge's raw replies; ``detail`` holds per-item scores, matches, tau.
    """

    score: float | None
    replies: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)
    malformed: str | None = None
    unreadable: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for result files."""
        return {
            "score": self.score,
            "malformed": self.malformed,
            "unreadable": self.unreadable,
            "detail": dict(self.detail),
            "replies": list(self.replies),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
        }


def _visible(reply: str) -> str:
    return _THINK.sub("", reply).strip()


def said_yes(reply: str) -> bool:
    """LongMemEval's test: the lower-cased reply contains ``yes`` (reasoning removed)."""
    return "yes" in _visible(reply).lower()


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


def parse_beam_json(reply: str) -> Any:
    """Read a judge reply's JSON the way BEAM's evaluator does; ``None`` when nothing parses.

    In order: the whole reply; the JSON inside a leading code fence; the first (shortest)
    ``{…}`` or ``[…]``; else the whole reply repaired by ``json_repair``.
    """
    text = _visible(reply)
    candidate = text
    if text.startswith("```") and (fenced := _FENCED.search(text)) is not None:
        candidate = fenced.group(1).strip()
    for attempt in (candidate, _first_json(candidate)):
        if attempt is None:
            continue
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            if attempt is not candidate:
                break
    try:
        return json.loads(_repair(text))
    except json.JSONDecodeError:
        return None


def _first_json(text: str) -> str | None:
    found = _FIRST_JSON.search(text)
    return found.group(1) if found else None


def _repair(text: str) -> str:
    try:
        from json_repair import repair_json
    except ImportError as exc:
        raise MissingDependency("json-repair", "bench") from exc
    return str(repair_json(text))


def _item_value(reply: str, integer_cast: bool) -> tuple[float | None, float | None, str | None]:
    """(the value counted, the uncast value, the problem) for one rubric item's reply."""
    data = parse_beam_json(reply)
    if not isinstance(data, dict) or "score" not in data:
        return None, None, "no JSON object with a 'score' in the reply"
    raw = data["score"]
    try:
        uncast = float(raw)
        counted = float(int(raw)) if integer_cast else uncast
    except (TypeError, ValueError):
        return None, None, f"score {raw!r} is not a number BEAM's evaluator can read"
    return counted, uncast, None


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
        ordering_match: str = "pairwise",
        ordering_rank: str = "all-lines",
        prompts: JudgePrompts | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if ordering_match not in ORDERING_MATCHES:
            raise UsageError(f"ordering_match must be one of {', '.join(ORDERING_MATCHES)}")
        if ordering_rank not in ORDERING_RANKS:
            raise UsageError(f"ordering_rank must be one of {', '.join(ORDERING_RANKS)}")
        self.backend = backend
        self.max_tokens = max_tokens
        self.beam_integer_cast = beam_integer_cast
        self.ordering_match = ordering_match
        self.ordering_rank = ordering_rank
        self.prompts = prompts or JudgePrompts.load()
        self.options = dict(options or {})

    @property
    def name(self) -> str:
        """The judge's model spec as it will be recorded (``openai:gpt-4.1-mini``)."""
        return (
            f"{self.backend.name}:{self.backend.model}" if self.backend.model else self.backend.name
        )

    def settings(self) -> dict[str, Any]:
        """How this judge scores, for result records (what a rerun must match)."""
        return {
            "model": self.name,
            "base_url": getattr(self.backend, "base_url", None),
            "max_tokens": self.max_tokens,
            "options": dict(self.options),
            "beam_integer_cast": self.beam_integer_cast,
            "beam_ordering_match": self.ordering_match,
            "beam_ordering_rank": self.ordering_rank,
            "prompts": {k: v for k, v in self.prompts.origins.items() if v != "package"},
        }

    def _ask(self, prompt: str) -> Completion:
        options: dict[str, Any] = {"temperature": 0.0}
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        options.update(self.options)
        request = ChatRequest(messages=[{"role": "user", "content": prompt}], options=options)
        return self.backend.complete(request)

    def _verdict(
        self,
        completions: Sequence[Completion],
        score: float | None,
        malformed: str | None = None,
        unreadable: str | None = None,
        **detail: Any,
    ) -> Verdict:
        usages = [c.usage for c in completions if c.usage is not None]
        return Verdict(
            score=None if malformed else score,
            replies=tuple(c.text for c in completions),
            detail=detail,
            malformed=malformed,
            unreadable=unreadable,
            tokens_in=sum(u.prompt_tokens for u in usages),
            tokens_out=sum(u.completion_tokens for u in usages),
        )

    # -- LongMemEval -------------------------------------------------------------------------

    def longmemeval(
        self, question: str, answer: object, response: str, question_type: str, question_id: str
    ) -> Verdict:
        """Judge one LongMemEval answer with the prompt for its type (or abstention)."""
        name = _lme_prompt(question_type, question_id)
        prompt = self.prompts.render(name, question=question, answer=answer, response=response)
        completion = self._ask(prompt)
        correct = said_yes(completion.text)
        unreadable = None
        if not correct and _YES_NO.search(_visible(completion.text)) is None:
            unreadable = "the reply says neither yes nor no (counted wrong, as officially)"
        label = "yes" if correct else "no"
        return self._verdict([completion], float(correct), unreadable=unreadable, label=label)

    # -- BEAM --------------------------------------------------------------------------------

    def beam_rubric(self, question: str, rubric: Sequence[str], response: str) -> Verdict:
        """Grade every rubric item 1 / 0.5 / 0; the question scores the mean over items."""
        if not rubric:
            return self._verdict([], None, "the question has no rubric items")
        completions, counted, uncast, problems = [], [], [], []
        for number, criterion in enumerate(rubric, 1):
            prompt = self.prompts.render(
                "beam_rubric", question=question, criterion=criterion, response=response
            )
            completion = self._ask(prompt)
            completions.append(completion)
            value, raw, problem = _item_value(completion.text, self.beam_integer_cast)
            if problem is not None or value is None or raw is None:
                problems.append(f"item {number}: {problem}")
                continue
            counted.append(value)
            uncast.append(raw)
        if problems:
            return self._verdict(completions, None, "; ".join(problems), items=counted)
        off_scale = [i for i, value in enumerate(uncast, 1) if value not in _ITEM_SCALE]
        return self._verdict(
            completions,
            sum(counted) / len(counted),
            items=counted,
            uncast=sum(uncast) / len(uncast),
            integer_cast=self.beam_integer_cast,
            off_scale=off_scale,
        )

    def beam_ordering(self, question: str, rubric: Sequence[str], response: str) -> Verdict:
        """Match the answer's lines to the reference events, then score Kendall tau-b."""
        if not rubric:
            return self._verdict([], None, "the question has no rubric items")
        lines = response.split("\n")
        if self.ordering_match == "pairwise":
            matches, completions = self._match_pairwise(rubric, lines)
        else:
            matches, completions, problem = self._match_batch(question, rubric, lines)
            if problem is not None:
                return self._verdict(completions, None, problem)
        result = self._rank(rubric, lines, matches)
        return self._verdict(
            completions,
            result.score,
            matches=matches,
            tau=result.tau,
            positions=list(result.positions),
            precision=result.precision,
            recall=result.recall,
            f1=result.f1,
            rank=self.ordering_rank,
            match=self.ordering_match,
        )

    def _rank(
        self, rubric: Sequence[str], lines: list[str], matches: list[int | None]
    ) -> OrderingScore:
        if self.ordering_rank == "all-lines":
            return beam_ordering_score(rubric, lines, matches)
        shown = [match for line, match in zip(lines, matches, strict=True) if line.strip()]
        return ordering_score(shown, len(rubric))

    def _match_pairwise(
        self, rubric: Sequence[str], lines: list[str]
    ) -> tuple[list[int | None], list[Completion]]:
        # BEAM asks one yes/no question per (line, unused event), events in order, and takes
        # the first yes. A blank line is not asked about: BEAM's judge answers it NO.
        used: set[int] = set()
        matches: list[int | None] = []
        completions: list[Completion] = []
        for line in lines:
            found = None
            for index, event in enumerate(rubric if line.strip() else ()):
                if index in used:
                    continue
                prompt = self.prompts.render("beam_equivalence", reference=event, line=line)
                completion = self._ask(prompt)
                completions.append(completion)
                if said_yes(completion.text):
                    found = index
                    used.add(index)
                    break
            matches.append(found)
        return matches, completions

    def _match_batch(
        self, question: str, rubric: Sequence[str], lines: list[str]
    ) -> tuple[list[int | None], list[Completion], str | None]:
        shown = [i for i, line in enumerate(lines) if line.strip()]
        matches: list[int | None] = [None] * len(lines)
        if not shown:
            return matches, [], None
        events = "\n".join(f"{i}. {item}" for i, item in enumerate(rubric, 1))
        numbered = "\n".join(f"{n}. {lines[i].strip()}" for n, i in enumerate(shown, 1))
        prompt = self.prompts.render(
            "beam_ordering_batch", question=question, events=events, lines=numbered
        )
        completion = self._ask(prompt)
        found, problem = _ordering_matches(completion.text, len(shown), len(rubric))
        for line, item in zip(shown, found, strict=False):
            matches[line] = item
        return matches, [completion], problem

    # -- LoCoMo J ----------------------------------------------------------------------------

    def locomo(self, question: str, answer: object, response: str) -> Verdict:
        """The community "J" judge (Mem0's harness): a generous CORRECT / WRONG."""
        prompt = self.prompts.render(
            "locomo_j", question=question, answer=answer, response=response
        )
        completion = self._ask(prompt)
        correct, problem = _j_label(completion.text)
        if problem is not None:
            return self._verdict([completion], None, problem)
        return self._verdict([completion], float(bool(correct)))


def _lme_prompt(question_type: str, question_id: str) -> str:
    if "_abs" in question_id:
        return "longmemeval_abstention"
    if question_type == "temporal-reasoning":
        return "longmemeval_temporal"
    if question_type == "knowledge-update":
        return "longmemeval_knowledge_update"
    if question_type == "single-session-preference":
        return "longmemeval_preference"
    return "longmemeval_factual"


def _j_label(reply: str) -> tuple[bool | None, str | None]:
    data = parse_json_reply(reply)
    if data is not None and "label" in data:
        return data["label"] == "CORRECT", None
    words = {word == "CORRECT" for word in _LABEL_WORD.findall(_visible(reply))}
    if len(words) == 1:
        return words.pop(), None
    if words:
        return None, "the reply says both CORRECT and WRONG"
    return None, "no JSON 'label' and no CORRECT or WRONG in the reply"


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
