"""Bounded retries with exponential backoff and jitter for provider calls.

Invariants:

- Only :class:`~scrollctx.errors.RateLimited` and :class:`~scrollctx.errors.BackendUnavailable`
  (429, 5xx, connection failures and timeouts, already translated at the SDK boundary) are
  retried; every other error, including all other 4xx answers, propagates at once.
- At most ``max_attempts`` calls are made. A ``Retry-After`` the provider sent is honoured as
  given; one longer than ``max_delay`` ends the retries at once rather than blocking for it.
- Waiting goes through an injected ``sleep`` so tests never wait.
- Every wait is announced before it starts, as a WARNING on the ``scrollctx.retry`` logger
  (what failed, how long the wait is, which attempt comes next): the CLI shows it on its live
  line, and a library user sees it through :mod:`logging`.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from scrollctx.errors import BackendUnavailable, RateLimited, UsageError

__all__ = [
    "RETRY_LOGGER",
    "RetryPolicy",
    "call_with_retries",
    "error_details",
    "parse_retry_after",
]

T = TypeVar("T")
RETRY_LOGGER = "scrollctx.retry"
_log = logging.getLogger(RETRY_LOGGER)
_RETRYABLE = (RateLimited, BackendUnavailable)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry a failed provider call.

    Example::

        RetryPolicy(max_attempts=3, base_delay=0.5)   # waits ~0.5 s, then ~1 s

    ``jitter`` is the fraction of each backoff delay that is randomised away (0 = none).
    """

    max_attempts: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 0.5
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UsageError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise UsageError(
                f"retry delays must be >= 0, got base {self.base_delay}, max {self.max_delay}"
            )
        if not 0 <= self.jitter <= 1:
            raise UsageError(f"jitter must be within [0, 1], got {self.jitter}")

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based), jitter applied."""
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return ceiling * (1 - self.jitter * self.rng.random())


def call_with_retries(call: Callable[[], T], policy: RetryPolicy) -> T:
    """Run ``call``, retrying rate limits and outages as ``policy`` allows.

    Raises:
        RateLimited, BackendUnavailable: still failing after the last attempt (or the
            provider asked for a wait beyond ``policy.max_delay``); the message says how many
            attempts were made.
    """
    attempt = 1
    while True:
        try:
            return call()
        except _RETRYABLE as exc:
            wait = exc.retry_after if exc.retry_after is not None else policy.backoff(attempt)
            if attempt >= policy.max_attempts or wait > policy.max_delay:
                raise _give_up(exc, attempt, wait, policy) from exc
            _log.warning(
                "%s; retrying in %.1f s (attempt %d of %d)",
                exc,
                wait,
                attempt + 1,
                policy.max_attempts,
            )
            policy.sleep(wait)
            attempt += 1


def _give_up(
    exc: RateLimited | BackendUnavailable, attempt: int, wait: float, policy: RetryPolicy
) -> RateLimited | BackendUnavailable:
    if attempt < policy.max_attempts:
        why = (
            f"the provider asked to wait {wait:g} s, longer than the {policy.max_delay:g} s "
            f"allowed; try again later"
        )
    else:
        why = f"gave up after {attempt} attempt{'s' if attempt > 1 else ''}"
    return type(exc)(
        f"{exc} ({why})",
        backend=exc.backend,
        status_code=exc.status_code,
        retry_after=exc.retry_after,
        body=exc.body,
    )


def error_details(exc: BaseException, backend: str) -> dict[str, Any]:
    """What a provider error carries, read from the SDK exception (and its HTTP response).

    The keyword arguments of every :class:`~scrollctx.errors.BackendError`: the backend, the
    HTTP status, the ``Retry-After`` wait and the provider's body (the response text as sent;
    for an error event inside a stream, the event's JSON).
    """
    response = getattr(exc, "response", None)
    return {
        "backend": backend,
        "status_code": getattr(response, "status_code", None),
        "retry_after": parse_retry_after(getattr(response, "headers", None)),
        "body": _body_text(exc, response),
    }


def _body_text(exc: BaseException, response: Any) -> str | None:
    # A response the SDK read whole is closed and has its text; a stream's error arrives as an
    # event the SDK already parsed into ``exc.body``.
    if response is not None and getattr(response, "is_closed", False):
        text = response.text
        if isinstance(text, str) and text:
            return text
    body = getattr(exc, "body", None)
    if body is None:
        return None
    return body if isinstance(body, str) else json.dumps(body)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), else None."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return _seconds_until(value)


def _seconds_until(http_date: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
