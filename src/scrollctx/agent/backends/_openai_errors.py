"""Translate ``openai`` SDK exceptions into the scrollctx error tree, by type.

Invariants:

- :func:`map_openai_errors` is the only place an ``openai`` exception becomes ours. Rules are
  tried most specific first; every exception class the SDK exports has its own rule, and a test
  fails when a new SDK release adds one we do not map.
- "Input too long" is recognised by the structured error ``code`` (``context_length_exceeded``,
  OpenAI and vLLM) or ``type`` (``exceed_context_size_error``, llama.cpp server), never by the
  message text.
- Retried later (by :class:`RetryPolicy`) are only 429 (:class:`RateLimited`), 408, 502, 503,
  504, 529, timeouts and connection failures (:class:`BackendUnavailable`). Every other 4xx
  and 5xx is :class:`RequestRejected`: "the server rejected the request: <its message>".
- The original exception is always chained; messages pass through :func:`redact`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import openai

from scrollctx.errors import (
    BackendError,
    BackendUnavailable,
    BadResponse,
    ContextTooLong,
    MissingCredentials,
    RateLimited,
    RequestRejected,
)

from ._retry import error_details
from ._secrets import redact

__all__ = ["OPENAI_KEY_HELP", "RULES", "map_openai_errors"]

_CONTEXT_CODES = frozenset({"context_length_exceeded"})
_CONTEXT_TYPES = frozenset({"exceed_context_size_error"})
# Statuses that say "not now" (gateway, overload, maintenance): worth waiting for.
_UNAVAILABLE_STATUSES = frozenset({502, 503, 504, 529})
OPENAI_KEY_HELP = (
    "set it with `export OPENAI_API_KEY=...` or `api_key` under [backends.openai] in "
    "<store>/config.toml; for a local server (vLLM, Ollama, llama.cpp) set "
    "`export OPENAI_BASE_URL=http://127.0.0.1:PORT/v1` and choose it with --model openai:NAME"
)

Translate = Callable[[Any, str], BackendError]


def _detail(exc: openai.APIError) -> str:
    status = getattr(exc, "status_code", None)
    head = f"HTTP {status}" if status is not None else type(exc).__name__
    return f"{head}: {redact(exc.message)}"


def _server_words(exc: openai.APIStatusError) -> str:
    """The server's own message (the body's ``error.message`` when it sent one), redacted."""
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) and isinstance(body, dict):
        message = body.get("message") or body.get("detail")
    return redact(message if isinstance(message, str) and message else exc.message)


def _kwargs(exc: Any, backend: str) -> dict[str, Any]:
    return error_details(exc, backend)


def _is_context_error(exc: openai.APIStatusError) -> bool:
    return exc.code in _CONTEXT_CODES or exc.type in _CONTEXT_TYPES


def _refused(exc: openai.APIStatusError, backend: str, hint: str) -> BackendError:
    return RequestRejected(
        f"the {backend} server rejected the request: {_server_words(exc)} "
        f"(HTTP {exc.status_code}; not retried: {hint})",
        **_kwargs(exc, backend),
    )


def _rejected(exc: openai.APIStatusError, backend: str) -> BackendError:
    if _is_context_error(exc):
        return ContextTooLong(
            f"{backend} rejected the request as longer than the model's context window "
            f"({_detail(exc)}); shorten the conversation or lower --max-tokens",
            **_kwargs(exc, backend),
        )
    return _refused(exc, backend, "check the model name, the options and --max-tokens")


def _auth(exc: openai.APIStatusError, backend: str) -> BackendError:
    return MissingCredentials(
        f"{backend} refused the API key ({_detail(exc)}); {OPENAI_KEY_HELP}",
        **_kwargs(exc, backend),
    )


def _forbidden(exc: openai.APIStatusError, backend: str) -> BackendError:
    return _refused(
        exc, backend, "the key works but may not use this model or endpoint: pick another"
    )


def _not_found(exc: openai.APIStatusError, backend: str) -> BackendError:
    return _refused(
        exc,
        backend,
        "no such model or route: check the model name (`--model openai:NAME`) and that "
        "the base URL ends in /v1",
    )


def _rate_limited(exc: openai.APIStatusError, backend: str) -> BackendError:
    return RateLimited(
        f"{backend} is rate limiting us ({_detail(exc)}); wait and retry",
        **_kwargs(exc, backend),
    )


def _unavailable(exc: openai.APIError, backend: str) -> BackendError:
    return BackendUnavailable(
        f"{backend} is unavailable ({_detail(exc)}); retry later or check the server",
        **_kwargs(exc, backend),
    )


def _server_error(exc: openai.APIStatusError, backend: str) -> BackendError:
    """5xx: only "unavailable" statuses are transient; another 5xx failed on this request.

    Servers answer 500 for input they cannot take (llama-cpp-python's server does so for a
    request its schema rejects), so resending the same request would fail the same way.
    """
    if exc.status_code in _UNAVAILABLE_STATUSES:
        return _unavailable(exc, backend)
    return _refused(exc, backend, "the server failed on this request; check its log")


def _other_status(exc: openai.APIStatusError, backend: str) -> BackendError:
    if exc.status_code == 429:
        return _rate_limited(exc, backend)
    if exc.status_code == 408:
        return _unavailable(exc, backend)
    if exc.status_code >= 500:
        return _server_error(exc, backend)
    return _rejected(exc, backend)


def _bad_response(exc: openai.OpenAIError, backend: str) -> BackendError:
    return BadResponse(
        f"{backend} answered with something unusable ({type(exc).__name__}: "
        f"{redact(str(exc))}); retry, or report the server's output",
        **_kwargs(exc, backend),
    )


def _generic(exc: openai.OpenAIError, backend: str) -> BackendError:
    return BackendError(
        f"{backend} failed ({type(exc).__name__}: {redact(str(exc))})", **_kwargs(exc, backend)
    )


_RULE_NAMES: list[tuple[str, Translate]] = [
    ("BadRequestError", _rejected),
    ("OAuthError", _auth),
    ("AuthenticationError", _auth),
    ("PermissionDeniedError", _forbidden),
    ("NotFoundError", _not_found),
    ("ConflictError", _rejected),
    ("UnprocessableEntityError", _rejected),
    ("RateLimitError", _rate_limited),
    ("InternalServerError", _server_error),
    ("APIStatusError", _other_status),
    ("APITimeoutError", _unavailable),
    ("APIConnectionError", _unavailable),
    ("APIResponseValidationError", _bad_response),
    ("LengthFinishReasonError", _bad_response),
    ("ContentFilterFinishReasonError", _bad_response),
    ("WebSocketConnectionClosedError", _unavailable),
    ("WebSocketQueueFullError", _generic),
    ("APIError", _generic),
    ("OpenAIError", _generic),
]
# Classes an older SDK release lacks are skipped; the base class rules still catch everything.
RULES: list[tuple[type[BaseException], Translate]] = [
    (getattr(openai, name), translate)
    for name, translate in _RULE_NAMES
    if isinstance(getattr(openai, name, None), type)
]
"""(SDK exception class, translator), most specific first. The first isinstance match wins."""


@contextmanager
def map_openai_errors(backend: str = "openai") -> Iterator[None]:
    """Turn any ``openai`` exception raised inside the block into a :class:`BackendError`."""
    try:
        yield
    except openai.OpenAIError as exc:
        for sdk_class, translate in RULES:
            if isinstance(exc, sdk_class):
                raise translate(exc, backend) from exc
        raise  # unreachable: openai.OpenAIError is the last rule
