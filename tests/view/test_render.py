"""Both provider formats: exact round trips, reasoning/thinking kept byte-for-byte, pairing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scrollctx.errors import UsageError
from scrollctx.log import EventLog
from scrollctx.view import DIGEST_HEADER, WorkingView

OPENAI_TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "How many rows mention Caroline?"},
    {
        "role": "assistant",
        "content": "Counting.\n⟦ count rows | none yet | run the query | in_progress ⟧",
        "reasoning_content": "The user wants a count; ms.search then len().\n  Keep   spacing.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "repl_exec", "arguments": '{"source":"print(1)"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "repl_exec", "arguments": '{ "source" : "x=2" }'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "1"},
    {"role": "tool", "tool_call_id": "call_2", "name": "repl_exec", "content": ""},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Three rows."}, {"type": "text", "text": "Done."}],
    },
]

THINKING = {
    "type": "thinking",
    "thinking": "Plan: search, then expand.\n\n  exact   whitespace ✓",
    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYeH3jG8+Zbpe5R4iMKc9Vb3==",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
ANTHROPIC_TURNS: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Find the flight.", "cache_control": {"type": "ephemeral"}}
        ],
    },
    {
        "role": "assistant",
        "content": [
            THINKING,
            REDACTED,
            {"type": "text", "text": "Searching."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "repl_exec",
                "input": {"source": "ms.search('flight')"},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "AA231", "is_error": False}
        ],
    },
    {"role": "assistant", "content": "It is AA231.\n⟦ find flight | AA231 | none | done ⟧"},
]


def _view(log: EventLog, **settings: Any) -> WorkingView:
    return WorkingView(log, "s1", "You are helpful.", budget_tokens=100_000, **settings)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_openai_round_trip_is_exact(view_log: EventLog) -> None:
    view = _view(view_log)
    for message in OPENAI_TURNS:
        view.append(message)
    messages = view.render("openai")
    assert messages[0] == {"role": "system", "content": "You are helpful."}
    assert _dump(messages[1:]) == _dump(OPENAI_TURNS)


def test_anthropic_round_trip_keeps_thinking_blocks_byte_for_byte(view_log: EventLog) -> None:
    view = _view(view_log)
    for message in ANTHROPIC_TURNS:
        view.append(message, provider="anthropic")
    built = view.build("anthropic")
    assert built.system == "You are helpful."
    assert _dump(built.messages) == _dump(ANTHROPIC_TURNS)
    assert view.turns[1].headline is None
    assert view.turns[-1].headline == "find flight | AA231 | none | done"


def test_restore_renders_the_same_bytes(view_log: EventLog) -> None:
    view = _view(view_log)
    for message in ANTHROPIC_TURNS:
        view.append(message, provider="anthropic")
    other = WorkingView(view_log, "s2", "", budget_tokens=100_000)
    for message in OPENAI_TURNS:
        other.add(message)
    other.persist()
    again = WorkingView.restore(view_log, "s1", "You are helpful.", budget_tokens=100_000)
    assert _dump(again.render("anthropic")) == _dump(ANTHROPIC_TURNS)
    again2 = WorkingView.restore(view_log, "s2", "", budget_tokens=100_000)
    assert _dump(again2.render("openai")) == _dump(OPENAI_TURNS)


def test_pre_persisted_turns_bind_to_their_seqs(view_log: EventLog) -> None:
    view = _view(view_log)
    turns = view.add(OPENAI_TURNS[0], seq=None)
    assert turns[0].seq is None
    with pytest.raises(UsageError, match="persist"):
        view.add(OPENAI_TURNS[1], seq=99)
    view.persist()
    from scrollctx.view import split_message

    (turn,) = split_message(OPENAI_TURNS[1], "openai")
    seq = view_log.append(turn.to_event("s1"))
    with pytest.raises(UsageError, match="splits into 1"):
        view.add(OPENAI_TURNS[1], seq=[seq, seq + 1])
    view.add(OPENAI_TURNS[1], seq=seq)
    assert [t.seq for t in view.turns] == [1, seq]
    restored = WorkingView.restore(view_log, "s1", "You are helpful.", budget_tokens=100_000)
    assert _dump(restored.render("openai")) == _dump(view.render("openai"))


def test_openai_turns_render_for_anthropic(view_log: EventLog) -> None:
    view = _view(view_log)
    for message in OPENAI_TURNS:
        view.append(message)
    messages = view.render("anthropic")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    calls = [b for b in messages[1]["content"] if b["type"] == "tool_use"]
    assert calls[0]["input"] == {"source": "print(1)"}
    assert calls[1]["input"] == {"source": "x=2"}
    results = messages[2]["content"]
    assert [b["tool_use_id"] for b in results] == ["call_1", "call_2"]
    assert results[0]["content"] == "1"
    # An OpenAI reasoning_content has no signature: Anthropic would reject it as thinking.
    assert not any(b["type"] == "thinking" for b in messages[1]["content"])


def test_anthropic_turns_render_for_openai(view_log: EventLog) -> None:
    view = _view(view_log)
    for message in ANTHROPIC_TURNS:
        view.append(message, provider="anthropic")
    messages = view.render("openai")[1:]
    assert messages[1]["reasoning_content"] == THINKING["thinking"]
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "repl_exec",
        "arguments": json.dumps({"source": "ms.search('flight')"}),
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "AA231"}


def test_anthropic_body_starts_with_a_user_message(view_log: EventLog) -> None:
    view = _view(view_log)
    view.append({"role": "assistant", "content": "Hello, how can I help?"})
    view.append({"role": "user", "content": "Plan a trip."})
    messages = view.render("anthropic", digest="trip: dict 3 keys")
    assert messages[0]["role"] == "user"
    assert messages[1]["role"] == "assistant"
    # The digest rides at the end, merged into the last user message.
    last = messages[-1]
    assert last["role"] == "user"
    assert "trip: dict 3 keys" in last["content"][-1]["text"]


def test_clearing_the_digest_gives_its_tokens_back(view_log: EventLog) -> None:
    view = _view(view_log)
    view.append({"role": "user", "content": "Plan a trip."})
    without = view.tokens
    view.set_digest("trip: dict 3 keys")
    assert view.tokens > without
    view.set_digest("")
    assert view.tokens == without == view.build("openai").tokens


def test_openai_parts_name_each_part_and_the_digest_only_when_there_is_one(
    view_log: EventLog,
) -> None:
    view = _view(view_log)
    for message in OPENAI_TURNS:
        view.append(message)
    view.set_digest("trip: dict 3 keys")
    parts = view.openai_parts()
    assert [kind for kind, _, _ in parts] == ["turn"] * len(OPENAI_TURNS) + ["digest"]
    assert [turn for _, _, turn in parts[:-1]] == view.turns
    assert parts[-1] == (
        "digest",
        {"role": "user", "content": DIGEST_HEADER + "trip: dict 3 keys"},
        None,
    )
    view.set_digest("")
    assert [kind for kind, _, _ in view.openai_parts()] == ["turn"] * len(OPENAI_TURNS)


def test_a_build_reports_its_time_in_milliseconds(
    view_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A scripted clock (the build reads it twice): a build that took a quarter of a second
    # reports 250 ms, on the request and in the metrics.
    from types import SimpleNamespace

    from scrollctx.view import _working

    view = _view(view_log)
    view.append(OPENAI_TURNS[0])
    readings = iter([10.0, 10.25])
    monkeypatch.setattr(_working, "time", SimpleNamespace(perf_counter=lambda: next(readings)))
    built = view.build("openai")
    assert built.build_ms == pytest.approx(250.0) == view.metrics.last_build_ms


def test_tool_results_and_a_user_interjection_merge_results_first(view_log: EventLog) -> None:
    view = _view(view_log)
    for message in OPENAI_TURNS[:4]:
        view.append(message)
    view.append({"role": "user", "content": "Also count Melanie."})
    last = view.render("anthropic")[-1]
    assert [b["type"] for b in last["content"]] == ["tool_result", "tool_result", "text"]


def test_a_tool_result_needs_its_call(view_log: EventLog) -> None:
    view = _view(view_log)
    view.append(OPENAI_TURNS[0])
    with pytest.raises(UsageError, match="no open tool call"):
        view.add({"role": "tool", "tool_call_id": "call_9", "content": "x"})
    view.append(OPENAI_TURNS[1])
    with pytest.raises(UsageError, match="await results"):
        view.add({"role": "user", "content": "interrupt"})
    with pytest.raises(UsageError, match="must ascend"):
        view.add({"role": "tool", "tool_call_id": "call_1", "content": "1"}, seq=1)
    with pytest.raises(UsageError, match="must ascend after the view's last seq 2"):
        view.add({"role": "tool", "tool_call_id": "call_1", "content": "1"}, seq=2)
    assert [t.role for t in view.turns] == ["user", "assistant"]
    assert view_log.count() == 2


@pytest.mark.parametrize(
    "message,provider,match",
    [
        ({"role": "system", "content": "x"}, "openai", "cannot be a live turn"),
        ({"role": "user", "content": "x"}, "gemini", "unknown provider"),
        ("not a dict", "openai", "must be a dict"),
        ({"role": "user", "content": 42}, "openai", "string or a list"),
        ({"role": "tool", "content": "x"}, "openai", "tool_call_id"),
    ],
)
def test_bad_messages_are_refused_and_nothing_is_written(
    view_log: EventLog, message: Any, provider: str, match: str
) -> None:
    view = _view(view_log)
    with pytest.raises(UsageError, match=match):
        view.append(message, provider=provider)
    assert view_log.count() == 0 and view.turns == []


def test_events_carry_kind_headline_and_tool_fields(view_log: EventLog) -> None:
    view = _view(view_log)
    seqs = [s for m in OPENAI_TURNS[:3] for s in view.append(m)]
    user, assistant, result = view_log.events(seqs)
    assert (user.kind, user.role, user.label) == (
        "user_message",
        "user",
        OPENAI_TURNS[0]["content"],
    )
    assert assistant.kind == "model_turn"
    assert assistant.headline == "count rows | none yet | run the query | in_progress"
    assert assistant.tool_input[0]["id"] == "call_1"
    assert (result.kind, result.tool_call_id, result.content) == ("tool_result", "call_1", "1")


def test_every_seq_of_a_split_message_must_come_after_the_view(view_log: EventLog) -> None:
    # An Anthropic user message of a tool result and a text splits into two turns; seqs that
    # start at the view's last turn are refused though the second one is new.
    from scrollctx.view import split_message

    view = _view(view_log)
    for message in ANTHROPIC_TURNS[:2]:
        view.append(message, provider="anthropic")
    last = view.turns[-1].seq
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "AA231"},
            {"type": "text", "text": "And the hotel?"},
        ],
    }
    turns = split_message(message, "anthropic")
    seqs = view_log.append_many(turn.to_event("s1") for turn in turns)
    with pytest.raises(UsageError, match=f"must ascend after the view's last seq {last}"):
        view.add(message, provider="anthropic", seq=[last, seqs[-1]])
    assert (
        view.add(message, provider="anthropic", seq=seqs)
        and [t.seq for t in view.turns][-2:] == seqs
    )


def test_an_empty_view_refuses_seqs_below_one_as_out_of_order(view_log: EventLog) -> None:
    # Seqs start at 1: on an empty view the bound is 0, and seq 0 is refused by it (not
    # looked up in the log).
    view = _view(view_log)
    for seq in (0, -3):
        with pytest.raises(
            UsageError, match=rf"seqs \[{seq}\] must ascend after the view's last seq 0"
        ):
            view.add(OPENAI_TURNS[0], seq=seq)
    assert view.turns == []


def test_messages_can_be_added_by_name(view_log: EventLog) -> None:
    view = _view(view_log)
    assert view.append(message=OPENAI_TURNS[0], provider="openai") == [1]
    (turn,) = view.add(message=OPENAI_TURNS[1], provider="openai")
    assert view.persist() == [2] and turn.seq == 2


def test_a_user_message_added_without_a_flag_is_a_real_request(view_log: EventLog) -> None:
    # add, like append, takes a user message as the user's own unless told it is a nudge.
    view = _view(view_log)
    (request,) = view.add({"role": "user", "content": "Plan a trip."})
    (nudge,) = view.add({"role": "user", "content": "Go on."}, synthetic=True)
    assert request.is_real_user and not nudge.is_real_user
    view.append({"role": "user", "content": "And book it."})
    assert view.turns[-1].is_real_user


def test_seqs_must_be_view_events_of_the_session(view_log: EventLog) -> None:
    from scrollctx.log import NewEvent
    from scrollctx.view import split_message

    view = _view(view_log)
    plain = view_log.append(NewEvent(session_id="s1", kind="user_message", content="hi"))
    with pytest.raises(UsageError, match="not a view event"):
        view.add(OPENAI_TURNS[0], seq=plain)
    (turn,) = split_message(OPENAI_TURNS[0], "openai")
    elsewhere = view_log.append(turn.to_event("other-session"))
    with pytest.raises(UsageError, match="not a view event"):
        view.add(OPENAI_TURNS[0], seq=elsewhere)
    assert view.turns == []


def test_lineage_fields_reach_the_events(view_log: EventLog) -> None:
    view = WorkingView(
        view_log, "s1", "", budget_tokens=1000, event_fields={"agent_id": "a1", "run_id": "r1"}
    )
    (seq,) = view.append(OPENAI_TURNS[0], fields={"step_index": 3, "msg_index": 0})
    event = view_log.get(seq)
    assert (event.agent_id, event.run_id, event.step_index, event.msg_index) == ("a1", "r1", 3, 0)


def test_the_openai_layout_never_sends_two_user_messages_in_a_row() -> None:
    """Chat templates that enforce alternation (llama.cpp's strict ones) reject user, user:
    the index opens the first user message, the digest closes the last user or tool message,
    consecutive plain user messages merge; a real request after a tool result stays its own."""
    from scrollctx.view import openai_layout

    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "out"}
    body = [{"role": "user", "content": "task"}, call, result]
    laid = openai_layout(body, "INDEX", "DIGEST")
    assert laid == [
        {"role": "user", "content": "INDEX\n\ntask"},
        call,
        {"role": "tool", "tool_call_id": "c1", "content": "out\n\nDIGEST"},
    ]
    assert body[0] == {"role": "user", "content": "task"}  # the input is not changed
    reply = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert openai_layout(reply, "", "DIGEST")[-1] == {"role": "user", "content": "DIGEST"}
    first_is_a_call = [call, result]
    assert openai_layout(first_is_a_call, "INDEX", "")[0] == {"role": "user", "content": "INDEX"}
    users = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert openai_layout(users, "", "") == [{"role": "user", "content": "a\n\nb"}]
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    parts = [{"role": "user", "content": [image]}]
    assert openai_layout(parts, "INDEX", "") == [
        {"role": "user", "content": [{"type": "text", "text": "INDEX"}, image]}
    ]
