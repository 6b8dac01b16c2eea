"""The proxy: one store, one upstream, the door of the upstream's wire, a kernel per session.

:class:`Proxy` ties the pieces together and owns what must be closed: the kernels (one per
conversation, in the :class:`~scrollctx.serve.KernelRegistry` the MCP server uses too: idle
timeout, least-recently-used room-making, no worker left after close) and the upstream
backend. It serves the door whose wire the upstream speaks
(``openai`` chat completions or ``anthropic`` Messages); the other door answers 400 naming the
upstream's API, since translating between the two is not this proxy's job.

The sandbox is checked before the proxy serves anything (:func:`sandbox_label`): with the
``strict`` profile and a layer missing, it refuses to start; an opt-out is logged once and
stated in every answer's ``X-Scroll-Sandbox`` header.
"""

from __future__ import annotations

import threading
from importlib import resources
from string import Template

from scrollctx.agent import ToolContext, Toolset, scroll_toolset
from scrollctx.agent.backends import Backend
from scrollctx.errors import SandboxUnavailable, UsageError
from scrollctx.kernel import Kernel, SandboxPolicy, doctor
from scrollctx.log import EventStore, Kind, NewEvent
from scrollctx.serve._sessions import KernelRegistry, log_name
from scrollctx.serve.proxy._anthropic_wire import ANTHROPIC
from scrollctx.serve.proxy._conversations import Conversation, Conversations, ViewSettings
from scrollctx.serve.proxy._door import Door
from scrollctx.serve.proxy._openai_wire import OPENAI
from scrollctx.serve.proxy._recall import RECALL_TOOL, RecallLimits, RecallLoop
from scrollctx.serve.proxy._windows import ModelWindows
from scrollctx.serve.proxy._wire import Wire
from scrollctx.view import HEADLINE_PROMPT

__all__ = ["SERVE_OPT_OUT", "WIRES", "Proxy", "proxy_rules", "sandbox_label"]

SERVE_OPT_OUT = "its operator restarts the proxy with `scroll serve --sandbox best-effort` (or off)"
"""How a conversation's user opts out of a sandbox layer on this proxy (named in refusals)."""

_CONTEXT = "context"
_KERNELS = "proxy"


def proxy_rules() -> str:
    """Scroll's rules, appended to every client's system prompt."""
    text = (resources.files("scrollctx.serve.proxy") / "rules.md").read_text(encoding="utf-8")
    return Template(text.rstrip()).substitute(headline_protocol=HEADLINE_PROMPT)


def sandbox_label(policy: SandboxPolicy) -> str:
    """Check the sandbox here; return how answers state it (``strict``, ``off (opt-out)``).

    Raises:
        SandboxUnavailable: the profile is strict and a layer does not hold on this machine.
    """
    if policy.is_opt_out:  # nothing to check: no probe worker started for a report unread
        return f"{policy.profile} (opt-out)"
    report = doctor(unavailable=policy.unavailable)
    if not report.strict_holds:
        missing = [s.name for s in report.status.layers if not s.holds]
        raise SandboxUnavailable(
            f"refusing to start: the recall kernel's sandbox does not hold here (missing: "
            f"{', '.join(missing)}); see `scroll kernel doctor`, or opt out with --sandbox "
            "best-effort (stated in every answer's X-Scroll-Sandbox header)",
            layers={s.name: s.state for s in report.status.layers},
        )
    return "strict"


class Proxy:
    """Everything ``scroll serve`` runs, over one open Event Log and one upstream backend.

    Args:
        log: the store's Event Log (the proxy writes through it).
        backend: the upstream; its ``wire`` picks the door. The proxy closes it.
        view: the working view's knobs (``budget_tokens`` None: C per requested model).
        limits: the recall loop's budget per request.
        sandbox: the kernels' sandbox policy; ``label`` is what :func:`sandbox_label` said.
        session_key: ``header`` or ``api-key`` (see :class:`~._door.Door`).
        idle_timeout, max_kernels: of the kernel registry (a kernel per conversation, closed
            when idle that long, the least recently used one when that many are live).
    """

    def __init__(
        self,
        log: EventStore,
        backend: Backend,
        *,
        view: ViewSettings,
        limits: RecallLimits,
        sandbox: SandboxPolicy,
        label: str,
        session_key: str = "header",
        idle_timeout: float = 900.0,
        max_kernels: int = 8,
    ) -> None:
        wire = _wire(backend)
        self.log, self.backend, self.sandbox, self.limits = log, backend, sandbox, limits
        rules = proxy_rules()
        self.windows = ModelWindows(backend, given=view.budget_tokens)
        self.conversations = Conversations(log, view, lambda system: _joined(system, rules),
                                           window=self.windows.tokens)  # fmt: skip
        self.conversations.load()
        self._contexts_lock = threading.Lock()
        self._owners: dict[str, Conversation] = {}
        self.kernels = KernelRegistry(self._kernel, _KERNELS, idle_timeout=idle_timeout,
                                      max_kernels=max_kernels)  # fmt: skip
        self.kernels.start_reaper()
        recall = Toolset(tuple(t for t in scroll_toolset().tools if t.name == RECALL_TOOL))
        loop = RecallLoop(backend, wire, self.conversations, recall, self.context_of, limits)
        self.door = Door(wire, backend, self.conversations, loop, sandbox=label,
                         session_key=session_key)  # fmt: skip
        if sandbox.is_opt_out:
            log.append(
                NewEvent(
                    session_id="proxy",
                    kind=Kind.SYSTEM,
                    role="system",
                    name="proxy",
                    content=f"scroll serve runs recall cells with sandbox {label}",
                    metadata={"opt_out": {"profile": sandbox.profile}},
                )
            )

    @property
    def wire(self) -> str:
        """The API the upstream speaks: ``openai`` or ``anthropic``."""
        return self.door.wire.name

    def door_for(self, wire: str) -> Door:
        """The door for requests in ``wire`` format.

        Raises:
            UsageError: the upstream speaks the other API.
        """
        if wire != self.wire:
            raise UsageError(
                f"this proxy's upstream speaks the {self.wire} API, so it serves "
                f"{_ROUTES[self.wire]} only; point this client at a scroll serve whose "
                f"upstream speaks {wire} (--upstream-api {wire})"
            )
        return self.door

    def context_of(self, conversation: Conversation) -> ToolContext:
        """The conversation's tool context: cells run in its kernel of the shared registry."""
        with self._contexts_lock:
            context = conversation.state.get(_CONTEXT)
            if context is None:
                key = conversation.session_id
                self._owners[log_name(_KERNELS, key)] = conversation
                context = ToolContext(
                    self.log,
                    session_id=key,
                    agent_id=conversation.agent_id,
                    run_cells=lambda source: self.kernels.run_cell(
                        key, source, timeout=self.limits.cell_timeout
                    ),
                )
                conversation.state[_CONTEXT] = context
            return context

    def close(self) -> None:
        """Stop every kernel (no worker is left), finish the flushes under way, then close
        the upstream client."""
        self.kernels.close_all()
        self.conversations.close()
        self.backend.close()

    def _kernel(self, name: str) -> Kernel:
        """A conversation's kernel: ``ms`` bound to its session and its tree's agent."""
        conversation = self._owners[name]
        return Kernel(
            event_log=self.log,
            session_id=conversation.session_id,
            agent_id=conversation.agent_id,
            sandbox=self.sandbox,
            timeout=self.limits.cell_timeout,
            opt_out=SERVE_OPT_OUT,
        )


_ROUTES = {"openai": "POST /v1/chat/completions", "anthropic": "POST /v1/messages"}


WIRES: dict[str, Wire] = {"openai": OPENAI, "anthropic": ANTHROPIC}
"""Each wire the proxy serves, by name (a backend's ``wire``, a door's route)."""


def _wire(backend: Backend) -> Wire:
    wire = WIRES.get(backend.wire or "")
    if wire is None:
        raise UsageError(
            f"the {backend.name} backend has no wire format to proxy; use an openai or "
            "anthropic upstream"
        )
    return wire


def _joined(client_system: str, rules: str) -> str:
    return f"{client_system.rstrip()}\n\n{rules}" if client_system.strip() else rules
