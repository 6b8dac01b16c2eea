"""The Anthropic backend: request conversion, and real HTTP through the real SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from scripted_servers import ScriptedAnthropicServer, ScriptedReply, SleepRecorder

from needs import import_or_missing
from scrollctx.agent import ChatRequest, Completion, Delta, Message, RetryPolicy, ToolSpec
from scrollctx.agent.backends._anthropic import (
    OPENING_USER_TEXT,
    AnthropicBackend,
    to_anthropic_messages,
)
from scrollctx.errors import (
    BackendError,
    BackendUnavailable,
    ContextTooLong,
    MissingCredentials,
    MissingDependency,
    RateLimited,
    RequestRejected,
    UsageError,
)

KEY = "sk-ant-test-0123456789abcdef"
REPL = ToolSpec("repl_exec", "Run a Python cell.", {"type": "object", "properties": {"source": {}}})
THINKING = {
    "type": "thinking",
    "thinking": "The user wants 1+1.\n  Compute it in the kernel. ",
    "signature": "EqQBCkYIARgCIkB+/sig==",
}
REDACTED_THINKING = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}


def call(call_id: str, source: str) -> dict[str, Any]:
    arguments = json.dumps({"source": source})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "repl_exec", "arguments": arguments},
    }


def convert(*messages: dict[str, Any], system: str = "") -> tuple[str, list[dict[str, Any]]]:
    request = ChatRequest(messages=[Message(**m) for m in messages], system=system)  # type: ignore[typeddict-item]
    return to_anthropic_messages(request)


@pytest.fixture
def backend(
    anthropic_server: ScriptedAnthropicServer, fast_retry: RetryPolicy
) -> Iterator[AnthropicBackend]:
    import_or_missing("anthropic")
    with AnthropicBackend(
        model="claude-test", base_url=anthropic_server.base_url, api_key=KEY, retry=fast_retry
    ) as built:
        yield built


# -- conversion ------------------------------------------------------------------------------


def test_system_text_is_separated_from_the_messages() -> None:
    system, turns = convert(
        {"role": "system", "content": "Also: be brief."},
        {"role": "user", "content": "hi"},
        system="You are Scroll.",
    )

    assert system == "You are Scroll.\n\nAlso: be brief."
    assert turns == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_tool_calls_and_results_become_paired_blocks() -> None:
    _, turns = convert(
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": "Let me run two cells.",
            "tool_calls": [call("a", "1"), call("b", "2")],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "user", "content": "and now?"},
    )

    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "text", "text": "Let me run two cells."},
        {"type": "tool_use", "id": "a", "name": "repl_exec", "input": {"source": "1"}},
        {"type": "tool_use", "id": "b", "name": "repl_exec", "input": {"source": "2"}},
    ]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "1"},
        {"type": "tool_result", "tool_use_id": "b", "content": "2"},
        {"type": "text", "text": "and now?"},
    ]


def test_thinking_blocks_lead_their_assistant_turn_unchanged() -> None:
    _, turns = convert(
        {"role": "user", "content": "1+1?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("a", "1+1")],
            "reasoning": [THINKING, REDACTED_THINKING, {"type": "reasoning_content", "text": "x"}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "2"},
    )

    assert turns[1]["content"][:2] == [THINKING, REDACTED_THINKING]
    assert [b["type"] for b in turns[1]["content"]] == ["thinking", "redacted_thinking", "tool_use"]


def test_the_first_turn_is_always_a_user_turn() -> None:
    _, turns = convert(
        {"role": "assistant", "content": "Where were we?"}, {"role": "user", "content": "go on"}
    )

    assert turns[0] == {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]}
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]


def test_consecutive_same_role_messages_merge_and_empty_text_is_dropped() -> None:
    _, turns = convert(
        {"role": "user", "content": "one"},
        {"role": "user", "content": ""},
        {"role": "user", "content": "two"},
    )

    assert turns == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]


def test_unparseable_tool_arguments_travel_visibly() -> None:
    broken = {
        "id": "a",
        "type": "function",
        "function": {"name": "repl_exec", "arguments": "{oops"},
    }
    _, turns = convert(
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [broken]},
        {"role": "tool", "tool_call_id": "a", "content": "error"},
    )

    assert turns[1]["content"][0]["input"] == {"raw_arguments": "{oops"}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [call("a", "1")]},
            ],
            "tool call 'a' has no tool result",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [call("a", "1")]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "zzz", "content": "?"},
            ],
            "tool result for 'zzz' does not follow",
        ),
        ([{"role": "tool", "tool_call_id": "a", "content": "?"}], "tool result for 'a'"),
        ([{"role": "tool", "content": "?"}], "no tool_call_id"),
        ([{"role": "robot", "content": "?"}], "role 'robot'"),
    ],
    ids=["unanswered-call", "stray-result", "result-first", "result-without-id", "bad-role"],
)
def test_broken_pairing_is_refused_before_sending(
    messages: list[dict[str, Any]], problem: str
) -> None:
    with pytest.raises(UsageError, match=problem):
        convert(*messages)


# -- over HTTP -------------------------------------------------------------------------------


def test_text_tool_use_thinking_and_usage_through_the_sdk(
    backend: AnthropicBackend, anthropic_server: ScriptedAnthropicServer
) -> None:
    anthropic_server.enqueue_message(
        [
            THINKING,
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": "toolu_1", "name": "repl_exec", "input": {"source": "1+1"}},
        ],
        stop_reason="tool_use",
        usage=(30, 12),
    )

    answer = backend.complete(
        ChatRequest(
            messages=[{"role": "user", "content": "1+1?"}], system="Be exact.", tools=[REPL]
        )
    )

    assert answer.text == "Running it."
    assert answer.reasoning == THINKING["thinking"]
    assert answer.reasoning_blocks == (THINKING,)
    [tool_call] = answer.tool_calls
    assert (tool_call.id, tool_call.name, tool_call.arguments) == (
        "toolu_1",
        "repl_exec",
        {"source": "1+1"},
    )
    assert (answer.finish_reason, answer.model) == ("tool_use", "claude-scripted")
    assert answer.usage is not None and (
        answer.usage.prompt_tokens,
        answer.usage.completion_tokens,
    ) == (30, 12)
    [request] = anthropic_server.requests
    # the SDK sends the key as x-api-key or as a bearer token, depending on its release
    sent_key = request.headers.get("x-api-key") or request.headers["authorization"][7:]
    assert sent_key == KEY
    assert request.body["system"] == "Be exact."
    assert request.body["tools"] == [
        {
            "name": "repl_exec",
            "description": "Run a Python cell.",
            "input_schema": dict(REPL.parameters),
        }
    ]
    assert request.body["max_tokens"] == 4096


def test_thinking_round_trips_byte_for_byte(
    backend: AnthropicBackend, anthropic_server: ScriptedAnthropicServer
) -> None:
    anthropic_server.enqueue_message(
        [
            THINKING,
            REDACTED_THINKING,
            {"type": "tool_use", "id": "t1", "name": "repl_exec", "input": {}},
        ],
        stop_reason="tool_use",
    )
    first = backend.complete(
        ChatRequest(messages=[{"role": "user", "content": "go"}], tools=[REPL])
    )
    anthropic_server.enqueue_text("done")

    backend.complete(
        ChatRequest(
            messages=[
                {"role": "user", "content": "go"},
                first.to_message(),
                {"role": "tool", "tool_call_id": "t1", "content": "ok"},
            ],
            tools=[REPL],
            options={"thinking_budget": 2048},
        )
    )

    second = anthropic_server.requests[1].body
    assert second["messages"][1]["content"][:2] == [THINKING, REDACTED_THINKING]
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_cached_prompt_tokens_count_as_prompt_tokens(
    backend: AnthropicBackend, anthropic_server: ScriptedAnthropicServer
) -> None:
    body = anthropic_server.message_body([{"type": "text", "text": "hi"}])
    body["usage"] |= {"cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
    anthropic_server.enqueue(ScriptedReply(body=body))

    usage = backend.complete(ChatRequest(messages=[{"role": "user", "content": "x"}])).usage

    assert usage is not None and usage.prompt_tokens == 115


@pytest.mark.parametrize(
    ("status", "details", "expected", "attempts"),
    [
        (
            400,
            {"type": "invalid_request_error", "error_code": "prompt_too_long"},
            ContextTooLong,
            1,
        ),
        (413, {"type": "request_too_large"}, ContextTooLong, 1),
        (400, {"type": "invalid_request_error"}, RequestRejected, 1),
        (401, {"type": "authentication_error"}, MissingCredentials, 1),
        (403, {"type": "permission_error"}, RequestRejected, 1),
        (529, {"type": "overloaded_error"}, BackendUnavailable, 4),
        (500, {"type": "api_error"}, BackendUnavailable, 4),
        (429, {"type": "rate_limit_error"}, RateLimited, 4),
        (503, {"type": "api_error", "error_code": "storage_not_ready"}, BackendUnavailable, 4),
        (
            429,
            {"type": "rate_limit_error", "error_code": "contract_spend_limit_reached"},
            RequestRejected,
            1,
        ),
    ],
)
def test_errors_map_by_type_and_retry_only_transient_ones(
    backend: AnthropicBackend,
    anthropic_server: ScriptedAnthropicServer,
    sleeps: SleepRecorder,
    status: int,
    details: dict[str, str],
    expected: type[BackendError],
    attempts: int,
) -> None:
    for _ in range(attempts):
        anthropic_server.enqueue_error(status, **details)

    with pytest.raises(BackendError) as caught:
        backend.complete(ChatRequest(messages=[{"role": "user", "content": "x"}]))

    assert type(caught.value) is expected
    assert caught.value.status_code == status
    assert len(anthropic_server.requests) == attempts and len(sleeps.waits) == attempts - 1


def test_overloaded_then_success_honours_retry_after(
    backend: AnthropicBackend, anthropic_server: ScriptedAnthropicServer, sleeps: SleepRecorder
) -> None:
    anthropic_server.enqueue_error(529, type="overloaded_error", headers={"retry-after": "3"})
    anthropic_server.enqueue_text("back")

    assert backend.complete(ChatRequest(messages=[{"role": "user", "content": "x"}])).text == "back"
    assert sleeps.waits == [3.0]


def test_missing_sdk_names_the_extra(tmp_path: Any) -> None:
    code = (
        "import sys; sys.modules['anthropic'] = None\n"
        "from scrollctx.agent.backends import resolve_model\n"
        "from scrollctx.errors import MissingDependency\n"
        "try:\n"
        "    resolve_model('anthropic:claude-x', environ={'ANTHROPIC_API_KEY': 'k'})\n"
        "except MissingDependency as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "anthropic is not installed; install it with: pip install 'scrollctx[anthropic]'"
    )
    assert MissingDependency("anthropic", "anthropic").exit_code == 2


def test_streaming_reassembles_text_thinking_and_tool_input_exactly(
    backend: AnthropicBackend, anthropic_server: ScriptedAnthropicServer
) -> None:
    blocks = [
        THINKING,
        REDACTED_THINKING,
        {"type": "text", "text": "I will compute it in the kernel now."},
        {"type": "tool_use", "id": "t9", "name": "repl_exec", "input": {"source": "print(1 + 1)"}},
    ]
    anthropic_server.enqueue_message(blocks, stop_reason="tool_use", usage=(40, 17))
    request = ChatRequest(messages=[{"role": "user", "content": "go"}], tools=[REPL])

    *deltas, final = backend.stream(request)

    assert "".join(d.text for d in deltas if isinstance(d, Delta)) == blocks[2]["text"]
    assert "".join(d.reasoning for d in deltas if isinstance(d, Delta)) == THINKING["thinking"]
    assert isinstance(final, Completion)
    assert final.reasoning_blocks == (THINKING, REDACTED_THINKING)
    assert final.text == blocks[2]["text"]
    [tool_call] = final.tool_calls
    assert (tool_call.id, tool_call.arguments) == ("t9", {"source": "print(1 + 1)"})
    assert final.finish_reason == "tool_use"
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (40, 17)
    assert anthropic_server.requests[0].body["stream"] is True


def test_a_failure_opening_a_stream_is_retried(
    backend: AnthropicBackend, anthropic_server: ScriptedAnthropicServer, sleeps: SleepRecorder
) -> None:
    anthropic_server.enqueue_error(529, type="overloaded_error", headers={"retry-after": "1"})
    anthropic_server.enqueue_text("streamed")

    final = list(backend.stream(ChatRequest(messages=[{"role": "user", "content": "x"}])))[-1]

    assert isinstance(final, Completion) and final.text == "streamed"
    assert sleeps.waits == [1.0]


def test_required_tool_choice_is_spelled_any(
    backend: AnthropicBackend, anthropic_server: ScriptedAnthropicServer
) -> None:
    anthropic_server.enqueue_text("ok")

    backend.complete(
        ChatRequest(
            messages=[{"role": "user", "content": "x"}],
            tools=[REPL],
            options={"tool_choice": "required"},
        )
    )

    assert anthropic_server.requests[0].body["tool_choice"] == {"type": "any"}
