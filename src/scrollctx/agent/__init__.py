"""The agent layer: the CodeAct loop, its tools and prompts, traces, and the LLM backends.

:class:`Agent` is the library API (``run``, ``ask``, ``chat``); :class:`AgentLoop` is the loop
(a generator of typed events: :meth:`AgentLoop.iter_run`, drained by :meth:`AgentLoop.run`).
Its two seams are parameters: the :class:`Toolset` (:func:`scroll_toolset`,
:func:`json_memory_toolset`) and the :class:`ContextPolicy` (default :class:`ScrollPolicy`, the
working view with its eviction index). User tools are registered with :func:`tool`.
Backends live in :mod:`scrollctx.agent.backends`; their main names are re-exported here.
"""

from scrollctx.agent._agent import NO_MODEL_HELP, Agent, ChatSession, choose_model
from scrollctx.agent._answers import answer_call
from scrollctx.agent._calls import (
    CallChanges,
    ModelCall,
    call_changes,
    call_digest,
    rebuild_call,
)
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
from scrollctx.agent._loop import AgentLoop, Limits
from scrollctx.agent._mcp_spec import McpServerSpec
from scrollctx.agent._policy import (
    ContextPolicy,
    PolicyFactory,
    PolicyRequest,
    PreparedContext,
    ScrollPolicy,
    persist_message,
)
from scrollctx.agent._prompts import (
    PROMPT_FILES,
    RUBRICS,
    PromptSet,
    build_system_prompt,
    read_prompt,
)
from scrollctx.agent._tools import (
    AgentTool,
    AnswerSubmitted,
    Observation,
    ToolContext,
    Toolset,
    UserTool,
    json_memory_toolset,
    scroll_toolset,
    tool,
)
from scrollctx.agent._windows import Budget, choose_budget
from scrollctx.agent.backends import (
    Backend,
    BackendOptions,
    ChatRequest,
    Completion,
    Delta,
    Message,
    RetryPolicy,
    ToolCall,
    ToolSpec,
    Usage,
    extract_code_blocks,
    redact,
    register,
    resolve_model,
    unregister,
)

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentLoop",
    "AgentTool",
    "AnswerSubmitted",
    "Backend",
    "BackendOptions",
    "Budget",
    "CallChanges",
    "ChatRequest",
    "ChatSession",
    "Completion",
    "ContextEvicted",
    "ContextPolicy",
    "Delta",
    "Limits",
    "McpServerSpec",
    "Message",
    "ModelCall",
    "ModelStep",
    "NO_MODEL_HELP",
    "Observation",
    "PROMPT_FILES",
    "PolicyFactory",
    "PolicyRequest",
    "PreparedContext",
    "PromptSet",
    "RUBRICS",
    "RetryPolicy",
    "RunFinished",
    "RunMetrics",
    "RunStarted",
    "ScrollPolicy",
    "TextDelta",
    "ToolCall",
    "ToolContext",
    "ToolSpec",
    "ToolStep",
    "Toolset",
    "Usage",
    "UserTool",
    "answer_call",
    "build_system_prompt",
    "call_changes",
    "call_digest",
    "choose_budget",
    "choose_model",
    "extract_code_blocks",
    "json_memory_toolset",
    "persist_message",
    "read_prompt",
    "rebuild_call",
    "redact",
    "register",
    "resolve_model",
    "scroll_toolset",
    "tool",
    "unregister",
]
