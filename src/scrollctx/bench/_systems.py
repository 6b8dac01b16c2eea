"""The systems a QA run compares: Scroll, its ablations and the baselines, on one backbone.

Every system answers one question in its own probe session and store, with the same backbone
model and the same loop (:class:`~scrollctx.agent.Agent`); they differ only in their toolset,
their context policy and what their store holds (paper Table 3 and Figure 3):

============== ================================================================================
scroll         the full system: history in the Event Log, the eviction index carried from
               ingestion, ``repl_exec`` + ``recall_history_python`` (``ms``) + ``submit_answer``
scroll-norepl  ablation: ``ms.search`` / ``ms.expand`` / ``ms.sql_query`` as ordinary JSON tool
               calls, no persistent kernel
scroll-noindex ablation: the eviction index removed and nothing else: the store holds no
               carried index and the probe's view evicts (Algorithm 1) without one
lossy-summary  ablation: each session summarized at ingestion, the summaries replace the
               originals in the Event Log; then as ``scroll``
summary        baseline: a running summary compacted at every session boundary (and per chunk
               of a long session); the probe sees only the summary, no recall tool
summarizing    baseline (Table 3 (i)): the retrieval agent's tools, but its own context is
               compacted into notes by the backbone whenever it fills (during the run)
retrieval      baseline: the history evicted behind one recall tool (``ms_search``), a plain
               context window, no kernel and no index
codeact        baseline: a CodeAct agent without Scroll: the history is a JSONL file in its
               workspace, read with Python in ``repl_exec``; no ``ms`` data, no index, plain window
longcontext    baseline: the whole history in the prompt, truncated from the oldest side to the
               window; the model answers with ``submit_answer``
============== ================================================================================

Every system's prompts name only the tools it has, and mention an eviction index only when its
policy shows one (the agent renders them from the toolset).

Backends: a system loads its backbone once per worker thread (:meth:`System.backend`) and
shares it across the questions that thread answers; agents do not close a backend they were
given. :meth:`System.release_backends` closes them when the run's workers are done.

Invariants: a probe's store is a copy (or a fresh empty store) used by that probe alone; a run
that fails is reported with its failure, never as an answer.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.agent import (
    Agent,
    Backend,
    PolicyRequest,
    PromptSet,
    RunFinished,
    Toolset,
    json_memory_toolset,
    resolve_model,
    scroll_toolset,
)
from scrollctx.bench._compaction import COMPACTION_PROMPT, CompactingPolicy
from scrollctx.bench._histories import BaseStore, build_base_store, copy_store, read_sessions
from scrollctx.bench._policies import window_policy
from scrollctx.bench._questions import History, Question, locomo_options
from scrollctx.bench._summaries import Summarizer, lossy_transform, session_text
from scrollctx.config import Config
from scrollctx.errors import UsageError
from scrollctx.kernel import OPT_OUT
from scrollctx.view import estimate_tokens

__all__ = ["SYSTEMS", "Attempt", "RunSettings", "System", "get_system", "task_text"]

SYSTEMS: tuple[str, ...] = (
    "scroll",
    "scroll-norepl",
    "scroll-noindex",
    "lossy-summary",
    "summary",
    "summarizing",
    "retrieval",
    "codeact",
    "longcontext",
)

_ANSWER_FORMAT = (
    "Answer from the conversation history only, in one or a few sentences, and finish with "
    "submit_answer. If the history does not contain the answer, say so."
)
_LONG_CONTEXT_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How every system of a run is configured (the same for all, so runs compare)."""

    model: str
    environ: Mapping[str, str] | None = None
    config: Config | None = None
    max_steps: int = 30
    budget_tokens: int | None = None
    rho: float | None = None
    k: int | None = None
    tail_groups: int | None = None
    keep_results: int | None = None
    sandbox: str = "strict"
    opt_out: str = OPT_OUT
    """How a cell refused for a missing sandbox layer names the opt-out (the command's flag)."""
    cell_timeout: float = 60.0
    options: Mapping[str, Any] = field(default_factory=dict)
    summary_words: int = 600
    prompts: PromptSet | None = None
    base_url: str | None = None
    """The backbone's endpoint, for the records (the key is never recorded)."""

    def record(self) -> dict[str, Any]:
        """How the backbone and its view were set, for every result record."""
        return {
            "model": self.model,
            "base_url": self.base_url,
            "options": dict(self.options),
            "max_steps": self.max_steps,
            "view": {
                "budget_tokens": self.budget_tokens,
                "rho": self.rho,
                "index_k": self.k,
                "tail_groups": self.tail_groups,
                "keep_results": self.keep_results,
            },
            "prompts": self.prompts.replaced if self.prompts else {},
        }


@dataclass(frozen=True, slots=True)
class Attempt:
    """What a system did for one question."""

    answer: str | None
    run_status: str
    failure: str | None
    failure_type: str | None
    tokens_in: int
    tokens_out: int
    turns: int
    wall_time_s: float
    trace_path: str | None
    session_id: str
    budget: Mapping[str, Any] = field(default_factory=dict)
    """The window C the agent used and which rule chose it (``{"tokens", "source"}``)."""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def task_text(question: Question) -> str:
    """The question as the agent receives it, with the benchmark's official additions.

    LongMemEval adds the question's date; LoCoMo category 2 asks for an approximate date from
    the session dates; LoCoMo category 5 is a two-option choice between "Not mentioned in the
    conversation" and the adversarial answer (order fixed per question by its id's hash).
    """
    text = question.question
    if question.benchmark == "longmemeval" and question.question_date:
        return f"{text}\n\n(Today is {question.question_date}.)"
    if question.benchmark == "locomo" and question.category == "2":
        return f"{text}\n\nAnswer with an approximate date, based on the dates of the sessions."
    if question.benchmark == "locomo" and question.category == "5":
        option_a, option_b = locomo_options(question)
        return f"{text}\n\nSelect the correct answer: (a) {option_a} (b) {option_b}"
    return text


class System:
    """One system: how its store is prepared per history and how it answers one question."""

    name: str = ""
    uses_history_store: bool = True

    def __init__(self, settings: RunSettings, work_dir: Path) -> None:
        self.settings = settings
        self.work_dir = work_dir
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._local = threading.local()
        self._backends: list[Backend] = []

    # -- the backbone --------------------------------------------------------------------

    def backend(self) -> Backend:
        """This worker thread's backbone, loaded on first use and shared by its questions."""
        backend: Backend | None = getattr(self._local, "backend", None)
        if backend is None:
            settings = self.settings
            backend = resolve_model(
                settings.model, config=settings.config, environ=settings.environ
            )
            self._local.backend = backend
            with self._guard:
                self._backends.append(backend)
        return backend

    def release_backends(self) -> None:
        """Close every backend this system loaded (call when its workers are done)."""
        with self._guard:
            backends, self._backends = self._backends, []
            self._local = threading.local()
        for backend in backends:
            backend.close()

    # -- per history ---------------------------------------------------------------------

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def base_store(self, history: History) -> BaseStore:
        """Build (once) and return the history's base store for this system."""
        with self._lock(history.key):
            return self._build(history)

    def _build(self, history: History) -> BaseStore:
        return build_base_store(history, self.work_dir / "stores" / "raw" / _slug(history.key))

    # -- per question --------------------------------------------------------------------

    def answer(self, question: Question, base: BaseStore, probe_dir: Path) -> Attempt:
        """Answer ``question`` in ``probe_dir`` (a fresh folder this call owns)."""
        store = copy_store(base.path, probe_dir / "store") if self.uses_history_store else None
        agent = self._agent(store or probe_dir / "store", probe_dir)
        with agent:
            finished = self._run(agent, question, base)
        return _attempt(finished, agent)

    def _agent(self, store: Path, probe_dir: Path, **extra: Any) -> Agent:
        settings = self.settings
        return Agent(
            self.backend(),
            store=store,
            environ=settings.environ,
            max_steps=settings.max_steps,
            budget_tokens=settings.budget_tokens,
            rho=settings.rho,
            k=settings.k,
            tail_groups=settings.tail_groups,
            keep_results=settings.keep_results,
            sandbox=settings.sandbox,
            cell_timeout=settings.cell_timeout,
            options=settings.options,
            prompts=settings.prompts,
            trace_dir=self.work_dir / "traces" / self.name,
            agent_id=self.name,
            opt_out=settings.opt_out,
            **self._agent_parts(),
            **extra,
        )

    def _agent_parts(self) -> dict[str, Any]:
        return {}  # the agent's own policy: Scroll's view, opened from the carried index

    def _run(self, agent: Agent, question: Question, base: BaseStore) -> RunFinished:
        return agent.ask(
            task_text(question), task_id=question.history.key, rubric=question.benchmark
        )


def _attempt(finished: RunFinished, agent: Agent) -> Attempt:
    metrics = finished.metrics
    return Attempt(
        answer=finished.answer,
        run_status=finished.status,
        failure=finished.failure,
        failure_type=finished.failure_type,
        tokens_in=metrics.tokens_in,
        tokens_out=metrics.tokens_out,
        turns=metrics.step_count,
        wall_time_s=round(metrics.wall_time_s, 3),
        trace_path=str(finished.trace_path) if finished.trace_path else None,
        session_id=finished.session_id,
        budget=agent.budget.to_dict(),
    )


def _only(toolset: Toolset, *names: str) -> Toolset:
    tools = [t for t in toolset.tools if t.name in names]
    return Toolset(tuple(tools), toolset.kernel_functions)


def _fixed_toolset(toolset: Toolset) -> Callable[[Any], Toolset]:
    def factory(user_tools: Any) -> Toolset:
        return toolset

    return factory


class ScrollSystem(System):
    """The full system."""

    name = "scroll"


class NoReplSystem(System):
    """Scroll without the REPL: ``ms`` as ordinary JSON tool calls."""

    name = "scroll-norepl"

    def _agent_parts(self) -> dict[str, Any]:
        return {"toolset": json_memory_toolset}


class NoIndexSystem(System):
    """Scroll without the eviction index, and only without it: the Event Log, ``ms``, the REPL
    and Algorithm 1 (persist, protect, fold, evict whole exchanges) as in ``scroll``.

    Its base store is built without the carried index, and its probe's view evicts into no
    index (``shows_index=False``: nothing in the view, no ``eviction_index`` event), so neither
    the view, ``ms.index()``, ``ms.session()`` nor SQL can reach one. The prompts do not
    mention an index.
    """

    name = "scroll-noindex"

    def _build(self, history: History) -> BaseStore:
        folder = self.work_dir / "stores" / "raw-noindex" / _slug(history.key)
        return build_base_store(history, folder, with_index=False)

    def _agent_parts(self) -> dict[str, Any]:
        return {"shows_index": False}


class LossySummarySystem(System):
    """Summaries replace the originals at ingestion; then Scroll as usual."""

    name = "lossy-summary"

    def _build(self, history: History) -> BaseStore:
        folder = self.work_dir / "stores" / f"lossy-{_slug(self.settings.model)}"
        summarizer = Summarizer(self.backend(), words=self.settings.summary_words)
        return build_base_store(
            history, folder / _slug(history.key), transform=lossy_transform(summarizer)
        )


class RetrievalSystem(System):
    """A ReAct agent whose history sits behind one recall tool."""

    name = "retrieval"

    def _agent_parts(self) -> dict[str, Any]:
        tools = _only(json_memory_toolset(), "ms_search", "submit_answer")
        return {"policy": window_policy(), "shows_index": False, "toolset": _fixed_toolset(tools)}

    def _run(self, agent: Agent, question: Question, base: BaseStore) -> RunFinished:
        task = f"{task_text(question)}\n\n{_ANSWER_FORMAT}"
        return agent.ask(task, task_id=question.history.key)


class SummarizingSystem(System):
    """The summarization agent: the retrieval agent's tools, its context compacted when full."""

    name = "summarizing"

    def _agent_parts(self) -> dict[str, Any]:
        tools = _only(json_memory_toolset(), "ms_search", "submit_answer")
        return {"policy": self._policy, "shows_index": False, "toolset": _fixed_toolset(tools)}

    def _policy(self, request: PolicyRequest) -> CompactingPolicy:
        summarizer = Summarizer(
            self.backend(), words=self.settings.summary_words, prompt=COMPACTION_PROMPT
        )
        policy = CompactingPolicy(
            request.log,
            request.session_id,
            request.system_prompt,
            budget_tokens=request.budget_tokens,
            summarizer=summarizer,
            event_fields=request.event_fields,
        )
        self._local.policies = [*getattr(self._local, "policies", []), policy]
        return policy

    def answer(self, question: Question, base: BaseStore, probe_dir: Path) -> Attempt:
        self._local.policies = []
        attempt = super().answer(question, base, probe_dir)
        policies: list[CompactingPolicy] = self._local.policies
        return dataclasses.replace(
            attempt,
            tokens_in=attempt.tokens_in + sum(p.tokens_in for p in policies),
            tokens_out=attempt.tokens_out + sum(p.tokens_out for p in policies),
        )

    def _run(self, agent: Agent, question: Question, base: BaseStore) -> RunFinished:
        task = f"{task_text(question)}\n\n{_ANSWER_FORMAT}"
        return agent.ask(task, task_id=question.history.key)


class SummarySystem(System):
    """A running summary compacted at every session boundary; no access to the raw history."""

    name = "summary"
    uses_history_store = False

    def _build(self, history: History) -> BaseStore:
        base = super()._build(history)
        path = self._summary_path(history)
        if not path.is_file():
            summary, tokens_in, tokens_out = self._compact(history)
            data = {"summary": summary, "tokens_in": tokens_in, "tokens_out": tokens_out}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data), encoding="utf-8")
        data = json.loads(path.read_text(encoding="utf-8"))
        return BaseStore(
            base.history,
            base.path,
            base.sessions,
            base.events,
            base.corpus_tokens,
            base.index_seq,
            int(data["tokens_in"]),
            int(data["tokens_out"]),
        )

    def _summary_path(self, history: History) -> Path:
        folder = self.work_dir / "summaries" / _slug(self.settings.model)
        return folder / f"{_slug(history.key)}.json"

    def _compact(self, history: History) -> tuple[str, int, int]:
        summarizer = Summarizer(self.backend(), words=self.settings.summary_words)
        summary, tokens_in, tokens_out = "", 0, 0
        for events in read_sessions(history):
            summary, used_in, used_out = summarizer.update(summary, session_text(events))
            tokens_in, tokens_out = tokens_in + used_in, tokens_out + used_out
        return summary, tokens_in, tokens_out

    def _agent_parts(self) -> dict[str, Any]:
        tools = _only(scroll_toolset(), "submit_answer")
        return {"policy": window_policy(), "shows_index": False, "toolset": _fixed_toolset(tools)}

    def _run(self, agent: Agent, question: Question, base: BaseStore) -> RunFinished:
        summary = json.loads(self._summary_path(question.history).read_text(encoding="utf-8"))
        task = (
            "Your memory of the earlier conversations with the user (a summary you kept as they "
            f"happened):\n\n{summary['summary']}\n\nQuestion: {task_text(question)}\n\n"
            f"{_ANSWER_FORMAT}"
        )
        return agent.ask(task)


class LongContextSystem(System):
    """The whole history in the prompt, truncated from the oldest side to the window."""

    name = "longcontext"
    uses_history_store = False

    def _agent_parts(self) -> dict[str, Any]:
        tools = _only(scroll_toolset(), "submit_answer")
        return {"policy": window_policy(), "shows_index": False, "toolset": _fixed_toolset(tools)}

    def _run(self, agent: Agent, question: Question, base: BaseStore) -> RunFinished:
        ask = f"Question: {task_text(question)}\n\n{_ANSWER_FORMAT}"
        room = int(agent.budget_tokens * _LONG_CONTEXT_SHARE) - estimate_tokens(ask)
        history = _newest_lines(read_sessions(question.history), room)
        return agent.ask(f"The conversation history so far:\n\n{history}\n\n{ask}")


def _newest_lines(sessions: list[Any], room: int) -> str:
    lines = [event.content for events in sessions for event in events]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = estimate_tokens(line) + 1
        if used + cost > room:
            kept.append(f"[{len(lines) - len(kept)} earlier turns cut to fit the window]")
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept))


class CodeActSystem(System):
    """CodeAct without Scroll: the history is a file in the workspace, read with Python."""

    name = "codeact"
    uses_history_store = False

    def answer(self, question: Question, base: BaseStore, probe_dir: Path) -> Attempt:
        workspace = probe_dir / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        _write_history_file(question.history, workspace / "history.jsonl")
        agent = self._agent(probe_dir / "store", probe_dir, workspace=workspace)
        with agent:
            task = (
                "The user's earlier conversations are in the file history.jsonl in your "
                "workspace: one JSON object per turn with session, date, role, speaker and "
                f"content, oldest first. Read it with Python to answer.\n\nQuestion: "
                f"{task_text(question)}\n\n{_ANSWER_FORMAT}"
            )
            finished = agent.run(task)
        return _attempt(finished, agent)

    def _agent_parts(self) -> dict[str, Any]:
        tools = _only(scroll_toolset(), "repl_exec", "submit_answer")
        return {"policy": window_policy(), "shows_index": False, "toolset": _fixed_toolset(tools)}


def _write_history_file(history: History, path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for events in read_sessions(history):
            for event in events:
                row = {
                    "session": event.step_index,
                    "date": event.metadata.get("date"),
                    "role": event.role,
                    "speaker": event.name or event.role,
                    "content": event.content,
                }
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")


_CLASSES: dict[str, type[System]] = {
    cls.name: cls
    for cls in (
        ScrollSystem,
        NoReplSystem,
        NoIndexSystem,
        LossySummarySystem,
        SummarySystem,
        SummarizingSystem,
        RetrievalSystem,
        CodeActSystem,
        LongContextSystem,
    )
}


def get_system(name: str, settings: RunSettings, work_dir: Path) -> System:
    """Build the system called ``name``; UsageError names the valid ones."""
    try:
        cls = _CLASSES[name]
    except KeyError:
        raise UsageError(f"unknown system {name!r}; choose one of: {', '.join(SYSTEMS)}") from None
    return cls(settings, work_dir)
