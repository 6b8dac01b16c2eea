"""The CodeAct loop: a generator of typed events over one session's context and tools.

Each step: the context policy evicts to its budget and builds the request (with the kernel's
namespace digest); the backend is called; the response is appended (the view parses its
headline and binds it to the response's ``seq``); each tool call runs and its observation is
appended. A model without tool calls gets the code of its fenced blocks run as a cell.

Invariants:

- Every event is appended to the Event Log before it is yielded (but the :class:`TextDelta`
  previews of a streaming loop: their text is appended whole, as the model turn); every model
  call is a ``model_turn`` event carrying ``metadata.model_call`` (model, usage, latency, and
  what the view cannot rebuild by itself: the call's digest, context tokens and budget), every
  action a ``tool_result`` event (recall observations with ``searchable=False``). Before a
  run's first response, its system prompt is logged (a ``system`` event with
  ``metadata.prompt``), so what the model received on any call can be rebuilt from the log
  (:mod:`scrollctx.agent._calls`).
- A run always ends with exactly one :class:`RunFinished`: an answer (``submit_answer``), a chat
  reply, or an explicit failure (step limit, token budget, provider error after retries, a
  context that cannot fit, a kernel that cannot start, an Event Log that refuses writes),
  recorded as a ``system`` event with ``metadata.run_end`` and in the JSON trace. Never
  silently; when the Event Log refuses the ``run_end`` record too, ``RunFinished.seq`` is 0 and
  the trace (written first) is the record; a trace that cannot be written is
  ``RunFinished.trace_error`` (and in ``run_end``). An exception nobody foresaw (a bug) and
  Ctrl-C are recorded the same way (``failure_type`` ``internal_error``, ``interrupted``), then
  raised to the caller instead of a :class:`RunFinished`; so is a caller that stops reading
  ``iter_run`` before its end (``abandoned``), and a signal the CLI turns into an interrupt.
- A provider that rejects the input as too long (:class:`ContextTooLong`) gets one retry with a
  context the policy shrank; a second rejection ends the run as a failure.
- Answers arrive as :class:`AnswerSubmitted`, a ``BaseException`` only the tool-answering step
  (:func:`~scrollctx.agent._answers.answer_call`) catches; it hands the answer to the loop.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.agent._answers import answer_call, invoke_tool
from scrollctx.agent._events import (
    AgentEvent,
    ContextEvicted,
    ModelStep,
    RunFinished,
    RunMetrics,
    RunStarted,
    TextDelta,
    ToolStep,
)
from scrollctx.agent._policy import ContextPolicy, PreparedContext
from scrollctx.agent._prompts import PromptSet, read_prompt
from scrollctx.agent._tools import AgentTool, Observation, ToolContext, Toolset
from scrollctx.agent._trace import TraceRecorder
from scrollctx.agent.backends import (
    Backend,
    ChatRequest,
    Completion,
    ToolCall,
    extract_code_blocks,
    redact,
)
from scrollctx.errors import (
    BackendError,
    BadResponse,
    ContextOverflow,
    ContextTooLong,
    KernelError,
    StoreError,
    UsageError,
)
from scrollctx.log import Kind, NewEvent
from scrollctx.view import estimate_tokens, parse_headline, strip_headline

__all__ = ["PROMPT_KEY", "AgentLoop", "Limits", "new_id"]

PROMPT_KEY = "prompt"
"""Metadata key of the ``system`` event holding a run's system prompt (its ``content``)."""

_Steps = Generator[AgentEvent, None, "_Outcome | None"]
_FAILURES = (BackendError, ContextOverflow, KernelError, StoreError, UsageError)


def new_id(prefix: str) -> str:
    """A fresh id such as ``run-1a2b3c4d5e6f``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run gives up: after ``max_steps`` model calls, or ``max_run_tokens`` in+out tokens.

    (A cap on each *reply* is the backend option ``max_tokens``, not a limit of the run.)
    """

    max_steps: int = 30
    max_run_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise UsageError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.max_run_tokens is not None and self.max_run_tokens < 1:
            raise UsageError(f"max_run_tokens must be positive, got {self.max_run_tokens}")


@dataclass(frozen=True, slots=True)
class _Outcome:
    status: str
    answer: str | None = None
    failure: str | None = None
    failure_type: str | None = None


@dataclass(slots=True)
class _Run:
    run_id: str
    task: str
    trace: TraceRecorder
    started: float = field(default_factory=time.monotonic)
    metrics: RunMetrics = field(default_factory=RunMetrics)
    prompt_logged: bool = False


class AgentLoop:
    """Runs tasks in one session: a backend, a context policy, a toolset and their context.

    Example::

        loop = AgentLoop(backend=backend, policy=ScrollPolicy.open(log, "s1", prompt,
                         budget_tokens=32_000), toolset=scroll_toolset(), context=context)
        for event in loop.iter_run("How many tasks did I log?"):
            print(event)

    ``stream``: ask a backend that can stream for the answer piece by piece and yield each as
    a :class:`TextDelta` (a chat shows the reply while it is written).
    ``text_is_reply`` (chat): a response with no action is the reply that ends the run; else
    the model is nudged to act or submit. ``options`` are per-call backend options; ``prompts``
    the prompt files (the nudge text; default the package's); ``secrets`` the configured secret
    values the trace must not contain.
    ``events_in_task``: tag the loop's own ``system`` events with the context's ``task_id``
    (off for memory probes, whose task is the imported conversation they ask about: a later
    probe's ``ms.search(scope='task')`` must find the conversation, not an earlier probe).
    ``searchable=False`` keeps every turn of the session out of full-text search (memory
    probes: the question and the probe's own reasoning are not evidence, so a search with no
    scope or kind must not find them; they stay readable by seq, ``expand`` and SQL).
    """

    def __init__(
        self,
        *,
        backend: Backend,
        policy: ContextPolicy,
        toolset: Toolset,
        context: ToolContext,
        limits: Limits | None = None,
        trace_dir: Path | None = None,
        text_is_reply: bool = False,
        options: Mapping[str, Any] | None = None,
        prompts: PromptSet | None = None,
        secrets: frozenset[str] = frozenset(),
        events_in_task: bool = True,
        searchable: bool = True,
        stream: bool = False,
    ) -> None:
        self.backend, self.policy, self.toolset, self.context = backend, policy, toolset, context
        self.prompts = prompts
        self.secrets = secrets
        self.limits = limits or Limits()
        self.trace_dir = trace_dir
        self.text_is_reply = text_is_reply
        self.options = dict(options or {})
        self.events_in_task = events_in_task
        self.searchable = searchable
        self.stream = stream
        self.log = context.log

    @property
    def model_name(self) -> str:
        """``backend:model`` of this loop."""
        return f"{self.backend.name}:{self.backend.model}"

    def run(self, task: str, *, run_id: str | None = None) -> RunFinished:
        """Run the task to its end and return the final event."""
        finished: RunFinished | None = None
        for event in self.iter_run(task, run_id=run_id):
            if isinstance(event, RunFinished):
                finished = event
        if finished is None:  # iter_run always ends with RunFinished; this guards refactors
            raise UsageError("the run ended without a RunFinished event")
        return finished

    def iter_run(self, task: str, *, run_id: str | None = None) -> Iterator[AgentEvent]:
        """Yield the run's events as they happen; the last is always :class:`RunFinished`."""
        if not isinstance(task, str) or not task.strip():
            raise UsageError("the task is empty; pass the task or question as text")
        ctx = self.context
        run = _Run(
            run_id or new_id("run"),
            task,
            TraceRecorder(ctx.task_id, "", ctx.session_id, self.model_name, task, self.secrets),
        )
        run.trace.run_id = run.run_id
        seq = self._system(run, f"run {run.run_id} started with {self.model_name}", "run_start")
        try:
            yield RunStarted(seq, run.run_id, ctx.session_id, ctx.task_id, task, self.model_name)
            self.policy.add({"role": "user", "content": task}, fields=self._fields(run, 0))
            outcome = yield from self._steps(run)
        except _FAILURES as exc:
            name = type(exc).__name__
            outcome = _Outcome("failed", failure=f"{name}: {redact(str(exc))}", failure_type=name)
        except BaseException as exc:  # Ctrl-C, a signal, an abandoned iteration, a bug
            self._finish(run, _stopped_by(exc))
            raise
        ended = _Outcome("failed", failure="the run ended early", failure_type="ended_early")
        yield self._finish(run, outcome or ended)

    # -- steps -----------------------------------------------------------------------------

    def _steps(self, run: _Run) -> _Steps:
        limits = self.limits
        for step in range(limits.max_steps):
            spent = run.metrics.tokens_in + run.metrics.tokens_out
            if limits.max_run_tokens is not None and spent >= limits.max_run_tokens:
                return _Outcome(
                    "failed",
                    failure=f"token budget exhausted: {spent} of {limits.max_run_tokens} tokens "
                    f"used after {step} steps without submit_answer",
                    failure_type="token_budget",
                )
            outcome = yield from self._step(run, step)
            if outcome is not None:
                return outcome
        return _Outcome(
            "failed",
            failure=f"step limit reached: {limits.max_steps} steps without submit_answer",
            failure_type="step_limit",
        )

    def _step(self, run: _Run, step: int) -> _Steps:
        prepared = self.policy.prepare(self.context.digest)
        if prepared.evicted:
            yield _evicted(step, prepared)
        started = time.monotonic()
        completion, prepared = yield from self._call(run, step, prepared)
        elapsed = time.monotonic() - started
        self._count(run, prepared, completion)
        self._log_prompt(run, prepared)
        call = {**_call_meta(completion, elapsed), **_context_meta(prepared, self.context.digest)}
        seq = self.policy.add(
            completion.to_message(), fields=self._fields(run, step, metadata={"model_call": call})
        )[-1]
        text = strip_headline(completion.text).strip()
        parsed = parse_headline(completion.text)
        headline = parsed.text if parsed else None
        run.trace.model_step(step, completion.reasoning or text, headline)
        yield ModelStep(
            seq, step, text, headline, completion.reasoning, completion.tool_calls,
            completion.usage, elapsed,
        )  # fmt: skip
        if completion.tool_calls:
            return (yield from self._run_calls(run, step, completion.tool_calls))
        code_tool = self.toolset.code_tool
        runs_fenced = not self.backend.supports_tools or not self.text_is_reply
        blocks = extract_code_blocks(completion.text) if code_tool and runs_fenced else []
        if code_tool is not None and blocks:
            return (yield from self._run_block(run, step, code_tool, "\n\n".join(blocks)))
        if self.text_is_reply and text:
            return _Outcome("replied", answer=text)
        return (yield from self._nudge(run, step))

    def _call(
        self, run: _Run, step: int, prepared: PreparedContext
    ) -> Generator[AgentEvent, None, tuple[Completion, PreparedContext]]:
        try:
            return (yield from self._complete(step, prepared)), prepared
        except ContextTooLong as exc:
            self._system(
                run,
                f"the provider rejected a {prepared.tokens}-token context as too long "
                f"({redact(str(exc))}); evicting harder and retrying once",
                "context_too_long",
                step,
            )
        shrunk = self.policy.prepare(self.context.digest, shrink=True)
        yield _evicted(step, shrunk)
        return (yield from self._complete(step, shrunk)), shrunk

    def _complete(
        self, step: int, prepared: PreparedContext
    ) -> Generator[AgentEvent, None, Completion]:
        """Call the model once; when streaming, yield its text as it arrives."""
        request = self._request(prepared)
        if not (self.stream and self.backend.can_stream):
            return self.backend.complete(request)
        completion: Completion | None = None
        for piece in self.backend.stream(request):
            if isinstance(piece, Completion):
                completion = piece
            elif piece.text or piece.reasoning:
                yield TextDelta(step, piece.text, piece.reasoning)
        if completion is None:
            raise BadResponse(
                f"{self.backend.name} ended its stream without a completion",
                backend=self.backend.name,
            )
        return completion

    def _request(self, prepared: PreparedContext) -> ChatRequest:
        tools = self.toolset.specs() if self.backend.supports_tools else []
        return ChatRequest(prepared.messages, prepared.system, tools, self.options)

    def _run_calls(self, run: _Run, step: int, calls: Sequence[ToolCall]) -> _Steps:
        outcome: _Outcome | None = None
        for call in calls:
            tool = self.toolset.get(call.name)
            if outcome is not None:
                observation = Observation("not run: the answer was already submitted", ok=False)
            else:
                observation, answer = answer_call(call, self.toolset, self.context)
                outcome = _Outcome("answered", answer=answer) if answer is not None else None
            message = {"role": "tool", "tool_call_id": call.id, "name": call.name}
            seq = self._observe(run, step, message, observation, tool)
            args = call.arguments if call.has_valid_arguments else {"raw": call.raw_arguments}
            run.trace.action(step, call.name, args, observation.text, seq)
            yield ToolStep(seq, step, call.name, args, observation.text, observation.ok)
        return outcome

    def _run_block(self, run: _Run, step: int, tool: AgentTool, source: str) -> _Steps:
        observation, answer = invoke_tool(tool, {"source": source}, self.context)
        message = {"role": "user", "content": f"Observation ({tool.name}):\n{observation.text}"}
        seq = self.policy.add(
            message,  # type: ignore[arg-type]
            synthetic=True,
            fields=self._fields(run, step, searchable=tool.searchable),
        )[-1]
        run.trace.action(step, tool.name, {"source": source}, observation.text, seq)
        yield ToolStep(seq, step, tool.name, {"source": source}, observation.text, observation.ok)
        return _Outcome("answered", answer=answer) if answer is not None else None

    def _nudge(self, run: _Run, step: int) -> _Steps:
        nudge = self.prompts.text("nudge") if self.prompts else read_prompt("nudge")
        seq = self.policy.add(
            {"role": "user", "content": nudge}, synthetic=True, fields=self._fields(run, step)
        )[-1]
        run.trace.observe(nudge, seq)
        yield ToolStep(seq, step, "", {}, nudge, ok=False)
        return None

    def _observe(
        self,
        run: _Run,
        step: int,
        message: dict[str, Any],
        observation: Observation,
        tool: AgentTool | None,
    ) -> int:
        fields = self._fields(
            run,
            step,
            searchable=tool.searchable if tool else True,
            tool_state="ok" if observation.ok else "error",
        )
        message["content"] = observation.text
        return self.policy.add(message, fields=fields)[-1]  # type: ignore[arg-type]

    # -- bookkeeping -----------------------------------------------------------------------

    def _fields(self, run: _Run, step: int, **extra: Any) -> dict[str, Any]:
        fields = {"run_id": run.run_id, "step_index": step, **extra}
        if not self.searchable:
            fields["searchable"] = False
        return fields

    def _count(self, run: _Run, prepared: PreparedContext, completion: Completion) -> None:
        metrics = run.metrics
        metrics.step_count += 1
        if completion.usage is not None:
            metrics.tokens_in += completion.usage.prompt_tokens
            metrics.tokens_out += completion.usage.completion_tokens
            self.policy.observe_usage(completion.usage.prompt_tokens)
        else:
            metrics.tokens_in += prepared.tokens
            metrics.tokens_out += estimate_tokens(completion.text)

    def _log_prompt(self, run: _Run, prepared: PreparedContext) -> None:
        """Log the run's system prompt and index header once, before its first response:
        what the model received on a call can then be rebuilt from the log (``_calls``)."""
        if run.prompt_logged:
            return
        run.prompt_logged = True
        self._system(run, prepared.system, PROMPT_KEY, index_header=prepared.index_header)

    def _system(
        self, run: _Run, content: str, key: str, step: int | None = None, **data: Any
    ) -> int:
        ctx = self.context
        return self.log.append(
            NewEvent(
                session_id=ctx.session_id,
                kind=Kind.SYSTEM,
                content=content,
                role="system",
                name="agent",
                agent_id=ctx.agent_id,
                run_id=run.run_id,
                task_id=ctx.task_id if self.events_in_task else None,
                step_index=step,
                metadata={key: {"model": self.model_name, **data}},
                searchable=False,
            )
        )

    def _finish(self, run: _Run, outcome: _Outcome) -> RunFinished:
        run.metrics.wall_time_s = time.monotonic() - run.started
        document = run.trace.to_dict(
            status=outcome.status,
            answer=outcome.answer,
            failure=outcome.failure,
            metrics=run.metrics,
            failure_type=outcome.failure_type,
        )
        path, trace_error = self._write_trace(run, document)
        summary = outcome.answer if outcome.failure is None else outcome.failure
        try:
            seq = self._system(
                run,
                f"run {run.run_id} {outcome.status}: {(summary or '')[:500]}",
                "run_end",
                status=outcome.status,
                answer=outcome.answer,
                failure=outcome.failure,
                failure_type=outcome.failure_type,
                trace_path=str(path) if path else None,
                trace_error=trace_error,
                metrics=run.metrics.to_dict(),
            )
        except StoreError:
            seq = 0  # the Event Log refuses writes (locked, full): the trace, written first, has it
        return RunFinished(
            seq, run.run_id, self.context.session_id, outcome.status, outcome.answer,
            outcome.failure, path, run.metrics, outcome.failure_type, trace_error,
        )  # fmt: skip

    def _write_trace(self, run: _Run, document: dict[str, Any]) -> tuple[Path | None, str | None]:
        """Write the run's trace; a trace that cannot be written (a full disk, a folder that is
        not writable) is said, and never keeps the ``run_end`` record from being attempted."""
        if not self.trace_dir:
            return None, None
        try:
            return run.trace.write(self.trace_dir, document), None
        except OSError as exc:
            why = exc.strerror or str(exc)
        except Exception as exc:  # noqa: BLE001 - a trace that fails must not keep run_end out
            why = f"{type(exc).__name__}: {exc}"
        return None, f"the trace could not be written to {self.trace_dir}: {why}"


def _stopped_by(exc: BaseException) -> _Outcome:
    """How a run is recorded that something stopped before its end (the exception goes on)."""
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or a signal the CLI turns into one
        failure = str(exc) or "interrupted by the user"
        return _Outcome("failed", failure=failure, failure_type="interrupted")
    if isinstance(exc, GeneratorExit):  # the caller broke out of iter_run, or failed reading it
        failure = "the caller stopped reading the run's events before it ended"
        return _Outcome("failed", failure=failure, failure_type="abandoned")
    if isinstance(exc, SystemExit):
        return _Outcome("failed", failure="the process exited mid-run", failure_type="interrupted")
    failure = f"unexpected {type(exc).__name__}: {redact(str(exc))}"
    return _Outcome("failed", failure=failure, failure_type="internal_error")


def _evicted(step: int, prepared: PreparedContext) -> ContextEvicted:
    return ContextEvicted(
        step, prepared.tokens_before, prepared.tokens, prepared.evicted_turns, prepared.index_seq
    )


def _context_meta(prepared: PreparedContext, digest: str) -> dict[str, Any]:
    """What the view cannot rebuild by itself about this call: its digest and budget."""
    return {
        "digest": digest,
        "context_tokens": prepared.tokens,
        "budget_tokens": prepared.budget_tokens,
    }


def _call_meta(completion: Completion, elapsed: float) -> dict[str, Any]:
    usage = completion.usage
    return {
        "backend": completion.backend,
        "model": completion.model,
        "finish_reason": completion.finish_reason,
        "elapsed_s": round(elapsed, 3),
        "usage": (
            {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
            if usage
            else None
        ),
    }
