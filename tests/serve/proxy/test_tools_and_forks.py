"""Client tools pass through, forks become branches, and reasoning travels byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest
from proxy_helpers import ProxyServer
from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer, observed

from scrollctx.serve.proxy import RECALL_TOOL

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ODD = "  weighing it…\n\t⟦ not | a | headline ⟧ «x» \u2028 end \\n  "
"""Reasoning text that no whitespace stripping, headline stripping or escaping may touch."""


@pytest.mark.parametrize("stream", [False, True])
def test_client_tools_pass_through_and_their_results_return(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer, stream: bool
) -> None:
    client = openai_proxy.openai()
    openai_server.enqueue_tool_calls([("get_weather", '{"city": "Oslo"}')])
    question = [{"role": "user", "content": "Weather in Oslo?"}]
    if stream:
        with client.chat.completions.stream(
            model="m", messages=question, tools=[WEATHER]
        ) as events:
            message = events.get_final_completion().choices[0].message
    else:
        message = (
            client.chat.completions.create(model="m", messages=question, tools=[WEATHER])
            .choices[0]
            .message
        )
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("call_0", "get_weather", '{"city": "Oslo"}')
    ]
    tools = openai_server.requests[0].body["tools"]
    assert tools[0] == WEATHER and tools[1]["function"]["name"] == RECALL_TOOL
    openai_server.enqueue_text("It is 4 degrees in Oslo.")
    history = [*question, message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": "call_0", "content": "4 C, rain"}]  # fmt: skip
    answer = client.chat.completions.create(model="m", messages=history, tools=[WEATHER])
    assert answer.choices[0].message.content == "It is 4 degrees in Oslo."
    sent = openai_server.requests[1].body["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "4 C, rain"}


def test_a_reply_calling_both_runs_ours_and_gives_the_client_only_its_own(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    client = openai_proxy.openai()
    cell = {"source": "print(6 * 7)"}
    openai_server.enqueue_tool_calls([(RECALL_TOOL, cell), ("get_weather", {"city": "Rome"})])
    question = [{"role": "user", "content": "Weather in Rome, and what is 6*7?"}]
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=question, tools=[WEATHER]
    )
    message = raw.parse().choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["get_weather"]
    assert raw.headers["x-scroll-recall-steps"] == "1"
    openai_server.enqueue_text("Sunny; and 42.")
    history = [*question, message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]  # fmt: skip
    assert client.chat.completions.create(model="m", messages=history, tools=[WEATHER])
    sent = openai_server.requests[1].body["messages"]
    calls = next(m for m in sent if m.get("tool_calls"))["tool_calls"]
    results = [m for m in sent if m["role"] == "tool"]
    assert [c["id"] for c in calls] == [r["tool_call_id"] for r in results]  # paired, in order
    assert "42" in results[0]["content"] and observed(results[1]["content"]) == "sunny"


def test_anthropic_client_tools_pass_through(
    anthropic_server: ScriptedAnthropicServer, anthropic_proxy: ProxyServer
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = {"name": "get_weather", "description": "Weather.", "input_schema": schema}
    anthropic_server.enqueue_message(
        [{"type": "text", "text": "Checking."},
         {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}],
        stop_reason="tool_use",
    )  # fmt: skip
    client = anthropic_proxy.anthropic()
    question = [{"role": "user", "content": "Weather in Oslo?"}]
    reply = client.messages.create(model="c", max_tokens=50, messages=question, tools=[tool])
    assert reply.stop_reason == "tool_use"
    assert reply.content[1].name == "get_weather" and reply.content[1].input == {"city": "Oslo"}
    assert anthropic_server.requests[0].body["tools"][0] == tool
    anthropic_server.enqueue_text("4 degrees.")
    history = [*question, {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                             "content": "4 C"}]}]  # fmt: skip
    assert client.messages.create(model="c", max_tokens=50, messages=history, tools=[tool])
    last = anthropic_server.requests[1].body["messages"][-1]["content"]
    assert last[0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "4 C"}


def test_an_edited_history_forks_into_a_branch_and_both_go_on(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer
) -> None:
    client = openai_proxy.openai()

    def send(history: list[dict[str, Any]], text: str) -> tuple[str, str]:
        openai_server.enqueue_text(text)
        raw = client.chat.completions.with_raw_response.create(model="m", messages=history)
        return raw.headers["x-scroll-session"], str(raw.parse().choices[0].message.content)

    history: list[dict[str, Any]] = [{"role": "user", "content": "Plan a trip to Rome."}]
    original, reply = send(history, "Day 1: Colosseum.")
    history += [{"role": "assistant", "content": reply},
                {"role": "user", "content": "Add a museum."}]  # fmt: skip
    assert send(history, "Day 2: Vatican Museums.")[0] == original
    edited = [*history[:2], {"role": "user", "content": "Add a beach instead."}]
    branch, reply = send(edited, "Day 2: Ostia.")
    assert branch != original
    sent = json.dumps(openai_server.requests[-1].body["messages"])
    assert "Add a beach instead." in sent and "Add a museum." not in sent
    assert "Day 1: Colosseum." in sent  # the shared prefix
    start = openai_proxy.events(branch)[0]
    assert start.metadata["proxy"]["branch_of"] == original
    assert start.metadata["proxy"]["fork_at"] == 2
    before = len(openai_proxy.events(original))
    assert send([*edited, {"role": "assistant", "content": reply},
                 {"role": "user", "content": "Thanks."}], "Enjoy.")[0] == branch  # fmt: skip
    assert send([*history, {"role": "assistant", "content": "Day 2: Vatican Museums."},
                 {"role": "user", "content": "Thanks."}], "Enjoy.")[0] == original  # fmt: skip
    assert len(openai_proxy.events(original)) == before + 2  # only its own new turns


def test_a_restarted_proxy_knows_every_conversation(
    openai_server: ScriptedOpenAIServer, start_proxy: Any, tmp_path: Any, open_log: Any
) -> None:
    store = tmp_path / "kept"
    first = start_proxy(openai_server, store=store, log=open_log())
    openai_server.enqueue_text("One.")
    history: list[dict[str, Any]] = [{"role": "user", "content": "Count with me."}]
    raw = first.openai().chat.completions.with_raw_response.create(model="m", messages=history)
    session = raw.headers["x-scroll-session"]
    history += [{"role": "assistant", "content": "One."}, {"role": "user", "content": "Next?"}]
    first.stop()
    second = start_proxy(openai_server, store=store, log=open_log())
    openai_server.enqueue_text("Two.")
    raw = second.openai().chat.completions.with_raw_response.create(model="m", messages=history)
    assert raw.headers["x-scroll-session"] == session
    assert [e.content for e in second.events(session) if e.kind == "user_message"] == [
        "Count with me.", "Next?"]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_content_reaches_the_client_byte_for_byte(
    openai_server: ScriptedOpenAIServer, openai_proxy: ProxyServer, stream: bool
) -> None:
    openai_server.enqueue_text("Done.", reasoning=ODD)
    client = openai_proxy.openai()
    question = [{"role": "user", "content": "Think, then answer."}]
    if stream:
        with client.chat.completions.with_streaming_response.create(
            model="m", messages=question, stream=True
        ) as response:
            chunks = [json.loads(line[6:]) for line in response.iter_lines()
                      if line.startswith("data: {")]  # fmt: skip
        reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or ""
                            for c in chunks if c["choices"])  # fmt: skip
    else:
        raw = client.chat.completions.with_raw_response.create(model="m", messages=question)
        reasoning = json.loads(raw.text)["choices"][0]["message"]["reasoning_content"]
    assert reasoning == ODD


def test_thinking_blocks_travel_byte_for_byte_both_ways(
    anthropic_server: ScriptedAnthropicServer, anthropic_proxy: ProxyServer
) -> None:
    thinking = [
        {"type": "thinking", "thinking": ODD, "signature": "RXE+/c2ln\u00e9==\n"},
        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk+/=="},
    ]
    anthropic_server.enqueue_message([*thinking, {"type": "text", "text": "Answer."}])
    client = anthropic_proxy.anthropic()
    question = [{"role": "user", "content": "Think hard."}]
    raw = client.messages.with_raw_response.create(model="c", max_tokens=50, messages=question)
    content = json.loads(raw.http_response.text)["content"]
    assert content[:2] == thinking
    anthropic_server.enqueue_text("More.")
    history = [*question, {"role": "assistant", "content": content},
               {"role": "user", "content": "Go on."}]  # fmt: skip
    client.messages.create(model="c", max_tokens=50, messages=history)
    sent = anthropic_server.requests[1].body["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["content"][:2] == thinking  # from the log, as the model wrote them


@pytest.mark.parametrize("stream", [False, True])
def test_a_clients_beta_header_reaches_the_upstream_and_its_key_does_not(
    anthropic_server: ScriptedAnthropicServer, anthropic_proxy: ProxyServer, stream: bool
) -> None:
    beta = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
    client = anthropic_proxy.anthropic(default_headers={"anthropic-beta": beta})
    anthropic_server.enqueue_text("Hello.")
    question = [{"role": "user", "content": "Hi."}]
    if stream:
        with client.messages.stream(model="c", max_tokens=50, messages=question) as events:
            assert events.get_final_text() == "Hello."
    else:
        assert client.messages.create(model="c", max_tokens=50, messages=question)
    sent = anthropic_server.requests[0].headers
    assert sent["anthropic-beta"] == beta
    assert "sk-up" in json.dumps(sent) and "client-key" not in json.dumps(sent)  # our key only
