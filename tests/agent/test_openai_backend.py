"""The OpenAI-compatible backend over real HTTP via the real SDK, against the scripted server."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply, SleepRecorder

from scrollctx.agent import ChatRequest, Completion, Delta, RetryPolicy, ToolSpec
from scrollctx.agent.backends._openai import DEFAULT_MAX_TOKENS, OpenAIBackend
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

KEY = "sk-test-0123456789abcdef"
REPL = ToolSpec(
    "repl_exec",
    "Run a Python cell.",
    {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]},
)


def ask(text: str = "hi", **kwargs: Any) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **kwargs)


@pytest.fixture
def backend(
    openai_server: ScriptedOpenAIServer, fast_retry: RetryPolicy
) -> Iterator[OpenAIBackend]:
    with OpenAIBackend(
        model="m", base_url=openai_server.base_url, api_key=KEY, retry=fast_retry
    ) as built:
        yield built


def test_plain_text_answer_and_the_request_on_the_wire(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("Hello there.", usage=(12, 3), model="served-model")

    answer = backend.complete(ask("hi", system="You are terse."))

    assert answer == Completion(
        text="Hello there.",
        finish_reason="stop",
        usage=answer.usage,
        model="served-model",
        backend="openai",
    )
    assert answer.usage is not None and (answer.usage.prompt_tokens, answer.usage.total_tokens) == (
        12,
        15,
    )
    [request] = openai_server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "m"
    assert request.body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    assert "tools" not in request.body and "stream" not in request.body


def test_tool_calls_are_parsed_and_tools_are_sent(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls(
        [("repl_exec", {"source": "print(ms.search('jira'))"}), ("submit_answer", "{}")]
    )

    answer = backend.complete(ask(tools=[REPL]))

    first, second = answer.tool_calls
    assert (first.id, first.name) == ("call_0", "repl_exec")
    assert first.arguments == {"source": "print(ms.search('jira'))"}
    assert first.raw_arguments == json.dumps({"source": "print(ms.search('jira'))"})
    assert first.has_valid_arguments
    assert (second.name, second.arguments, second.arguments_error) == ("submit_answer", {}, None)
    assert answer.finish_reason == "tool_calls"
    assert openai_server.requests[0].body["tools"] == [REPL.to_openai()]


@pytest.mark.parametrize(
    "raw",
    [
        '{"source": "print(1)',
        "[1, 2]",
        "source=print(1)",
        "[" * 100_000 + "]" * 100_000,
        '{"n": ' + "9" * 5_000 + "}",
    ],
    ids=["truncated", "array", "not-json", "nested-too-deep", "integer-too-long"],
)
def test_invalid_tool_arguments_are_kept_raw_and_flagged(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, raw: str
) -> None:
    openai_server.enqueue_tool_calls([("repl_exec", raw)])

    [call] = backend.complete(ask(tools=[REPL])).tool_calls

    assert call.raw_arguments == raw
    assert call.arguments == {}
    assert not call.has_valid_arguments and call.arguments_error


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_is_kept_exactly(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, key: str
) -> None:
    thought = "  Let me think…\n\n- step 1: ms.search('sprint')  \n\t- done\n"
    openai_server.enqueue_text("42", reasoning=thought, reasoning_key=key)

    answer = backend.complete(ask())

    assert answer.reasoning == thought
    assert answer.reasoning_blocks == ({"type": key, "text": thought},)
    assert answer.to_message()["reasoning"] == [{"type": key, "text": thought}]


def test_missing_usage_is_tolerated(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("ok", usage=None)

    assert backend.complete(ask()).usage is None


def test_conversation_history_goes_out_in_wire_shape(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "1+1"})], reasoning="why")
    first = backend.complete(ask(tools=[REPL]))
    openai_server.enqueue_text("2")
    history = [
        {"role": "user", "content": "hi"},
        first.to_message(),
        {"role": "tool", "tool_call_id": "call_0", "content": "2"},
    ]

    backend.complete(ChatRequest(messages=history, tools=[REPL]))  # type: ignore[arg-type]

    sent = openai_server.requests[1].body["messages"]
    assert first.to_message()["content"] is None  # the log keeps what the model said
    assert sent[1] == {
        "role": "assistant",
        "content": "",  # llama-cpp-python's server rejects null here (tests/agent/real_server)
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "repl_exec", "arguments": '{"source": "1+1"}'},
            }
        ],
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "call_0", "content": "2"}


def test_streaming_yields_deltas_then_the_same_completion(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    text = "Streaming works across several chunks."
    openai_server.enqueue_text(text, reasoning="  think\nhard ", usage=(7, 9))

    events = list(backend.stream(ask()))

    *deltas, final = events
    assert all(isinstance(d, Delta) for d in deltas) and len(deltas) > 2
    assert "".join(d.text for d in deltas if isinstance(d, Delta)) == text
    assert isinstance(final, Completion)
    assert (final.text, final.reasoning, final.finish_reason) == (text, "  think\nhard ", "stop")
    assert final.usage is not None and final.usage.total_tokens == 16
    body = openai_server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_streamed_tool_calls_are_assembled_from_fragments(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls(
        [("repl_exec", {"source": "for i in range(3):\n    print(i)"}), ("repl_exec", "{oops")]
    )

    final = list(backend.stream(ask(tools=[REPL])))[-1]

    assert isinstance(final, Completion)
    good, bad = final.tool_calls
    assert good.arguments == {"source": "for i in range(3):\n    print(i)"}
    assert (bad.raw_arguments, bad.has_valid_arguments) == ("{oops", False)


def test_stream_without_usage_option(
    openai_server: ScriptedOpenAIServer, fast_retry: RetryPolicy
) -> None:
    openai_server.enqueue_text("hi", usage=(1, 1))
    with OpenAIBackend(
        model="m",
        base_url=openai_server.base_url,
        api_key=KEY,
        retry=fast_retry,
        options={"stream_usage": False},
    ) as backend:
        final = list(backend.stream(ask()))[-1]

    assert isinstance(final, Completion) and final.usage is None
    assert "stream_options" not in openai_server.requests[0].body


def test_options_go_on_the_wire_and_per_call_options_override(
    openai_server: ScriptedOpenAIServer, fast_retry: RetryPolicy
) -> None:
    openai_server.enqueue_text("a")
    options = {"temperature": 0.5, "max_tokens": 100, "stop": ["</done>"], "extra_body": {"k": 1}}
    with OpenAIBackend(
        model="m", base_url=openai_server.base_url, api_key=KEY, retry=fast_retry, options=options
    ) as backend:
        backend.complete(ask(options={"temperature": 0, "seed": 3}))

    body = openai_server.requests[0].body
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0, 100, 3)
    assert body["stop"] == ["</done>"] and body["k"] == 1


def test_unknown_option_fails_before_any_request(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    with pytest.raises(UsageError, match="temprature.*valid options: .*temperature"):
        backend.complete(ask(options={"temprature": 0.2}))
    assert openai_server.requests == []


def test_rate_limit_then_success_honours_retry_after(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, sleeps: SleepRecorder
) -> None:
    openai_server.enqueue_error(429, code="rate_limit_exceeded", headers={"Retry-After": "2"})
    openai_server.enqueue_error(429, headers={"retry-after-ms": "1500"})
    openai_server.enqueue_text("finally")

    assert backend.complete(ask()).text == "finally"
    assert sleeps.waits == [2.0, 1.5]
    assert len(openai_server.requests) == 3


def test_server_errors_give_up_after_the_bounded_attempts(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, sleeps: SleepRecorder
) -> None:
    for _ in range(4):
        openai_server.enqueue_error(503, message="boom")

    with pytest.raises(BackendUnavailable, match="gave up after 4 attempts") as caught:
        backend.complete(ask())

    assert caught.value.status_code == 503 and caught.value.backend == "openai"
    assert len(openai_server.requests) == 4
    # exponential backoff with jitter 0.5 around base 1 s: (0.5..1], (1..2], (2..4]
    assert len(sleeps.waits) == 3
    for wait, ceiling in zip(sleeps.waits, [1.0, 2.0, 4.0], strict=True):
        assert ceiling / 2 <= wait <= ceiling


def test_retry_after_beyond_the_limit_stops_at_once(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, sleeps: SleepRecorder
) -> None:
    openai_server.enqueue_error(429, headers={"Retry-After": "3600"})

    with pytest.raises(RateLimited, match="asked to wait 3600 s") as caught:
        backend.complete(ask())

    assert caught.value.retry_after == 3600.0
    assert sleeps.waits == [] and len(openai_server.requests) == 1


def test_connection_refused_is_unavailable_after_retries(
    fast_retry: RetryPolicy, sleeps: SleepRecorder
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        OpenAIBackend(
            model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, retry=fast_retry
        ) as backend,
        pytest.raises(BackendUnavailable, match="gave up after 4 attempts") as caught,
    ):
        backend.complete(ask())

    assert isinstance(caught.value.__cause__, BackendUnavailable)
    assert isinstance(caught.value.__cause__.__cause__, openai.APIConnectionError)
    assert len(sleeps.waits) == 3


@pytest.mark.parametrize(
    ("code", "kind"),
    [("context_length_exceeded", "invalid_request_error"), (None, "exceed_context_size_error")],
    ids=["openai-code", "llama.cpp-type"],
)
def test_context_too_long_is_recognised_by_structured_fields(
    backend: OpenAIBackend,
    openai_server: ScriptedOpenAIServer,
    sleeps: SleepRecorder,
    code: str | None,
    kind: str,
) -> None:
    openai_server.enqueue_error(400, code=code, type=kind, param="messages")

    with pytest.raises(ContextTooLong, match="shorten the conversation") as caught:
        backend.complete(ask())

    assert caught.value.status_code == 400
    assert isinstance(caught.value.__cause__, openai.BadRequestError)
    assert sleeps.waits == [] and len(openai_server.requests) == 1


def test_too_long_wording_without_the_code_is_not_context_too_long(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_error(400, message="maximum context length is 8192 tokens")

    with pytest.raises(BackendError) as caught:
        backend.complete(ask())

    assert type(caught.value) is RequestRejected


@pytest.mark.parametrize(
    ("status", "expected", "attempts"),
    [
        (400, RequestRejected, 1),
        (401, MissingCredentials, 1),
        (403, RequestRejected, 1),
        (404, RequestRejected, 1),
        (409, RequestRejected, 1),
        (422, RequestRejected, 1),
        (418, RequestRejected, 1),
        (500, RequestRejected, 1),
        (408, BackendUnavailable, 4),
        (502, BackendUnavailable, 4),
        (503, BackendUnavailable, 4),
        (504, BackendUnavailable, 4),
    ],
)
def test_status_codes_map_to_error_classes(
    backend: OpenAIBackend,
    openai_server: ScriptedOpenAIServer,
    status: int,
    expected: type[BackendError],
    attempts: int,
) -> None:
    for _ in range(attempts):
        openai_server.enqueue_error(status)

    with pytest.raises(BackendError) as caught:
        backend.complete(ask())

    assert type(caught.value) is expected
    assert caught.value.status_code == status
    assert len(openai_server.requests) == attempts


def test_auth_failure_says_how_to_configure_and_hides_the_key(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_error(401, message=f"Incorrect API key provided: {KEY}")

    with pytest.raises(MissingCredentials) as caught:
        backend.complete(ask())

    message = str(caught.value)
    assert "export OPENAI_API_KEY=" in message and "[REDACTED]" in message
    assert KEY not in message
    assert caught.value.exit_code == 2


def test_an_empty_script_fails_loudly_without_retries(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    with pytest.raises(BackendError, match="no reply queued"):
        backend.complete(ask())
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        ScriptedReply(raw=b"<html>gateway</html>"),
        ScriptedReply(body={"object": "chat.completion", "choices": []}),
        ScriptedReply(body=["not", "an", "object"]),
    ],
    ids=["not-json", "no-choices", "wrong-shape"],
)
def test_unusable_bodies_are_bad_responses(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, reply: ScriptedReply
) -> None:
    openai_server.enqueue(reply)

    with pytest.raises(BadResponse):
        backend.complete(ask())


def test_debug_logging_never_shows_the_key(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.enqueue_text("ok")
    with caplog.at_level(logging.DEBUG, logger="scrollctx"):
        backend.complete(ask(options={"extra_body": {"api_key": KEY}}))

    assert "chat/completions" in caplog.text
    assert KEY not in caplog.text


def test_the_scripted_server_lists_models_through_the_sdk(
    openai_server: ScriptedOpenAIServer,
) -> None:
    with openai.OpenAI(base_url=openai_server.base_url, api_key=KEY, max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["scripted-model"]


def test_reasoning_is_sent_back_only_when_asked(
    openai_server: ScriptedOpenAIServer, fast_retry: RetryPolicy
) -> None:
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "1"})], reasoning="plan A")
    openai_server.enqueue_text("done")
    openai_server.enqueue_text("done again")
    with OpenAIBackend(
        model="m", base_url=openai_server.base_url, api_key=KEY, retry=fast_retry
    ) as backend:
        first = backend.complete(ask(tools=[REPL]))
        history: list[Any] = [
            {"role": "user", "content": "hi"},
            first.to_message(),
            {"role": "tool", "tool_call_id": "call_0", "content": "1"},
        ]
        backend.complete(ChatRequest(messages=history, tools=[REPL]))
        backend.complete(
            ChatRequest(messages=history, tools=[REPL], options={"send_reasoning": True})
        )

    assert "reasoning_content" not in openai_server.requests[1].body["messages"][1]
    assert openai_server.requests[2].body["messages"][1]["reasoning_content"] == "plan A"


def test_the_timeout_option_applies_per_call(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("a")
    openai_server.enqueue_text("b")

    backend.complete(ask())
    backend.complete(ask(options={"timeout": 7.5}))

    timeouts = [r.headers.get("x-stainless-read-timeout") for r in openai_server.requests]
    assert timeouts == ["120.0", "7.5"]
    assert all("timeout" not in r.body for r in openai_server.requests)


def test_an_injected_client_is_used_and_left_open(
    openai_server: ScriptedOpenAIServer, fast_retry: RetryPolicy
) -> None:
    openai_server.enqueue_text("via injected client")
    openai_server.enqueue_text("still open")
    with openai.OpenAI(base_url=openai_server.base_url, api_key=KEY, max_retries=0) as client:
        with OpenAIBackend(model="m", client=client, retry=fast_retry) as backend:
            assert backend.complete(ask()).text == "via injected client"
        assert not client.is_closed()
        assert (
            client.chat.completions.create(model="m", messages=[]).choices[0].message.content
            == "still open"
        )


# -- requests real servers accept (issue 10) ----------------------------------------------

LLAMA_CPP_SCHEMA_ERROR = (
    "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string'}"
)


def test_a_rejected_request_is_shown_in_the_servers_words_and_not_retried(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, sleeps: SleepRecorder
) -> None:
    # What llama-cpp-python's server answers for a request its schema refuses: HTTP 500.
    openai_server.enqueue_error(500, message=LLAMA_CPP_SCHEMA_ERROR, type="internal_server_error")

    with pytest.raises(RequestRejected) as caught:
        backend.complete(ask())

    message = str(caught.value)
    assert message.startswith("the openai server rejected the request: 7 validation errors")
    assert "Input should be a valid string" in message and "HTTP 500" in message
    assert "unavailable" not in message and "gave up" not in message
    assert sleeps.waits == [] and len(openai_server.requests) == 1


def test_each_retry_is_announced_with_its_wait(
    backend: OpenAIBackend,
    openai_server: ScriptedOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    openai_server.enqueue_error(503, message="loading model", headers={"Retry-After": "2"})
    openai_server.enqueue_text("up")

    with caplog.at_level(logging.WARNING, logger="scrollctx.retry"):
        assert backend.complete(ask()).text == "up"

    [record] = caplog.records
    assert "loading model" in record.getMessage()
    assert "retrying in 2.0 s (attempt 2 of 4)" in record.getMessage()


def test_a_reply_cap_is_always_sent(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("a")
    openai_server.enqueue_text("b")

    backend.complete(ask())
    backend.complete(ask(options={"max_tokens": 64}))

    first, second = (r.body for r in openai_server.requests)
    assert first["max_tokens"] == DEFAULT_MAX_TOKENS and "max_completion_tokens" not in first
    assert second["max_tokens"] == 64


def test_the_openai_api_itself_gets_max_completion_tokens() -> None:
    # api.openai.com's reasoning models refuse max_tokens; the request never leaves the machine:
    # the SDK's own transport is replaced by one that records the request and answers.
    seen: list[dict[str, Any]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        reply = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
        return httpx2.Response(200, json=reply)

    client = openai.OpenAI(
        api_key=KEY,
        base_url="https://api.openai.com/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )
    with OpenAIBackend(model="o4-mini", client=client, options={"max_tokens": 99}) as backend:
        backend.complete(ask())
    client.close()

    assert seen[0]["max_completion_tokens"] == 99 and "max_tokens" not in seen[0]


def test_tool_choice_names_a_tool(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer
) -> None:
    named = {"type": "function", "function": {"name": "repl_exec"}}
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "1"})])

    backend.complete(ask(tools=[REPL], options={"tool_choice": named}))

    assert openai_server.requests[0].body["tool_choice"] == named
    with pytest.raises(UsageError, match="tool_choice"):
        backend.complete(ask(tools=[REPL], options={"tool_choice": ["repl_exec"]}))


def test_a_request_past_its_timeout_is_retried_then_reported(
    backend: OpenAIBackend, openai_server: ScriptedOpenAIServer, sleeps: SleepRecorder
) -> None:
    release = threading.Event()

    def hold(_request: RecordedRequest) -> ScriptedReply:
        release.wait(timeout=30)  # the client gives up first; released when the test ends
        return ScriptedOpenAIServer.text_reply("too late")

    openai_server.enqueue(*[hold] * 4)
    try:
        with pytest.raises(BackendUnavailable, match="gave up after 4 attempts"):
            backend.complete(ask(options={"timeout": 0.2}))
    finally:
        release.set()

    assert len(openai_server.requests) == 4 and len(sleeps.waits) == 3
