"""The agent layer: the loop, its tools and prompts, and the LLM backends it talks to.

So far this layer holds the backends (:mod:`scrollctx.agent.backends`); the public names below
are re-exported from there.
"""

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
    "Backend",
    "BackendOptions",
    "ChatRequest",
    "Completion",
    "Delta",
    "Message",
    "RetryPolicy",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "extract_code_blocks",
    "redact",
    "register",
    "resolve_model",
    "unregister",
]
