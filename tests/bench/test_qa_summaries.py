"""The summarizer over real HTTP: chunks a small window rejects are halved, never dropped."""

from __future__ import annotations

import pytest
from bench_servers import ScriptedModelServer
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from scrollctx.agent import resolve_model
from scrollctx.bench._summaries import Summarizer
from scrollctx.errors import ContextTooLong

_WINDOW_CHARS = 2500


def _small_window_model(request: RecordedRequest) -> ScriptedReply:
    """Reject prompts over the window like a server at n_ctx; else summarize by line count."""
    prompt = request.body["messages"][-1]["content"]
    if len(prompt) > _WINDOW_CHARS:
        error = {
            "message": "too long",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        return ScriptedReply(status=400, body={"error": error})
    seen = prompt.count("turn ")
    return ScriptedOpenAIServer.text_reply(f"summary covering {seen} turns", usage=(10, 2))


def _conversation(turns: int) -> str:
    return "\n".join(
        f"turn {i}: the user mentions detail number {i} " + "x" * 40 for i in range(turns)
    )


def test_chunks_over_the_window_are_halved_until_they_fit(
    model_server: ScriptedModelServer,
) -> None:
    model_server.respond = _small_window_model
    with resolve_model("openai:summarizer", environ=model_server.environ) as backend:
        summarizer = Summarizer(backend, chunk_tokens=6000)
        summary, tokens_in, tokens_out = summarizer.update("", _conversation(80))

    prompts = [r.body["messages"][-1]["content"] for r in model_server.requests]
    accepted = [p for p in prompts if len(p) <= _WINDOW_CHARS]
    assert len(prompts) > len(accepted) > 1  # rejected once, then smaller pieces went through
    covered = [i for i in range(80) if any(f"turn {i}:" in p for p in accepted)]
    assert covered == list(range(80))  # every turn reached the model in an accepted chunk
    assert summary.startswith("summary covering")
    assert (tokens_in, tokens_out) == (10 * len(accepted), 2 * len(accepted))


def test_a_single_line_over_the_window_still_fails(model_server: ScriptedModelServer) -> None:
    model_server.respond = _small_window_model
    with resolve_model("openai:summarizer", environ=model_server.environ) as backend:
        with pytest.raises(ContextTooLong):
            Summarizer(backend).update("", "turn 0: " + "y" * 4000)
