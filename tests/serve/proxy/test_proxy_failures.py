"""Failure is visible and loses nothing: upstream errors relayed, timeouts and outages said,
a full disk a 503, a client leaving mid-stream stops the upstream call, tokens enforced."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from proxy_helpers import ProxyServer, upstream_backend
from scripted_servers import (
    RecordedRequest,
    ScriptedAnthropicServer,
    ScriptedOpenAIServer,
    ScriptedReply,
    _stream_events,
)

from damage import fill_disk

QUESTION = [{"role": "user", "content": "Are you there?"}]


def _user_turns(proxy: ProxyServer) -> list[str]:
    return [e.content for s in proxy.proxy.conversations.sessions()
            for e in proxy.events(s.session_id) if e.kind == "user_message"]  # fmt: skip


def test_a_429_reaches_the_client_with_its_wait_and_a_retry_continues(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    openai_server.enqueue_error(429, message="slow down, please", headers={"Retry-After": "7"})
    client = openai_proxy.openai()
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="m", messages=QUESTION)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["message"] == "slow down, please"  # type: ignore[index]
    assert _user_turns(openai_proxy) == ["Are you there?"]  # logged before upstream was called
    openai_server.enqueue_text("Yes.")
    assert client.chat.completions.create(model="m", messages=QUESTION).choices
    assert _user_turns(openai_proxy) == ["Are you there?"]  # the retry added no copy


def test_an_upstream_500_is_relayed_with_its_body(
    anthropic_server: ScriptedAnthropicServer, anthropic_proxy: ProxyServer
) -> None:
    anthropic_server.enqueue_error(500, type="api_error", message="the model fell over")
    client = anthropic_proxy.anthropic()
    with pytest.raises(anthropic_error("InternalServerError")) as caught:
        client.messages.create(model="c", max_tokens=10, messages=QUESTION)
    assert caught.value.status_code == 500
    assert "the model fell over" in str(caught.value)


def anthropic_error(name: str) -> Any:
    import anthropic

    return getattr(anthropic, name)


def test_an_upstream_that_does_not_answer_in_time_is_a_502(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    proxy = start_proxy(openai_server, backend_options={"timeout": 0.5})
    released = threading.Event()

    def never(request: RecordedRequest) -> ScriptedReply:
        released.wait(30)  # the upstream hangs until the test is done with it
        return ScriptedOpenAIServer.text_reply("too late")

    openai_server.enqueue(never)
    try:
        response = httpx2.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                               json={"model": "m", "messages": QUESTION})  # fmt: skip
    finally:
        released.set()
    assert response.status_code == 502
    assert "unavailable" in response.json()["error"]["message"]
    assert _user_turns(proxy) == ["Are you there?"]


def test_an_upstream_that_is_down_is_a_502_naming_it(
    start_proxy: Any, openai_server: ScriptedOpenAIServer
) -> None:
    class Gone:
        base_url = "http://127.0.0.1:9/v1"  # the discard port: nothing listens

    proxy = start_proxy(openai_server)
    proxy.proxy.door.backend = upstream_backend("openai", Gone())
    proxy.proxy.door.loop.backend = proxy.proxy.door.backend
    response = httpx2.post(f"{proxy.url}/v1/chat/completions",
                           json={"model": "m", "messages": QUESTION})  # fmt: skip
    assert response.status_code == 502
    assert "APIConnectionError" in response.json()["error"]["message"]


def test_a_stream_that_fails_to_open_gets_a_real_status(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    openai_server.enqueue_error(503, message="overloaded")
    with pytest.raises(openai.InternalServerError) as caught:
        openai_proxy.openai().chat.completions.create(model="m", messages=QUESTION, stream=True)
    assert caught.value.status_code == 503


def test_an_error_mid_stream_reaches_the_client_as_an_error_event(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    body = ScriptedOpenAIServer.completion_body(text="Partial answer that", usage=None)
    events = _stream_events(body, False)[:3]
    events.append((None, {"error": {"message": "the upstream lost its GPU", "type": "x"}}))
    openai_server.enqueue(ScriptedReply(sse=events))
    stream = openai_proxy.openai().chat.completions.create(model="m", messages=QUESTION,
                                                           stream=True)  # fmt: skip
    with pytest.raises(openai.APIError, match="lost its GPU"):
        for _ in stream:
            pass


def test_a_client_leaving_mid_stream_stops_the_upstream_call_and_keeps_the_log(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    body = ScriptedOpenAIServer.completion_body(text="A long answer " * 20, usage=None)
    held = threading.Event()
    openai_server.enqueue(ScriptedReply(sse=_stream_events(body, False), hold=(4, held)))
    client = httpx2.Client(timeout=30)
    try:
        with client.stream(
            "POST",
            f"{openai_proxy.url}/v1/chat/completions",
            json={"model": "m", "messages": QUESTION, "stream": True},
        ) as response:
            session = response.headers["x-scroll-session"]
            next(response.iter_lines())  # the answer has begun; the client walks away
        conversation = openai_proxy.proxy.conversations.get(session)
        assert conversation is not None
        deadline = time.monotonic() + 10
        while conversation.lock.locked():  # the request ends although the upstream still holds
            assert time.monotonic() < deadline, "the proxy kept waiting for the upstream"
            time.sleep(0.01)
        assert not held.is_set()
    finally:
        held.set()
        client.close()
    kinds = [e.kind for e in openai_proxy.events(session)]
    assert kinds == ["system", "user_message"]  # the request stays; no half answer is logged
    openai_server.enqueue_text("Yes, here.")
    retry = openai_proxy.openai().chat.completions.with_raw_response.create(
        model="m", messages=QUESTION
    )
    assert retry.headers["x-scroll-session"] == session  # the retry picks up where it was


def test_a_full_disk_is_a_503_and_nothing_is_sent_upstream(
    openai_server: ScriptedOpenAIServer, start_proxy: Any, small_disk: Path
) -> None:
    proxy = start_proxy(openai_server, store=small_disk / "store")
    openai_server.enqueue_text("First.")
    client = proxy.openai()
    assert client.chat.completions.create(model="m", messages=QUESTION).choices
    filler = fill_disk(small_disk)
    history = [*QUESTION, {"role": "assistant", "content": "First."},
               {"role": "user", "content": "x" * 200_000}]  # fmt: skip
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="m", messages=history)
    assert caught.value.status_code == 503
    assert "full" in json.dumps(caught.value.body)
    assert len(openai_server.requests) == 1
    filler.unlink()
    assert _user_turns(proxy) == ["Are you there?"]  # what was written before is all there


def test_with_a_token_every_request_must_carry_it(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    token = "t0ken-for-the-proxy-tests-9d2e"
    proxy = start_proxy(openai_server, token=token)
    for headers in ({}, {"Authorization": "Bearer wrong-token-of-length"}, {"x-api-key": "x"}):
        response = httpx2.post(f"{proxy.url}/v1/chat/completions", headers=headers,
                               json={"model": "m", "messages": QUESTION})  # fmt: skip
        assert response.status_code == 401
    openai_server.enqueue_text("Hello.")
    assert proxy.openai(api_key=token).chat.completions.create(model="m", messages=QUESTION)
    anthropic_server_free = httpx2.get(f"{proxy.url}/v1/models", headers={"x-api-key": token})
    assert anthropic_server_free.status_code == 200


def test_without_a_token_a_request_naming_another_host_is_refused(
    openai_server: ScriptedOpenAIServer, openai_proxy: Any
) -> None:
    # DNS rebinding: a web page at attacker.example, its name pointed at 127.0.0.1, sends its
    # own Host; refused before the door, so nothing is logged and the upstream is never called.
    for host in ("attacker.example", "attacker.example:8787", "10.0.0.1"):
        response = httpx2.post(f"{openai_proxy.url}/v1/chat/completions", headers={"Host": host},
                               json={"model": "m", "messages": QUESTION})  # fmt: skip
        assert response.status_code == 421, host
    assert openai_server.requests == []
    assert _user_turns(openai_proxy) == []
    openai_server.enqueue_text("Hello.")
    assert openai_proxy.openai().chat.completions.create(model="m", messages=QUESTION)


def test_without_a_token_every_spelling_of_a_loopback_host_is_answered(openai_proxy: Any) -> None:
    # Host names are case-insensitive and a port may be left out (the scheme's default): a
    # client naming this machine in any of the ways HTTP allows is not mistaken for a rebinding.
    port = openai_proxy.url.rsplit(":", 1)[1]
    for host in ("[::1]", f"[::1]:{port}", f"LOCALHOST:{port}", "localhost", "127.0.0.1"):
        response = httpx2.get(f"{openai_proxy.url}/v1/models", headers={"Host": host})
        assert response.status_code == 200, host
    for host in ("[::1", "[::1]x", f"127.0.0.1:{port}x", "x@localhost", "::1"):
        response = httpx2.get(f"{openai_proxy.url}/v1/models", headers={"Host": host})
        assert response.status_code in (400, 421), host
