"""Translate ``anthropic`` SDK exceptions into the scrollctx error tree, by type.

Invariants:

- The ``anthropic`` SDK is imported lazily, by :func:`import_sdk`; a missing SDK raises
  :class:`~scrollctx.errors.MissingDependency` naming ``pip install 'scrollctx[anthropic]'``.
- :func:`map_anthropic_errors` is the only place an ``anthropic`` exception becomes ours.
  Rules are tried most specific first; every exception class the SDK exports (including the
  subclasses it raises for a specific ``error.details.error_code``) has its own rule, and a
  test fails when a new SDK release adds one we do not map.
- "Prompt too long" is recognised by the structured ``error.details.error_code`` or by HTTP 413
  (``ContentTooLargeError``), never by message text. A 429 for a reached spend limit is not
  retried: waiting does not cure it. A refused request is :class:`RequestRejected` with the
  server's own message; Anthropic's 500 (``api_error``, its documented transient failure), 529
  and the other 5xx are retried as :class:`BackendUnavailable`.
- The original exception is always chained; messages pass through :func:`redact`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from scrollctx.errors import (
    BackendError,
    BackendUnavailable,
    BadResponse,
    ContextTooLong,
    MissingCredentials,
    MissingDependency,
    RateLimited,
    RequestRejected,
)

from ._retry import error_details
from ._secrets import redact

__all__ = ["ANTHROPIC_KEY_HELP", "anthropic_rules", "import_sdk", "map_anthropic_errors"]

ANTHROPIC_KEY_HELP = (
    "set it with `export ANTHROPIC_API_KEY=...` or `api_key` under [backends.anthropic] in "
    "<store>/config.toml, or choose another backend with --model openai:NAME"
)
_CONTEXT_CODES = frozenset({"prompt_too_long", "context_length_exceeded"})


def import_sdk() -> Any:
    """Import and return the ``anthropic`` module, or raise MissingDependency."""
    try:
        import anthropic  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise MissingDependency("anthropic", "anthropic") from exc
    return anthropic


Translate = Callable[[Any, str], BackendError]


def _kwargs(exc: Any, backend: str) -> dict[str, Any]:
    return error_details(exc, backend)


def _detail(exc: Any) -> str:
    status = getattr(exc, "status_code", None)
    head = f"HTTP {status}" if status is not None else type(exc).__name__
    # api_message is the body's error.message; message is the SDK's whole summary
    text = getattr(exc, "api_message", None) or getattr(exc, "message", None) or str(exc)
    return f"{head}: {redact(text)}"


def _refused(exc: Any, backend: str, hint: str) -> BackendError:
    status = getattr(exc, "status_code", None)
    said = getattr(exc, "api_message", None) or getattr(exc, "message", None) or str(exc)
    return RequestRejected(
        f"the {backend} server rejected the request: {redact(said)} "
        f"(HTTP {status}; not retried: {hint})",
        **_kwargs(exc, backend),
    )


def _rejected(exc: Any, backend: str) -> BackendError:
    if getattr(exc, "error_code", None) in _CONTEXT_CODES:
        return _too_long(exc, backend)
    return _refused(exc, backend, "check the model name, the options and --max-tokens")


def _too_long(exc: Any, backend: str) -> BackendError:
    return ContextTooLong(
        f"{backend} rejected the request as too long ({_detail(exc)}); "
        "shorten the conversation or lower max_tokens",
        **_kwargs(exc, backend),
    )


def _auth(exc: Any, backend: str) -> BackendError:
    return MissingCredentials(
        f"{backend} refused the credentials ({_detail(exc)}); {ANTHROPIC_KEY_HELP}",
        **_kwargs(exc, backend),
    )


def _denied(exc: Any, backend: str) -> BackendError:
    return _refused(exc, backend, "check the account, billing and model access of this key")


def _rate_limited(exc: Any, backend: str) -> BackendError:
    return RateLimited(
        f"{backend} is rate limiting us ({_detail(exc)}); wait and retry", **_kwargs(exc, backend)
    )


def _unavailable(exc: Any, backend: str) -> BackendError:
    return BackendUnavailable(
        f"{backend} is unavailable ({_detail(exc)}); retry later", **_kwargs(exc, backend)
    )


def _other_status(exc: Any, backend: str) -> BackendError:
    if exc.status_code == 429:
        return _rate_limited(exc, backend)
    if exc.status_code >= 500 or exc.status_code in (408, 499):
        return _unavailable(exc, backend)
    return _rejected(exc, backend)


def _bad_response(exc: Any, backend: str) -> BackendError:
    return BadResponse(
        f"{backend} answered with something unusable ({_detail(exc)})", **_kwargs(exc, backend)
    )


def _generic(exc: Any, backend: str) -> BackendError:
    return BackendError(f"{backend} failed ({_detail(exc)})", **_kwargs(exc, backend))


def _spend_limit(exc: Any, backend: str) -> BackendError:
    # a 429 that waiting will not cure: the account's spend limit is reached
    return _refused(
        exc, backend, "the account's spend limit is reached: raise it or use another key"
    )


_RULE_NAMES: list[tuple[str, Translate]] = [
    # Subclasses the SDK raises for a specific ``error.details.error_code``.
    ("RampLimitExceededError", _rate_limited),
    ("ContractSpendLimitReachedError", _spend_limit),
    ("EnforcedSpendLimitReachedError", _spend_limit),
    ("RequestBodyTooLargeAfterDecodingError", _too_long),
    ("CMEKContextUnavailableError", _unavailable),
    ("CMEKKeyUnreachableError", _unavailable),
    ("StorageNotReadyError", _unavailable),
    ("CMEKKeyDisabledError", _denied),
    ("CMEKKeyNetworkBlockedError", _denied),
    ("ClaudeCodeKeyCreatorNotMemberError", _denied),
    ("ClaudeCodeVersionTooOldError", _rejected),
    ("OrganizationOnHoldError", _denied),
    ("OrganizationTypeNotSupportedError", _denied),
    ("ParentOrganizationRequiredError", _denied),
    ("WorkspaceHumanReviewDisabledError", _denied),
    ("RequestBodyEncodingInvalidError", _rejected),
    ("RequestBodyEncodingUnsupportedError", _rejected),
    ("LinkedOrganizationBillingUnavailableError", _denied),
    ("LinkedOrganizationSpendLimitReachedError", _spend_limit),
    ("SandboxEgressRestrictedError", _denied),
    ("WorkloadIdentityError", _auth),
    # The status-code classes.
    ("ContentTooLargeError", _too_long),
    ("BadRequestError", _rejected),
    ("IdentityTokenFileError", _auth),
    ("CredentialsError", _auth),
    ("AuthenticationError", _auth),
    ("PaymentRequiredError", _denied),
    ("PermissionDeniedError", _denied),
    ("NotFoundError", _rejected),
    ("RequestTimeoutError", _unavailable),
    ("ConflictError", _rejected),
    ("PreconditionFailedError", _rejected),
    ("UnprocessableEntityError", _rejected),
    ("RequestHeaderFieldsTooLargeError", _rejected),
    ("RateLimitError", _rate_limited),
    ("ClientClosedRequestError", _unavailable),
    ("HTTPNotImplementedError", _rejected),
    ("OverloadedError", _unavailable),
    ("ServiceUnavailableError", _unavailable),
    ("GatewayTimeoutError", _unavailable),
    ("InternalServerError", _unavailable),
    ("APIStatusError", _other_status),
    ("APITimeoutError", _unavailable),
    ("APIConnectionError", _unavailable),
    ("APIResponseValidationError", _bad_response),
    ("APIWebhookValidationError", _bad_response),
    ("RetryableError", _unavailable),
    ("APIError", _generic),
    ("AnthropicError", _generic),
]


def anthropic_rules() -> list[tuple[type[BaseException], Translate]]:
    """(SDK exception class, translator), most specific first; classes the SDK lacks skipped."""
    sdk = import_sdk()
    return [
        (getattr(sdk, name), translate)
        for name, translate in _RULE_NAMES
        if isinstance(getattr(sdk, name, None), type)
    ]


@contextmanager
def map_anthropic_errors(backend: str = "anthropic") -> Iterator[None]:
    """Turn any ``anthropic`` exception raised inside the block into a :class:`BackendError`."""
    sdk = import_sdk()
    try:
        yield
    except sdk.AnthropicError as exc:
        for sdk_class, translate in anthropic_rules():
            if isinstance(exc, sdk_class):
                raise translate(exc, backend) from exc
        raise
