"""The OpenAI door with the ``openai`` SDK as the client: pass-through, sessions, prefixes."""

from __future__ import annotations

from typing import Any

import pytest
from proxy_helpers import ProxyServer
from scripted_servers import ScriptedOpenAIServer, observed

from scrollctx.serve.proxy import RECALL_TOOL


def _ask(client: Any, messages: list[dict[str, Any]], **options: Any) -> Any:
    return client.chat.completions.create(model="scripted-model", messages=messages, **options)


def test_a_reply_passes_through_with_its_usage_and_the_session_header(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    openai_server.enqueue_text("Paris.\n⟦ capital | Paris | none | done ⟧", usage=(41, 7))
    raw = openai_proxy.openai().chat.completions.with_raw_response.create(
        model="scripted-model",
        messages=[{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Capital of France?"}],
        temperature=0.3,
        seed=11,
    )  # fmt: skip
    reply = raw.parse()
    assert reply.choices[0].message.content == "Paris."  # the headline line is Scroll's
    assert reply.usage.prompt_tokens == 41 and reply.usage.completion_tokens == 7
    assert raw.headers["x-scroll-sandbox"] == "strict"
    assert raw.headers["x-scroll-recall-steps"] == "0"
    session = raw.headers["x-scroll-session"]
    upstream = openai_server.requests[0].body
    assert upstream["temperature"] == 0.3 and upstream["seed"] == 11
    assert upstream["messages"][0]["role"] == "system"
    assert upstream["messages"][0]["content"].startswith("Be brief.\n\nScroll manages")
    assert upstream["messages"][-1] == {"role": "user", "content": "Capital of France?"}
    assert [t["function"]["name"] for t in upstream["tools"]] == [RECALL_TOOL]
    kinds = [e.kind for e in openai_proxy.events(session)]
    assert kinds == ["system", "user_message", "model_turn"]


def test_a_client_resending_everything_appends_only_what_is_new(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    client = openai_proxy.openai()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You count."}]
    sessions = set()
    for turn in range(6):
        openai_server.enqueue_text(f"reply {turn}")
        history.append({"role": "user", "content": f"message {turn}"})
        raw = client.chat.completions.with_raw_response.create(
            model="scripted-model", messages=history
        )
        sessions.add(raw.headers["x-scroll-session"])
        history.append(raw.parse().choices[0].message.model_dump(exclude_none=True))
    assert len(sessions) == 1
    events = openai_proxy.events(sessions.pop())
    assert [e.content for e in events if e.kind == "user_message"] == [
        f"message {n}" for n in range(6)
    ]
    assert len([e for e in events if e.kind == "model_turn"]) == 6


def _transactions(trace: list[str]) -> list[tuple[int, str, str]]:
    """The write transactions a trace of the log's connection shows: (where its COMMIT is in
    the trace, its rows, ``flushed`` or ``unflushed``), in commit order."""
    done, rows, mode = [], "", "flushed"
    for at, sql in enumerate(trace):
        if sql.startswith("PRAGMA synchronous = "):
            mode = "unflushed" if sql.endswith("NORMAL") else "flushed"
        elif sql.startswith("INSERT INTO conversation_history ("):
            rows += sql
        elif sql == "COMMIT":
            done.append((at, rows, mode))
            rows = ""
    return done


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("evicting", [False, True], ids=["in-place", "evicting"])
def test_the_clients_messages_are_on_disk_before_the_upstream_has_them_and_the_reply_after(
    openai_server: ScriptedOpenAIServer,
    openai_proxy: ProxyServer,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
    evicting: bool,
) -> None:
    # The messages commit without a flush of their own and the -wal is fsynced before the
    # upstream is called: on the request's thread, or (a request whose view Algorithm 1 must
    # shrink first) on a helper thread meanwhile. The fsync below holds on (up to a second)
    # until the upstream is called: should the door call it before the flush returned,
    # "upstream" lands before "flushed" in the trace.
    import os
    import threading

    client = openai_proxy.openai()
    history: list[dict[str, Any]] = [{"role": "user", "content": "First question."}]
    openai_server.enqueue_text("First answer.")
    first = client.chat.completions.with_raw_response.create(model="scripted-model",
                                                             messages=history)  # fmt: skip
    history.append(first.parse().choices[0].message.model_dump(exclude_none=True))
    openai_proxy.events(first.headers["x-scroll-session"])  # its reply is logged: settled
    trace: list[str] = []
    called = threading.Event()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:  # observing the flush, as the trace observes the SQL
        trace.append(
            f"fsync in {threading.current_thread().name}: {os.readlink(f'/proc/self/fd/{fd}')}"
        )
        real_fsync(fd)
        called.wait(timeout=1.0)
        trace.append("flushed")

    def answer(request: Any) -> Any:
        trace.append("upstream")
        called.set()
        return ScriptedOpenAIServer.text_reply("Uniquely worded reply.")

    monkeypatch.setattr(os, "fsync", fsync)
    openai_proxy.log._conn.set_trace_callback(trace.append)
    long = " and the river ran on" * 1000 if evicting else ""  # past rho * C, under C
    history += [{"role": "user", "content": "Uniquely first note." + long},
                {"role": "user", "content": "Uniquely second note."}]  # fmt: skip
    openai_server.enqueue(answer)
    raw = client.chat.completions.with_raw_response.create(
        model="scripted-model", messages=history, stream=stream
    )
    session = raw.headers["x-scroll-session"]
    if stream:
        assert "Uniquely worded reply." in "".join(
            chunk.choices[0].delta.content or "" for chunk in raw.parse() if chunk.choices
        )
    openai_proxy.events(session)  # settled: the reply is logged
    commits = _transactions(trace)
    assert len(commits) == (3 if evicting else 2), commits  # evicting: the index event's too
    (client_at, client_rows, _), (reply_at, reply_rows, _) = commits[0], commits[-1]
    assert "Uniquely first note." in client_rows and "Uniquely second note." in client_rows
    # (a long message is also a payload file, fsynced as it is written, before its row)
    flushes = [at for at, line in enumerate(trace) if line.endswith("history.db-wal")]
    assert len(flushes) == 1
    assert ("scroll-serve-flush" in trace[flushes[0]]) is evicting  # the helper thread's
    flushed = trace.index("flushed", flushes[0])
    assert client_at < flushes[0] < flushed < trace.index("upstream") < reply_at
    assert {mode for _, _, mode in commits} == {"unflushed"}  # the one flush is the fsync
    assert "Uniquely worded reply." in reply_rows
    assert "Uniquely" not in reply_rows.replace("Uniquely worded reply.", "")
    if evicting:
        assert "eviction_index" in commits[1][1]


def test_identical_openings_with_different_session_headers_stay_apart(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    messages = [{"role": "user", "content": "Start the task."}]
    sessions = []
    for episode in ("episode-1", "episode-2", "episode-1"):
        openai_server.enqueue_text("ok")
        client = openai_proxy.openai(default_headers={"X-Scroll-Session": episode})
        raw = client.chat.completions.with_raw_response.create(
            model="scripted-model", messages=messages
        )
        sessions.append(raw.headers["x-scroll-session"])
    assert sessions[0] != sessions[1]
    assert sessions[2] != sessions[0]  # the same prefix again: a retry forks, never overwrites
    roots = {openai_proxy.proxy.conversations.get(s).agent_id for s in sessions}  # type: ignore[union-attr]
    assert len(roots) == 2  # episode-1's retry is a branch of episode-1's tree


def test_api_keys_separate_sessions_when_the_proxy_keys_them_so(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    proxy = start_proxy(openai_server, session_key="api-key")
    seen = []
    for key in ("run-a", "run-b"):
        openai_server.enqueue_text("ok")
        client = proxy.openai(api_key=key)
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "same opening"}]
        )
        seen.append(raw.headers["x-scroll-session"])
    assert seen[0] != seen[1]
    agents = {proxy.proxy.conversations.get(s).agent_id for s in seen}
    assert len(agents) == 2
    for request in openai_server.requests:  # the client's key never goes upstream
        assert request.headers["authorization"] == "Bearer sk-up"


@pytest.mark.parametrize(
    "body,said",
    [
        ({"model": "m"}, "`messages` must be a non-empty list"),
        ({"model": "m", "messages": "hi"}, "`messages` must be a non-empty list"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "role 'wizard'"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "`content` must be"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}, "`n` must be 1"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "a"},
                                        {"role": "system", "content": "late"}]},
            "system message after the conversation began",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "a"},
                                        {"role": "tool", "tool_call_id": "c9", "content": "r"}]},
            "has no open tool call",
        ),
    ],
)  # fmt: skip
def test_malformed_requests_get_400_with_a_clear_message_and_log_nothing(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer, body: Any, said: str
) -> None:
    import httpx2

    before = openai_proxy.log.count()
    response = httpx2.post(f"{openai_proxy.url}/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert said in response.json()["error"]["message"]
    assert openai_proxy.log.count() - before <= 1  # at most the conversation's start event
    assert openai_server.requests == []


def test_a_body_that_is_not_json_or_too_large_is_refused(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    import httpx2

    response = httpx2.post(f"{openai_proxy.url}/v1/chat/completions", content=b"{not json")
    assert response.status_code == 400 and "not JSON" in response.json()["error"]["message"]
    wrong = httpx2.post(f"{openai_proxy.url}/v1/messages", json={"messages": []})
    assert wrong.status_code == 400
    assert "speaks the openai API" in wrong.json()["error"]["message"]


def test_a_reply_with_half_an_emoji_reaches_the_client_and_nan_is_refused_clearly(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    # A lone surrogate (JSON's "\ud83d") is valid to Python's json but not to the faster
    # encoder the proxy writes answers with first; NaN and 1e400 no upstream request can carry.
    import httpx2

    url = f"{openai_proxy.url}/v1/chat/completions"
    openai_server.enqueue_text("A half smile \ud83d back.")
    asked = {"model": "m", "messages": [{"role": "user", "content": "Smile?"}]}
    response = httpx2.post(url, json=asked)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "A half smile \ud83d back."
    for number in (b"NaN", b"1e400"):
        body = b'{"model": "m", "temperature": %s, "messages": [{"role": "user", "content": "x"}]}'
        refused = httpx2.post(url, content=body % number)
        assert refused.status_code == 400
        message = refused.json()["error"]["message"]
        assert "not JSON" in message and number.decode() in message
    assert len(openai_server.requests) == 1


def test_a_client_message_with_half_an_emoji_reaches_the_upstream(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    # The proxy writes the upstream body itself (its faster encoder, the SDK sending the
    # bytes): the SDK's own encoder refused a lone surrogate, and the request ended in a 500.
    import httpx2

    openai_server.enqueue_text("Seen.")
    sent = b'{"model": "m", "messages": [{"role": "user", "content": "half \\ud83d here"}]}'
    response = httpx2.post(f"{openai_proxy.url}/v1/chat/completions", content=sent)
    assert response.status_code == 200, response.text
    (request,) = openai_server.requests
    assert observed(request.body["messages"][-1]["content"]) == "half \ud83d here"


def test_models_are_passed_through(openai_proxy: ProxyServer) -> None:
    models = openai_proxy.openai().models.list()
    assert [m.id for m in models.data] == ["scripted-model"]
