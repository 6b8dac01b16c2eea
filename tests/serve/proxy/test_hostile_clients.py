"""Hostile clients of ``scroll serve`` (the audit's attacks): a web page in the user's browser,
bodies no SDK sends, and a conversation of many messages at once. Each is refused with a
clear status before anything is logged or the upstream is called, and the proxy serves the
next request."""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any

import httpx2
import pytest
from proxy_helpers import ProxyServer, body_begun, openai_text, prompt_tokens, read_answer
from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer

from scrollctx.serve.proxy import RECALL_TOOL, ViewSettings
from scrollctx.serve.proxy._door import Cancellation, Disconnected, Reply

QUESTION = [{"role": "user", "content": "Are you there?"}]


def _post(proxy: ProxyServer, path: str, **sent: Any) -> httpx2.Response:
    return httpx2.post(f"{proxy.url}{path}", timeout=60, **sent)


def test_a_web_page_of_another_site_cannot_make_the_browser_call_the_proxy(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    # A page may POST text/plain to 127.0.0.1 with no CORS preflight; its Host is then a
    # loopback name, only its Origin tells. Such a request was logged and went upstream.
    body = json.dumps({"model": "m", "messages": QUESTION})
    for origin in ("http://attacker.example", "null", "http://[bad"):
        response = _post(openai_proxy, "/v1/chat/completions", content=body,
                         headers={"Origin": origin, "Content-Type": "text/plain"})  # fmt: skip
        assert response.status_code == 403, origin
    assert openai_server.requests == []
    assert openai_proxy.log.count() == 0
    openai_server.enqueue_text("Hello.")  # a page this machine serves (a local tool) may call
    local = _post(openai_proxy, "/v1/chat/completions", content=body,
                  headers={"Origin": "http://localhost:5173"})  # fmt: skip
    assert local.status_code == 200


OPENAI_BODIES = [
    ([{"role": "user", "content": [5]}], "list of part objects"),
    ([{"role": "user", "content": "a"},
      {"role": "assistant", "content": None, "tool_calls": [{"id": 5, "function": "f"}]}],
     "`tool_calls` must be a list"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": "call it"}],
     "`tool_calls` must be a list"),
    ([{"role": 5, "content": "a"}], "has role 5"),
]  # fmt: skip
ANTHROPIC_BODIES = [
    ([{"role": "user", "content": 5}], "`content` must be a string or a list of blocks"),
    ([{"role": "user", "content": [5]}], "`content` must be a string or a list of blocks"),
]


@pytest.mark.parametrize("messages,said", OPENAI_BODIES)
def test_malformed_openai_messages_are_400_not_500(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer, messages: Any, said: str
) -> None:
    # Each message is digested before it is checked: a digest that assumed a valid shape
    # raised (AttributeError, TypeError), and the client got 500 with a traceback in the log.
    response = _post(openai_proxy, "/v1/chat/completions",
                     json={"model": "m", "messages": messages})  # fmt: skip
    assert response.status_code == 400, response.text
    assert said in response.json()["error"]["message"]
    assert openai_proxy.log.count() <= 1  # at most the conversation's start event
    assert openai_server.requests == []


@pytest.mark.parametrize("messages,said", ANTHROPIC_BODIES)
def test_malformed_anthropic_messages_are_400_not_500(
    anthropic_server: ScriptedAnthropicServer,
    anthropic_proxy: ProxyServer,
    messages: Any,
    said: str,
) -> None:
    response = _post(anthropic_proxy, "/v1/messages",
                     json={"model": "m", "max_tokens": 9, "messages": messages})  # fmt: skip
    assert response.status_code == 400, response.text
    assert said in response.json()["error"]["message"]
    assert anthropic_proxy.log.count() <= 1
    assert anthropic_server.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_a_body_nested_deeper_than_the_decoder_takes_is_a_400(
    openai_proxy: ProxyServer, stream: bool
) -> None:
    deep = b'{"stream": %s, "messages": ' % json.dumps(stream).encode()
    deep += b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = _post(openai_proxy, "/v1/chat/completions", content=deep)
    assert response.status_code == 400  # was 500: the decoder's RecursionError
    assert "nested too deeply" in response.json()["error"]["message"]


def test_a_request_of_too_many_messages_is_refused_before_any_is_digested(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    # A million tiny messages (40 MB, under the body limit) held the proxy for hours and
    # gigabytes: each is digested, checked and logged before the upstream is called.
    many = [{"role": "user", "content": "x"}] * 100_001
    response = _post(openai_proxy, "/v1/chat/completions", json={"model": "m", "messages": many})
    assert response.status_code == 400
    assert "takes at most 100,000 in one request" in response.json()["error"]["message"]
    assert openai_proxy.log.count() == 0 and openai_server.requests == []


def test_a_first_request_many_times_the_window_is_evicted_as_it_is_added(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    # 600 messages in one request, 12 times the window: evicted in one span, they became one
    # index block of 300 lines, itself larger than the window ("does not fit", a 400). Added
    # and evicted as they come, they roll up as a conversation sent turn by turn would.
    history: list[dict[str, Any]] = []
    for turn in range(300):
        history += [{"role": "user", "content": f"note {turn}: the river ran slow past the mill"},
                    {"role": "assistant", "content": f"Noted {turn}."}]  # fmt: skip
    history.append({"role": "user", "content": "What was the first note?"})
    openai_server.enqueue(openai_text("The river."))
    response = _post(openai_proxy, "/v1/chat/completions", json={"model": "m", "messages": history})
    assert response.status_code == 200, response.text
    (upstream,) = openai_server.requests
    assert prompt_tokens(upstream) <= 3_000
    assert upstream.body["messages"][-1]["content"].startswith("What was the first note?")
    session = response.headers["x-scroll-session"]
    logged = [e for e in openai_proxy.events(session) if e.kind in ("user_message", "model_turn")]
    assert len(logged) == len(history) + 1  # every message, and the reply


def test_a_body_past_the_bound_is_a_413_saying_so_and_nothing_of_it_is_logged(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    # Declared too large (Content-Length): refused before a byte is read, so a client that
    # declares 10 GB and sends none of it is answered at once. Sent chunked (no length):
    # refused once what was read passes the bound, the rest never held.
    proxy = start_proxy(openai_server, max_body=64 * 1024)
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as declared:
        declared.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n"
        )
        assert declared.recv(4096).startswith(b"HTTP/1.1 413 ")
    big = json.dumps({"model": "m", "messages": QUESTION * 5_000}).encode()  # 220 KB

    def pieces() -> Any:
        for at in range(0, len(big), 16 * 1024):
            yield big[at : at + 16 * 1024]

    for sent in (big, pieces()):
        response = _post(proxy, "/v1/chat/completions", content=sent,
                         headers={"Content-Type": "application/json"})  # fmt: skip
        assert response.status_code == 413
        message = response.json()["error"]["message"]
        assert "exceeds 65,536 bytes" in message and "--max-body-mb" in message
    assert proxy.log.count() == 0 and openai_server.requests == []
    openai_server.enqueue_text("Here.")
    assert _post(proxy, "/v1/chat/completions",
                 json={"model": "m", "messages": QUESTION}).status_code == 200  # fmt: skip


def test_a_request_past_the_limit_of_requests_at_once_is_a_503_with_retry_after(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    import threading

    proxy = start_proxy(openai_server, max_requests=1)
    upstream_has_it, release = threading.Event(), threading.Event()

    def slow(request: Any) -> Any:
        upstream_has_it.set()
        release.wait(timeout=30)
        return ScriptedOpenAIServer.text_reply("At last.")

    openai_server.enqueue(slow)
    first: list[httpx2.Response] = []
    asking = threading.Thread(target=lambda: first.append(_post(
        proxy, "/v1/chat/completions", json={"model": "m", "messages": QUESTION})))  # fmt: skip
    asking.start()
    assert upstream_has_it.wait(timeout=30)
    other = [{"role": "user", "content": "Me too?"}]
    refused = _post(proxy, "/v1/chat/completions", json={"model": "m", "messages": other})
    release.set()
    asking.join(timeout=30)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "answering 1 requests already (--max-requests)" in refused.json()["error"]["message"]
    assert first[0].status_code == 200
    assert "Me too?" not in [e.content for e in proxy.log.events_after(0, 100)]
    openai_server.enqueue_text("Now.")
    again = _post(proxy, "/v1/chat/completions", json={"model": "m", "messages": other})
    assert again.status_code == 200


def test_a_body_begun_and_never_finished_gets_a_408_and_frees_its_slot(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    # A request holds its slot while its body arrives: 32 bodies begun and never finished kept
    # every other client at 503 for as long as their sockets stayed open.
    proxy = start_proxy(openai_server, max_requests=1, body_seconds=0.5)
    with body_begun(proxy.url) as stalled:
        answer = read_answer(stalled)  # the proxy's answer, once it stops waiting for the rest
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout", answer
    assert b"did not arrive within 0.5 s" in rest
    assert proxy.log.count() == 0 and openai_server.requests == []
    openai_server.enqueue_text("Here.")
    served = _post(proxy, "/v1/chat/completions", json={"model": "m", "messages": QUESTION})
    assert served.status_code == 200  # the slot (max_requests=1) is free again


@pytest.mark.parametrize(
    "arguments", ["[" * 1_500 + "]" * 1_500, "1" * 5_000], ids=["too-deep", "integer-too-long"]
)
def test_tool_call_arguments_json_cannot_decode_are_passed_on_as_text(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer, arguments: str
) -> None:
    # The conversation's fingerprint decodes each call's arguments: nesting past the decoder's
    # stack, or an integer over 4,300 digits, raised out of it and the client got a 500.
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [*QUESTION, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
                {"role": "user", "content": "Again?"}]  # fmt: skip
    openai_server.enqueue_text("Here.")
    response = _post(
        openai_proxy, "/v1/chat/completions", json={"model": "m", "messages": messages}
    )
    assert response.status_code == 200, response.text
    sent = openai_server.requests[0].body["messages"]
    assert [m.get("tool_calls") for m in sent if m["role"] == "assistant"] == [[call]]


def test_a_client_gone_before_its_body_arrived_frees_its_slot_and_logs_no_traceback(
    openai_server: ScriptedOpenAIServer, start_proxy: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Starlette raises ClientDisconnect out of the body's stream: uvicorn wrote "Exception in
    # ASGI application" and a whole traceback to the server's stderr for every such client.
    proxy = start_proxy(openai_server, max_requests=1)
    logging.getLogger("uvicorn.error").addHandler(caplog.handler)  # uvicorn's own log
    with body_begun(proxy.url):
        assert _until(proxy, lambda status: status == 503)  # the proxy is reading the body
    assert _until(proxy, lambda status: status == 200)  # its request ended, its slot is free
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert proxy.log.count() == 0 and openai_server.requests == []


def _until(proxy: ProxyServer, wanted: Any, seconds: float = 10) -> bool:
    """Whether ``GET /v1/models`` answers a status ``wanted`` accepts within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if wanted(httpx2.get(f"{proxy.url}/v1/models").status_code):
            return True
    return False


def test_a_streamed_request_refused_at_once_ends_its_worker_quietly(
    openai_proxy: ProxyServer,
) -> None:
    # The app answers a refusal and stops reading; the worker then pushed one more item,
    # which raised Disconnected out of its thread: a traceback on stderr for every such request.
    got: list[Any] = []

    def push(item: Any) -> None:
        if got:  # what the app's push does once it stopped reading
            raise Disconnected
        got.append(item)

    door = openai_proxy.proxy.door_for("openai")
    door.stream({"model": "m", "stream": True, "messages": "hi"}, {}, push, Cancellation())
    assert isinstance(got[0], Reply) and got[0].status == 400


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_during_a_recall_cell_costs_no_further_upstream_call(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer, stream: bool
) -> None:
    # Nothing was sent to the client yet (recall runs before the first event), so its going
    # away went unseen: the cell ended, then the next upstream call was made and paid for.
    openai_server.enqueue_tool_calls(
        [(RECALL_TOOL, {"source": "import time\ntime.sleep(6)\nprint('slept')"})]
    )
    body = {"model": "m", "messages": QUESTION, "stream": stream}
    with pytest.raises(httpx2.ReadTimeout):  # the client gives up while the cell sleeps
        with httpx2.stream("POST", f"{openai_proxy.url}/v1/chat/completions", json=body,
                           timeout=httpx2.Timeout(60, read=2)) as response:  # fmt: skip
            response.read()
    (conversation,) = openai_proxy.proxy.conversations.sessions()
    events = openai_proxy.events(conversation.session_id)  # once the request is settled
    assert [e.content for e in events if e.kind == "tool_result"] == ["stdout:\nslept"]
    assert len(openai_server.requests) == 1  # the call that asked for the cell, no other
    openai_server.enqueue_text("Yes.")  # the conversation goes on
    assert openai_proxy.openai().chat.completions.create(model="m", messages=QUESTION)


def test_a_recall_cell_too_large_for_the_kernel_is_the_models_observation(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    # The kernel refuses a cell over 4 MiB with a UsageError, which escaped the recall loop:
    # the client got 400 for what the model did, and the model's call was left without its
    # result in the log (so every retry found the conversation broken).
    proxy = start_proxy(openai_server, view=ViewSettings(4_000_000))
    openai_server.enqueue_tool_calls([(RECALL_TOOL, {"source": "#" * 4_200_000})])
    openai_server.enqueue_text("I will ask for less.")
    reply = proxy.openai().chat.completions.create(model="m", messages=QUESTION)
    assert reply.choices[0].message.content == "I will ask for less."
    result = openai_server.requests[1].body["messages"][-1]
    assert result["role"] == "tool" and "is too large (at most 4,194,304)" in result["content"]


def test_usage_whose_shape_changes_between_upstream_answers_is_summed_without_raising() -> None:
    # The usage of a recall step and of the answer after it are summed for the client; a field
    # that was a number in one and an object in the other raised (TypeError, AttributeError),
    # and the client got a 500 for the upstream's inconsistency.
    from scrollctx.serve.proxy._wire import sum_usage

    first = {"prompt_tokens": 10, "details": {"cached": 2}, "cost": 1, "flag": True}
    second = {"prompt_tokens": 5, "details": 7, "cost": {"usd": 0.1}, "flag": 3}
    assert sum_usage([first, second]) == {
        "prompt_tokens": 15, "details": {"cached": 2}, "cost": 1, "flag": True,
    }  # fmt: skip
    assert sum_usage([second, first])["details"] == 7
