"""LLM backends: one contract, a registry of names, and the built-in adapters.

A backend turns a provider-neutral :class:`ChatRequest` into a :class:`Completion`. Backends are
found by name through the registry (:func:`resolve_model`, :func:`register`); the built-ins
(``openai``, ``anthropic``, ``local``) are registered as ``"module:Class"`` strings and imported
on first use, so an optional SDK is only imported when its backend is chosen. Third-party
backends use the ``scrollctx.backends`` entry-point group.

Errors from providers arrive as the :class:`~scrollctx.errors.BackendError` branch of the one
error tree; rate limits and outages are retried by :class:`RetryPolicy` before they do.
"""

from ._base import Backend, BackendOptions
from ._codeblocks import extract_code_blocks
from ._registry import (
    ENTRY_POINT_GROUP,
    backend_class,
    backend_names,
    register,
    resolve_model,
    unregister,
)
from ._retry import RETRY_LOGGER, RetryPolicy, call_with_retries
from ._secrets import REDACTED, redact
from ._settings import Endpoint, EndpointSource, resolve_cache_dir, resolve_endpoint
from ._types import (
    ChatRequest,
    Completion,
    Delta,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
    parse_tool_arguments,
)
from ._wire import StreamBuilder, WireStream

__all__ = [
    "Backend",
    "BackendOptions",
    "ChatRequest",
    "Completion",
    "Delta",
    "ENTRY_POINT_GROUP",
    "Endpoint",
    "EndpointSource",
    "Message",
    "REDACTED",
    "RETRY_LOGGER",
    "RetryPolicy",
    "StreamBuilder",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "WireStream",
    "backend_class",
    "backend_names",
    "call_with_retries",
    "extract_code_blocks",
    "parse_tool_arguments",
    "redact",
    "register",
    "resolve_cache_dir",
    "resolve_endpoint",
    "resolve_model",
    "unregister",
]
