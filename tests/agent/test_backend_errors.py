"""Every SDK exception class is translated at the boundary, by type, with its cause chained."""

from __future__ import annotations

import inspect
import random
from types import ModuleType
from typing import Any

import httpx2
import openai
import pytest
from scripted_servers import SleepRecorder

from needs import import_or_missing
from scrollctx.agent.backends import RetryPolicy, call_with_retries
from scrollctx.agent.backends._openai_errors import RULES, map_openai_errors
from scrollctx.agent.backends._retry import parse_retry_after
from scrollctx.errors import (
    BackendError,
    BackendUnavailable,
    BadResponse,
    ContextTooLong,
    MissingCredentials,
    RateLimited,
    RequestRejected,
    UsageError,
)


def exported_error_classes(sdk: ModuleType, base: type[BaseException]) -> set[type[BaseException]]:
    return {
        value
        for name in dir(sdk)
        if not name.startswith("_")
        and inspect.isclass(value := getattr(sdk, name))
        and issubclass(value, base)
    }


def check_rules(rules: list[tuple[type[BaseException], Any]], classes: set[type]) -> None:
    mapped = [sdk_class for sdk_class, _ in rules]
    assert classes - set(mapped) == set(), "SDK exception classes without a rule"
    for earlier, later in (
        (mapped[i], mapped[j]) for i in range(len(mapped)) for j in range(i + 1, len(mapped))
    ):
        assert not issubclass(later, earlier), f"{later.__name__} is shadowed by {earlier.__name__}"


def test_every_openai_exception_class_has_its_own_rule() -> None:
    check_rules(RULES, exported_error_classes(openai, openai.OpenAIError))


def test_every_anthropic_exception_class_has_its_own_rule() -> None:
    anthropic = import_or_missing("anthropic")
    from scrollctx.agent.backends._anthropic_errors import anthropic_rules

    check_rules(anthropic_rules(), exported_error_classes(anthropic, anthropic.AnthropicError))


def _request() -> httpx2.Request:
    return httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")


def _response(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, headers=headers or {}, request=_request())


OPENAI_CASES: list[tuple[BaseException, type[BackendError]]] = [
    (
        openai.BadRequestError(
            "bad", response=_response(400), body={"code": "context_length_exceeded"}
        ),
        ContextTooLong,
    ),
    (
        openai.BadRequestError("bad", response=_response(400), body={"code": "invalid_value"}),
        RequestRejected,
    ),
    (openai.AuthenticationError("no", response=_response(401), body=None), MissingCredentials),
    (
        openai.OAuthError(response=_response(401), body={"error": "invalid_grant"}),
        MissingCredentials,
    ),
    (openai.PermissionDeniedError("no", response=_response(403), body=None), RequestRejected),
    (openai.NotFoundError("no", response=_response(404), body=None), RequestRejected),
    (openai.ConflictError("no", response=_response(409), body=None), RequestRejected),
    (openai.UnprocessableEntityError("no", response=_response(422), body=None), RequestRejected),
    (
        openai.RateLimitError("slow", response=_response(429, {"retry-after": "7"}), body=None),
        RateLimited,
    ),
    (openai.InternalServerError("down", response=_response(503), body=None), BackendUnavailable),
    (openai.InternalServerError("bug", response=_response(500), body=None), RequestRejected),
    (openai.APIStatusError("odd", response=_response(451), body=None), RequestRejected),
    (openai.APIStatusError("odd", response=_response(429), body=None), RateLimited),
    (openai.APIStatusError("odd", response=_response(408), body=None), BackendUnavailable),
    (openai.APIStatusError("odd", response=_response(504), body=None), BackendUnavailable),
    (openai.APIStatusError("odd", response=_response(599), body=None), RequestRejected),
    (openai.APITimeoutError(request=_request()), BackendUnavailable),
    (openai.APIConnectionError(request=_request()), BackendUnavailable),
    (openai.APIResponseValidationError(_response(200), body=None), BadResponse),
    (openai.APIError("raw", _request(), body=None), BackendError),
    (openai.OpenAIError("bare"), BackendError),
]


@pytest.mark.parametrize(("raised", "expected"), OPENAI_CASES, ids=lambda v: type(v).__name__)
def test_openai_exceptions_translate_and_chain(
    raised: BaseException, expected: type[BackendError]
) -> None:
    with pytest.raises(BackendError) as caught, map_openai_errors("openai"):
        raise raised

    assert type(caught.value) is expected
    assert caught.value.__cause__ is raised
    assert caught.value.backend == "openai"


def test_retry_after_is_read_from_the_response() -> None:
    raised = openai.RateLimitError("slow", response=_response(429, {"retry-after": "7"}), body=None)
    with pytest.raises(RateLimited) as caught, map_openai_errors():
        raise raised
    assert caught.value.retry_after == 7.0 and caught.value.status_code == 429


def test_non_sdk_exceptions_pass_through_untouched() -> None:
    with pytest.raises(KeyError), map_openai_errors():
        raise KeyError("our own bug")


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "12"}, 12.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Thu, 01 Jan 1970 00:00:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(httpx2.Headers(headers)) == seconds


# -- the retry policy on its own ------------------------------------------------------------------


class FailingCall:
    """Test double for a provider call: raises the scripted errors, then returns "ok"."""

    def __init__(self, *errors: BackendError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def policy(sleeps: SleepRecorder, **kwargs: Any) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps, rng=random.Random(1), **kwargs)


def test_transient_errors_are_retried_until_success(sleeps: SleepRecorder) -> None:
    call = FailingCall(BackendUnavailable("down"), RateLimited("slow", retry_after=4))

    assert call_with_retries(call, policy(sleeps, jitter=0.0)) == "ok"
    assert call.calls == 3 and sleeps.waits == [1.0, 4.0]


@pytest.mark.parametrize(
    "error",
    [BackendError("400"), MissingCredentials("401"), ContextTooLong("long"), BadResponse("junk")],
    ids=lambda e: type(e).__name__,
)
def test_other_errors_are_not_retried(sleeps: SleepRecorder, error: BackendError) -> None:
    call = FailingCall(error)

    with pytest.raises(type(error)):
        call_with_retries(call, policy(sleeps))
    assert call.calls == 1 and sleeps.waits == []


def test_backoff_doubles_and_is_capped(sleeps: SleepRecorder) -> None:
    call = FailingCall(*[BackendUnavailable("down", status_code=503) for _ in range(6)])

    with pytest.raises(BackendUnavailable, match="gave up after 6 attempts") as caught:
        call_with_retries(call, policy(sleeps, max_attempts=6, base_delay=1, max_delay=5, jitter=0))

    assert sleeps.waits == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert caught.value.status_code == 503 and isinstance(
        caught.value.__cause__, BackendUnavailable
    )


def test_jitter_stays_within_its_fraction(sleeps: SleepRecorder) -> None:
    retry = policy(sleeps, base_delay=2.0, jitter=0.25)
    delays = [retry.backoff(1) for _ in range(200)]

    assert all(1.5 <= d <= 2.0 for d in delays)
    assert len(set(delays)) > 1


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"max_attempts": 0}, "max_attempts must be at least 1, got 0"),
        ({"base_delay": -1}, "retry delays must be >= 0, got base -1, max 30.0"),
        ({"jitter": 1.5}, r"jitter must be within \[0, 1\], got 1.5"),
    ],
    ids=str,
)
def test_invalid_policies_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
