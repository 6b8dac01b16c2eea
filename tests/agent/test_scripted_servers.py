"""The provider test doubles themselves behave as documented (other tests build on them)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from scrollctx.agent import ChatRequest, resolve_model


def post(url: str, body: Any) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


def test_replies_are_served_in_order_and_requests_recorded(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.enqueue_text("first")
    openai_server.enqueue(ScriptedReply(status=201, raw=b"second"))
    url = f"{openai_server.base_url}/chat/completions"

    status_1, body_1 = post(url, {"n": 1})
    status_2, body_2 = post(url, {"n": 2})
    status_3, body_3 = post(url, {"n": 3})

    assert (status_1, json.loads(body_1)["choices"][0]["message"]["content"]) == (200, "first")
    assert (status_2, body_2) == (201, "second")
    assert status_3 == 418 and "no reply queued" in body_3
    assert [r.body for r in openai_server.requests] == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_unknown_routes_answer_404_without_consuming_a_reply(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.enqueue_text("kept")

    assert post(f"{openai_server.base_url}/embeddings", {})[0] == 404
    assert openai_server.pending == 1 and openai_server.requests == []
    openai_server.reset()


def test_a_responder_answers_from_the_request(openai_server: ScriptedOpenAIServer) -> None:
    def echo_last(request: RecordedRequest) -> ScriptedReply:
        return ScriptedOpenAIServer.text_reply(request.body["messages"][-1]["content"][::-1])

    openai_server.enqueue(echo_last)

    with resolve_model("openai:m", environ=openai_server.environ) as backend:
        answer = backend.complete(ChatRequest(messages=[{"role": "user", "content": "abc"}]))

    assert answer.text == "cba"


def test_a_broken_responder_fails_loudly(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.enqueue(lambda request: 1 / 0)  # type: ignore[arg-type, return-value]

    status, body = post(f"{openai_server.base_url}/chat/completions", {})

    assert status == 418 and "ZeroDivisionError" in body


def test_explicit_sse_chunks_are_served_as_an_event_stream(
    openai_server: ScriptedOpenAIServer,
) -> None:
    chunk = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "hey"}, "finish_reason": "stop"}],
    }
    openai_server.enqueue_stream([chunk])

    with resolve_model("openai:m", environ=openai_server.environ) as backend:
        *_, final = backend.stream(ChatRequest(messages=[{"role": "user", "content": "x"}]))

    assert final.text == "hey"  # type: ignore[union-attr]


@pytest.mark.parametrize("include_usage", [True, False])
def test_completions_are_streamed_when_the_request_asks(
    openai_server: ScriptedOpenAIServer, include_usage: bool
) -> None:
    openai_server.enqueue_text("abcdefghijklmnop", usage=(3, 4))
    body = {"stream": True, "stream_options": {"include_usage": include_usage}}

    status, text = post(f"{openai_server.base_url}/chat/completions", body)

    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert status == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == "abcdefghijklmnop"
    assert any("usage" in c for c in chunks) is include_usage
