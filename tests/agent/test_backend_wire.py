"""The backends' wire-format door (``send``, ``send_stream``, ``models``) against the scripted
servers (test doubles on loopback): bodies go out as given, answers come back as sent, errors
carry the server's status and body."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer, ScriptedReply

from scrollctx.agent import Backend, RetryPolicy
from scrollctx.agent.backends import ChatRequest, Completion
from scrollctx.errors import BackendUnavailable, BadResponse, RateLimited, UsageError

ONCE = RetryPolicy(max_attempts=1)


@pytest.fixture
def openai_wire(openai_server: ScriptedOpenAIServer) -> Iterator[Backend]:
    from scrollctx.agent.backends._openai import OpenAIBackend

    backend = OpenAIBackend(model="m", base_url=openai_server.base_url, api_key="k", retry=ONCE)
    yield backend
    backend.close()


@pytest.fixture
def anthropic_wire(anthropic_server: ScriptedAnthropicServer) -> Iterator[Backend]:
    from scrollctx.agent.backends._anthropic import AnthropicBackend

    backend = AnthropicBackend(
        model="c", base_url=anthropic_server.base_url, api_key="k", retry=ONCE
    )
    yield backend
    backend.close()


def test_openai_send_passes_the_body_through_and_returns_the_answer_as_sent(
    openai_server: ScriptedOpenAIServer, openai_wire: Backend
) -> None:
    openai_server.enqueue_text("hi", reasoning="why ⟦not⟧", usage=(7, 2))
    body = {"messages": [{"role": "user", "content": "x"}], "top_k": 3, "model": "theirs"}
    answer = openai_wire.send(body)
    assert answer["choices"][0]["message"] == {
        "role": "assistant",
        "content": "hi",
        "reasoning_content": "why ⟦not⟧",
    }
    assert answer["usage"]["prompt_tokens"] == 7
    sent = openai_server.requests[0].body
    assert sent == {**body, "max_tokens": 4096}  # only the missing reply cap was added


def test_openai_send_writes_the_body_with_the_callers_encoder_and_shapes_only_what_needs_it(
    openai_server: ScriptedOpenAIServer, openai_wire: Backend
) -> None:
    # A message already in the wire's shape goes as it is (no copy per message per request);
    # one with a null content or a key no server takes is shaped as complete() shapes it.
    encoded: list[bytes] = []

    def encode(body: object) -> bytes:
        encoded.append(json.dumps(body, separators=(",", ":")).encode())
        return encoded[-1]

    openai_server.enqueue_text("ok")
    plain = {"role": "user", "content": "x"}
    calling = {"role": "assistant", "content": None, "reasoning_content": "r",
               "tool_calls": [{"id": "c1", "type": "function",
                               "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
    openai_wire.send({"messages": [plain, calling]}, encode=encode)
    (sent,) = openai_server.requests
    assert json.loads(encoded[0]) == sent.body  # the upstream got our bytes
    assert sent.body["messages"] == [
        plain,
        {"role": "assistant", "content": "", "tool_calls": calling["tool_calls"]},
    ]


def test_openai_send_adds_the_model_only_when_the_body_names_none(
    openai_server: ScriptedOpenAIServer, openai_wire: Backend
) -> None:
    openai_server.enqueue_text("a")
    openai_wire.send({"messages": [], "max_completion_tokens": 9})
    assert openai_server.requests[0].body == {
        "messages": [],
        "max_completion_tokens": 9,
        "model": "m",
    }


def test_openai_send_stream_yields_each_chunk_and_asks_for_usage(
    openai_server: ScriptedOpenAIServer, openai_wire: Backend
) -> None:
    openai_server.enqueue_text("hello there", reasoning="hm", usage=(3, 4))
    chunks = list(openai_wire.send_stream({"messages": [], "stream_options": {"x": 1}}))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "hello there"
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    sent = openai_server.requests[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_openai_wire_errors_carry_the_status_body_and_wait(
    openai_server: ScriptedOpenAIServer, openai_wire: Backend
) -> None:
    openai_server.enqueue_error(429, message="slow down", headers={"Retry-After": "3"})
    with pytest.raises(RateLimited) as caught:
        openai_wire.send({"messages": []})
    assert caught.value.status_code == 429 and caught.value.retry_after == 3.0
    assert json.loads(caught.value.body or "")["error"]["message"] == "slow down"
    openai_server.enqueue_error(503, message="down")
    with pytest.raises(BackendUnavailable) as down:
        list(openai_wire.send_stream({"messages": []}))
    assert down.value.status_code == 503 and "down" in (down.value.body or "")


def test_openai_wire_refuses_an_answer_that_is_not_a_json_object(
    openai_server: ScriptedOpenAIServer, openai_wire: Backend
) -> None:
    openai_server.enqueue(ScriptedReply(raw=b"not json"))
    with pytest.raises(BadResponse, match="invalid JSON"):
        openai_wire.send({"messages": []})
    openai_server.enqueue(ScriptedReply(body=[1, 2]))
    with pytest.raises(BadResponse, match="not a JSON object"):
        openai_wire.send({"messages": []})


def test_openai_models_returns_the_servers_list(openai_wire: Backend) -> None:
    assert openai_wire.models()["data"][0]["id"] == "scripted-model"


def test_anthropic_send_keeps_thinking_blocks_byte_for_byte(
    anthropic_server: ScriptedAnthropicServer, anthropic_wire: Backend
) -> None:
    blocks = [
        {"type": "thinking", "thinking": "step ⟦1⟧\n", "signature": "c2ln+/=="},
        {"type": "text", "text": "yo"},
    ]
    anthropic_server.enqueue_message(blocks)
    answer = anthropic_wire.send({"messages": [{"role": "user", "content": "x"}]})
    assert answer["content"] == blocks
    assert anthropic_server.requests[0].body["max_tokens"] == 4096
    assert anthropic_server.requests[0].body["model"] == "c"


def test_anthropic_send_stream_yields_every_event(
    anthropic_server: ScriptedAnthropicServer, anthropic_wire: Backend
) -> None:
    anthropic_server.enqueue_message(
        [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "yo"}]
    )
    events = list(anthropic_wire.send_stream({"messages": [], "max_tokens": 5}))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    signatures = [e["delta"]["signature"] for e in events if e["type"] == "content_block_delta"
                  and e["delta"]["type"] == "signature_delta"]  # fmt: skip
    assert signatures == ["s"]
    assert anthropic_server.requests[0].body["max_tokens"] == 5


def test_anthropic_wire_errors_carry_the_status_and_body(
    anthropic_server: ScriptedAnthropicServer, anthropic_wire: Backend
) -> None:
    anthropic_server.enqueue_error(529, type="overloaded_error", message="busy")
    with pytest.raises(BackendUnavailable) as caught:
        anthropic_wire.send({"messages": []})
    assert caught.value.status_code == 529
    assert json.loads(caught.value.body or "")["error"]["type"] == "overloaded_error"


class _PlainBackend(Backend):
    name = "plain"

    def complete(self, request: ChatRequest) -> Completion:
        return Completion(text="")


def test_a_backend_without_a_wire_format_says_so() -> None:
    backend = _PlainBackend()
    with pytest.raises(UsageError, match="takes no wire-format requests"):
        backend.send({})
    with pytest.raises(UsageError, match="takes no wire-format requests"):
        list(backend.send_stream({}))
    with pytest.raises(UsageError, match="takes no wire-format requests"):
        backend.models()
    with pytest.raises(UsageError, match="takes no wire-format requests"):
        backend.read_answer({})
    with pytest.raises(UsageError, match="takes no wire-format requests"):
        backend.stream_builder()


def test_openai_stream_builder_assembles_the_answer_a_plain_request_gets(
    openai_server: ScriptedOpenAIServer, openai_wire: Backend
) -> None:
    calls = [("lookup", '{"id": 7}'), ("other", "not json")]
    for _ in range(2):
        openai_server.enqueue_tool_calls(calls, reasoning="let me ⟦see⟧", usage=(9, 3))
    plain = openai_wire.send({"messages": []})
    builder = openai_wire.stream_builder()
    for chunk in openai_wire.send_stream({"messages": []}):
        builder.add(chunk)
    assembled = builder.answer()
    assert assembled["choices"][0]["message"] == {
        **plain["choices"][0]["message"],
        "content": None,
    }
    assert assembled["usage"] == plain["usage"]
    completion = openai_wire.read_answer(assembled)
    assert [c.name for c in completion.tool_calls] == ["lookup", "other"]
    assert completion.tool_calls[1].arguments_error is not None
    assert completion.reasoning == "let me ⟦see⟧"


def test_anthropic_stream_builder_assembles_the_answer_a_plain_request_gets(
    anthropic_server: ScriptedAnthropicServer, anthropic_wire: Backend
) -> None:
    blocks = [
        {"type": "thinking", "thinking": "hm", "signature": "c2ln"},
        {"type": "text", "text": "calling"},
        {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"id": 7}},
    ]
    for _ in range(2):
        anthropic_server.enqueue_message(blocks, stop_reason="tool_use")
    plain = anthropic_wire.send({"messages": []})
    builder = anthropic_wire.stream_builder()
    for event in anthropic_wire.send_stream({"messages": []}):
        builder.add(event)
    assembled = builder.answer()
    assert assembled["content"] == plain["content"]
    assert assembled["stop_reason"] == "tool_use"
    assert anthropic_wire.read_answer(assembled).tool_calls[0].arguments == {"id": 7}
