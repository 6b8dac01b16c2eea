"""``scroll view`` and ``scroll simulate``: JSON and human output, restore from the log, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrollctx.agent import Agent, Backend, ChatRequest, Completion, ToolCall, Usage
from scrollctx.cli import run
from scrollctx.log import EventLog
from scrollctx.view import WorkingView

Capture = pytest.CaptureFixture[str]
SIMULATE = ["simulate", "--steps", "40", "--output-kb", "1", "--budget", "4000", "--k", "3"]


def _json(capsys: Capture) -> dict:
    return json.loads(capsys.readouterr().out)


def test_simulate_reports_view_sizes_against_full_replay(capsys: Capture) -> None:
    assert run([*SIMULATE, "--json"]) == 0
    data = _json(capsys)
    for key in (
        "max_view_tokens",
        "final_view_build_ms",
        "total_input_tokens",
        "full_replay_input_tokens",
        "input_token_saving_ratio",
        "per_call_view_tokens",
        "index_tokens",
    ):
        assert key in data
    assert data["store"] is None and data["calls"] == 80
    assert max(data["per_call_view_tokens"]) == data["max_view_tokens"] <= 4000
    assert data["total_input_tokens"] == sum(data["per_call_view_tokens"])
    assert data["full_replay_input_tokens"] > data["total_input_tokens"]
    assert data["input_token_saving_ratio"] == round(
        data["full_replay_input_tokens"] / data["total_input_tokens"], 2
    )
    assert data["evictions"] > 0 and data["index_tiers"] >= 2


def test_view_prints_what_the_model_receives(store_dir: Path, capsys: Capture) -> None:
    assert run([*SIMULATE, "--store", str(store_dir)]) == 0
    human = capsys.readouterr().out
    assert "fewer" in human and "evictions" in human
    assert run(["view", "--store", str(store_dir), "--session", "simulation", "--json"]) == 0
    data = _json(capsys)
    with EventLog.open(store_dir / "history.db") as log:
        view = WorkingView.restore(log, "simulation", budget_tokens=128_000)
        assert data["messages"] == view.render("openai")
        assert data["index"] == view.index_data()
    assert data["messages"][0]["content"].startswith("[eviction index]")
    assert data["index"]["tiers"] and data["tokens"] == view.tokens
    args = ["view", "--store", str(store_dir), "--session", "simulation"]
    assert run([*args, "--provider", "anthropic", "--json"]) == 0
    anthropic = _json(capsys)
    assert anthropic["messages"][0]["role"] == "user"
    assert all(m["role"] in ("user", "assistant") for m in anthropic["messages"])
    assert run(args) == 0
    text = capsys.readouterr().out
    assert "── user ──" in text and "ms.expand(lo, hi)" in text and "live turns" in text


def test_view_shows_a_system_prompt_file(store_dir: Path, tmp_path: Path, capsys: Capture) -> None:
    assert run([*SIMULATE, "--steps", "3", "--store", str(store_dir), "--json"]) == 0
    capsys.readouterr()
    prompt = tmp_path / "system.txt"
    prompt.write_text("Be brief.")
    args = ["view", "--store", str(store_dir), "--session", "simulation", "--json"]
    assert run([*args, "--system-file", str(prompt)]) == 0
    assert _json(capsys)["messages"][0] == {"role": "system", "content": "Be brief."}


def test_view_errors_are_one_line(store_dir: Path, capsys: Capture) -> None:
    # no store: the same error (and exit 1) as every other command that reads one
    assert run(["view", "--store", str(store_dir), "--session", "s1", "--json"]) == 1
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["type"] == "StoreError" and "run `scroll ingest FILE" in error["message"]
    assert run(["search", "x", "--store", str(store_dir), "--json"]) == 1
    assert json.loads(capsys.readouterr().err)["error"] == error
    assert not (store_dir / "history.db").exists()
    EventLog.open(store_dir / "history.db").close()
    assert run(["view", "--store", str(store_dir), "--session", "nope"]) == 2
    assert "has no events" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--steps", "0"],
        ["--budget", "10"],
        ["--k", "2"],
        ["--rho", "0"],
        ["--output-kb", "-1"],
        ["--evict-to", "0.9"],
    ],
)
def test_simulate_rejects_bad_settings(args: list[str], capsys: Capture) -> None:
    assert run(["simulate", *args]) == 2
    assert "Error" in capsys.readouterr().err


def test_simulate_through_the_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "scroll"
    out = subprocess.run(
        [str(script), "simulate", "--steps", "5", "--output-kb", "1", "--budget", "4000", "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    data = json.loads(out.stdout)
    assert data["steps"] == 5 and data["calls"] == 10
    assert not (tmp_path / ".scroll").exists()


def test_view_of_a_tampered_index_exits_3(store_dir: Path, capsys: Capture) -> None:
    from scrollctx.log import NewEvent

    assert run([*SIMULATE, "--steps", "3", "--store", str(store_dir), "--json"]) == 0
    capsys.readouterr()
    with EventLog.open(store_dir / "history.db") as log:
        log.append(NewEvent(session_id="simulation", kind="eviction_index", metadata={"x": 1}))
    args = ["view", "--store", str(store_dir), "--session", "simulation", "--json"]
    assert run(args) == 3
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["type"] == "IntegrityError" and "malformed" in error["message"]


class _ScriptedModel(Backend):
    """A test double for the model: plays queued completions and records every request."""

    name = "scripted"
    supports_tools = True

    def __init__(self, replies: list[Completion]) -> None:
        super().__init__(model="double")
        self.replies = replies
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        return self.replies.pop(0)


def _chat_replies(rounds: int) -> list[Completion]:
    replies = []
    for i in range(rounds):
        raw = json.dumps({"source": f"print('row {i} ' * 200)"})
        replies.append(
            Completion(
                text=f"Checking {i}.\n⟦ probe {i} | nothing yet | print | in_progress ⟧",
                tool_calls=(ToolCall(f"call_{i}", "repl_exec", json.loads(raw), raw),),
                reasoning="think",
                reasoning_blocks=({"type": "reasoning_content", "text": f"think {i}\n  kept"},),
                usage=Usage(1500, 10),
            )
        )
        reply = f"Probe {i} printed.\n⟦ probe {i} | printed | wait | done ⟧"
        replies.append(Completion(text=reply))
    return replies


def test_view_of_a_session_the_agent_loop_wrote(store_dir: Path) -> None:
    rounds = 8
    model = _ScriptedModel(_chat_replies(rounds))
    with Agent(model=model, store=store_dir, budget_tokens=3000) as agent:
        with agent.chat(new=True) as chat:
            for i in range(rounds):
                assert chat.send(f"Request {i}: print probe {i}.").status == "replied"
            session = chat.session_id
    assert model.replies == []
    # A separate process (the installed console script) restores and prints the view.
    script = Path(sys.executable).parent / "scroll"
    out = subprocess.run(
        [str(script), "view", "--store", str(store_dir), "--session", session, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    messages, index = data["messages"], data["index"]
    assert index["counters"]["evictions"] >= 2 and messages[0]["content"].startswith(
        "[eviction index]"
    )
    # What the model got on its last call (without the per-call digest) is what scroll view
    # shows, followed by the model's final reply.
    last = [dict(m) for m in model.requests[-1].messages]
    head, _, digest = last[-1]["content"].partition("\n\n[namespace digest]")
    assert digest  # the digest closes the last message (roles alternate)
    sent = [*last[:-1], {**last[-1], "content": head}]
    assert messages[: len(sent)] == sent
    assert messages[len(sent) :] == [
        {"role": "assistant", "content": f"Probe {rounds - 1} printed.\n"
         f"⟦ probe {rounds - 1} | printed | wait | done ⟧"}
    ]  # fmt: skip
    # Evicted requests are index anchors with the seq that ms.expand recovers.
    with EventLog.open(store_dir / "history.db") as log:
        requests = [e for e in log.session_events(session) if e.kind == "user_message"]
    lines = [line for tier in index["tiers"] for b in tier["blocks"] for line in b["lines"]]
    anchored = {a["seq"] for line in lines for a in line["anchors"]}
    live = {m["content"] for m in messages if m["role"] == "user"}
    for request in requests:
        assert request.seq in anchored or request.content in live
    assert requests[-1].content in live
    # Reasoning blocks of live assistant turns are kept exactly as the loop appended them.
    kept = [m["reasoning"] for m in messages if "reasoning" in m]
    assert kept and all(r[0]["text"].endswith("\n  kept") for r in kept)
