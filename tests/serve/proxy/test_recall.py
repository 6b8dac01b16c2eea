"""The recall loop through the proxy: an evicted fact comes back through recall_history_python,
run in the conversation's sandboxed kernel, and the client never sees the tool."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from proxy_helpers import ProxyServer, anthropic_text, openai_text, prompt_tokens
from scripted_servers import (
    RecordedRequest,
    ScriptedAnthropicServer,
    ScriptedOpenAIServer,
    ScriptedReply,
)

from scrollctx.serve.proxy import RECALL_TOOL
from scrollctx.view import estimate_tokens

FILLER = " ".join(["the weather stayed mild and the river ran slow past the old mill"] * 6)
FACT = f"A long note about my week: {FILLER}. Oh, and my locker code is 4512."
"""Deep in a long message: the index keeps the request, but not that far into it."""
QUESTION = "What is my locker code?"
CELL = (
    "hits = ms.search('locker code', k=3)\nfor hit in hits:\n    print(hit['seq'], hit['snippet'])"
)


def _openai_recall(request: RecordedRequest) -> ScriptedReply:
    """The model: asked the question, it recalls; shown the recall, it answers from it."""
    results = [m for m in request.body["messages"] if m["role"] == "tool"]
    if results and "4512" in results[-1]["content"]:
        code = re.search(r"locker\W+code\W+is (\d+)", results[-1]["content"])  # «match» marks
        assert code is not None
        return ScriptedOpenAIServer.text_reply(
            f"Your locker code is {code.group(1)}.\n⟦ locker | 4512 | none | done ⟧",
            usage=(prompt_tokens(request), 9),
        )
    return ScriptedOpenAIServer.tool_calls_reply(
        [(RECALL_TOOL, {"source": CELL})], usage=(prompt_tokens(request), 9)
    )


def _anthropic_recall(request: RecordedRequest) -> ScriptedReply:
    blocks = [b for m in request.body["messages"] if isinstance(m["content"], list)
              for b in m["content"]]  # fmt: skip
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results and "4512" in str(results[-1]["content"]):
        return ScriptedAnthropicServer.message_reply(
            [{"type": "thinking", "thinking": "found it", "signature": "c2lnLTI="},
             {"type": "text", "text": "Your locker code is 4512.\n⟦ locker | 4512 | done ⟧"}],
            usage=(prompt_tokens(request), 9),
        )  # fmt: skip
    return ScriptedAnthropicServer.message_reply(
        [{"type": "thinking", "thinking": "I should look it up", "signature": "c2lnLTE="},
         {"type": "text", "text": "Let me check."},
         {"type": "tool_use", "id": "toolu_r1", "name": RECALL_TOOL, "input": {"source": CELL}}],
        stop_reason="tool_use",
        usage=(prompt_tokens(request), 9),
    )  # fmt: skip


def _fill(server: Any, client_call: Any, history: list[dict[str, Any]], turns: int) -> None:
    """Talk about other things until the fact has left the upstream's view."""
    for turn in range(turns):
        if isinstance(server, ScriptedOpenAIServer):
            server.enqueue(openai_text(f"Noted {turn}."))
        else:
            server.enqueue(anthropic_text(f"Noted {turn}."))
        history.append({"role": "user", "content": f"{turn}: {FILLER}"})
        history.append({"role": "assistant", "content": client_call(history)})


def test_an_evicted_fact_comes_back_and_the_client_never_sees_the_recall_tool(
    openai_server: ScriptedOpenAIServer, start_proxy: Any, open_log: Any
) -> None:
    openai_proxy = start_proxy(openai_server, log=open_log())  # a folder's or a shared store
    client = openai_proxy.openai()

    def send(history: list[dict[str, Any]]) -> str:
        reply = client.chat.completions.create(model="scripted-model", messages=history)
        return str(reply.choices[0].message.content)

    openai_server.enqueue(openai_text("Noted."))
    history: list[dict[str, Any]] = [{"role": "user", "content": FACT}]
    history.append({"role": "assistant", "content": send(history)})
    _fill(openai_server, send, history, 40)
    openai_server.requests.clear()
    openai_server.enqueue(_openai_recall, _openai_recall)
    history.append({"role": "user", "content": QUESTION})
    raw = client.chat.completions.with_raw_response.create(model="scripted-model",
                                                           messages=history)  # fmt: skip
    reply = raw.parse()
    message = reply.choices[0].message
    assert message.content == "Your locker code is 4512."
    assert message.tool_calls is None and reply.choices[0].finish_reason == "stop"
    assert raw.headers["x-scroll-recall-steps"] == "1"
    steps = json.loads(raw.text)["scroll"]["recall"]
    assert steps[0]["source"] == CELL and steps[0]["ok"] is True
    assert reply.usage.prompt_tokens == sum(prompt_tokens(r) for r in openai_server.requests)
    assert reply.usage.completion_tokens == 18  # summed over both upstream calls
    first, second = (r.body for r in openai_server.requests)
    assert "4512" not in json.dumps(first["messages"])  # the fact had left the view
    assert "[eviction index]" in json.dumps(first["messages"])
    observation = next(m for m in second["messages"] if m["role"] == "tool")
    assert "4512" in observation["content"]
    session = raw.headers["x-scroll-session"]
    hidden = [e for e in openai_proxy.events(session) if e.metadata.get("proxy", {}).get("hidden")]
    assert [e.kind for e in hidden] == ["model_turn", "tool_result"]
    assert not hidden[1].searchable  # a recall's echo is never found by a later search


def test_a_streamed_recall_sends_text_as_it_comes_and_no_chunk_names_the_tool(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    client = openai_proxy.openai()
    openai_server.enqueue(openai_text("Noted."))
    history: list[dict[str, Any]] = [{"role": "user", "content": FACT}]
    history.append(
        {
            "role": "assistant",
            "content": str(
                client.chat.completions.create(model="m", messages=history)
                .choices[0]
                .message.content
            ),
        }
    )
    _fill(openai_server, lambda h: str(client.chat.completions.create(
        model="m", messages=h).choices[0].message.content), history, 40)  # fmt: skip
    openai_server.enqueue(_openai_recall, _openai_recall)
    history.append({"role": "user", "content": QUESTION})
    with client.chat.completions.with_streaming_response.create(
        model="m", messages=history, stream=True, stream_options={"include_usage": True}
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert RECALL_TOOL not in "\n".join(lines)
    chunks = [json.loads(line[6:]) for line in lines if line != "data: [DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.strip() == "Your locker code is 4512."
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 18
    history.append({"role": "assistant", "content": text})
    openai_server.enqueue_text("You are welcome.")
    follow = client.chat.completions.with_raw_response.create(
        model="m", messages=[*history, {"role": "user", "content": "Thanks!"}]
    )
    assert follow.headers["x-scroll-session"] == response.headers["x-scroll-session"]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_recall_keeps_thinking_and_hides_the_tool(
    anthropic_server: ScriptedAnthropicServer, anthropic_proxy: ProxyServer, stream: bool
) -> None:
    client = anthropic_proxy.anthropic()

    def send(history: list[dict[str, Any]]) -> str:
        reply = client.messages.create(model="c", max_tokens=100, messages=history)
        return str(reply.content[0].text)

    anthropic_server.enqueue(anthropic_text("Noted."))
    history: list[dict[str, Any]] = [{"role": "user", "content": FACT}]
    history.append({"role": "assistant", "content": send(history)})
    _fill(anthropic_server, send, history, 40)
    anthropic_server.enqueue(_anthropic_recall, _anthropic_recall)
    history.append({"role": "user", "content": QUESTION})
    if stream:
        with client.messages.stream(model="c", max_tokens=100, messages=history) as events:
            seen = [event.model_dump() for event in events]
            message = events.get_final_message()
        assert RECALL_TOOL not in json.dumps(seen)
    else:
        message = client.messages.create(model="c", max_tokens=100, messages=history)
    blocks = [block.model_dump(exclude_none=True) for block in message.content]
    assert blocks == [
        {"type": "thinking", "thinking": "I should look it up", "signature": "c2lnLTE="},
        {"type": "text", "text": "Let me check."},
        {"type": "thinking", "thinking": "found it", "signature": "c2lnLTI="},
        {"type": "text", "text": "Your locker code is 4512."},
    ]
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 18
    second = anthropic_server.requests[-1].body
    assert second["messages"][-2]["content"][0] == {  # the hidden step, as the model sent it
        "type": "thinking",
        "thinking": "I should look it up",
        "signature": "c2lnLTE=",
    }


def test_every_upstream_request_of_a_300_turn_conversation_stays_under_the_budget(
    openai_server: ScriptedOpenAIServer, start_proxy: Any, fast_dir: Path
) -> None:
    import openai

    from scrollctx.serve.proxy import ViewSettings

    budget = 6_000
    proxy = start_proxy(openai_server, view=ViewSettings(budget), store=fast_dir)
    client = proxy.openai()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You keep notes."}]
    sizes = []
    for turn in range(150):  # 150 requests: 300 turns the client keeps resending
        openai_server.enqueue(openai_text(f"Noted {turn}."))
        history.append({"role": "user", "content": f"note {turn}: {FILLER}"})
        # The SDK's request path without its per-message type transform, which costs it
        # ~0.1 ms a message and so dominates a 300-turn test (create() is used everywhere else)
        reply = client.post("/chat/completions", body={"model": "m", "messages": history},
                            cast_to=openai.types.chat.ChatCompletion)  # fmt: skip
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
        sizes.append(prompt_tokens(openai_server.requests[-1]))
    assert len(history) == 301
    sent = sum(estimate_tokens(m["content"] or "") for m in history)
    assert max(sizes) <= budget < sent / 2  # the client sent over twice the window at the end
    session = proxy.proxy.conversations.sessions()[0].session_id
    events = proxy.events(session)
    assert len([e for e in events if e.kind == "user_message"]) == 150  # each once, no copies


def test_a_refused_recall_cell_names_scroll_serve_s_opt_out(
    openai_server: ScriptedOpenAIServer, start_proxy: Any
) -> None:
    # Strict with Landlock treated as missing (the policy's documented test knob; the command
    # itself refuses to start so, a layer lost later is what a conversation meets): the cell is
    # refused, and the refusal names the proxy's own flag, not another command's.
    from scrollctx.kernel import SandboxPolicy

    openai_proxy = start_proxy(openai_server)
    openai_proxy.proxy.sandbox = SandboxPolicy(unavailable=frozenset({"landlock"}))
    openai_server.enqueue_tool_calls([(RECALL_TOOL, {"source": "print(1)"})])
    openai_server.enqueue(openai_text("I could not look it up."))
    reply = openai_proxy.openai().chat.completions.create(
        model="scripted-model", messages=[{"role": "user", "content": QUESTION}]
    )
    assert reply.choices[0].message.content == "I could not look it up."
    observation = next(
        m["content"] for m in openai_server.requests[1].body["messages"] if m["role"] == "tool"
    )
    assert "cell refused" in observation
    assert "`scroll serve --sandbox best-effort` (or off)" in observation
    assert "scroll exec" not in observation
