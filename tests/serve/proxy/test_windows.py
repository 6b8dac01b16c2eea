"""The view's window C per requested model: one proxy, clients naming models of other windows."""

from __future__ import annotations

from typing import Any

import pytest
from proxy_helpers import openai_text, prompt_tokens
from scripted_servers import ScriptedOpenAIServer

from scrollctx.serve.proxy import ModelWindows, ViewSettings

FILLER = " ".join(["the weather stayed mild and the river ran slow past the old mill"] * 6)


def _history(pairs: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You keep notes."}]
    for turn in range(pairs):
        history += [{"role": "user", "content": f"note {turn}: {FILLER}"},
                    {"role": "assistant", "content": f"Noted {turn}."}]  # fmt: skip
    return [*history, {"role": "user", "content": "What was the first note?"}]


@pytest.fixture
def proxy(
    openai_server: ScriptedOpenAIServer, start_proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """A proxy with no fixed window, whose upstream lists a small- and a large-window model."""
    monkeypatch.setattr(openai_server, "models", ["small-model", "big-model"])
    openai_server.model_metadata["small-model"] = {"max_model_len": 8_096}  # C: 4,000
    openai_server.model_metadata["big-model"] = {"context_length": 200_000}  # C: 128,000
    return start_proxy(openai_server, view=ViewSettings(None, tail_groups=1, keep_results=1))


def test_each_request_gets_the_window_of_the_model_it_names(
    openai_server: ScriptedOpenAIServer, proxy: Any
) -> None:
    client = proxy.openai()
    history = _history(80)  # about 9,000 tokens
    sent = {}
    for model in ("small-model", "big-model", "gpt-4-0613"):  # the last: the model table's
        openai_server.enqueue(openai_text("The weather."))
        client.chat.completions.create(model=model, messages=history,
                                       extra_headers={"X-Scroll-Session": model})  # fmt: skip
        sent[model] = openai_server.requests[-1]
    small, big, table = (sent[m] for m in ("small-model", "big-model", "gpt-4-0613"))
    assert prompt_tokens(small) <= 4_000 < prompt_tokens(big)
    assert len(big.body["messages"]) == len(history)  # all of it fits 128,000: nothing evicted
    assert len(small.body["messages"]) < len(history) / 4
    assert "[eviction index]" in small.body["messages"][1]["content"]
    assert prompt_tokens(table) <= 4_096 < prompt_tokens(big)  # gpt-4: 8,192 less the reply
    windows = proxy.proxy.windows
    assert windows.budget("small-model").source.startswith("the server's /v1/models")
    assert windows.budget("gpt-4-0613").source.startswith("the model table (gpt-4)")


def test_a_conversation_takes_the_window_of_the_model_its_latest_request_names(
    openai_server: ScriptedOpenAIServer, proxy: Any
) -> None:
    client = proxy.openai()
    history = _history(80)
    openai_server.enqueue(openai_text("The weather."))
    client.chat.completions.create(model="big-model", messages=history)
    history.append({"role": "assistant", "content": "The weather."})
    history.append({"role": "user", "content": "And the second?"})
    openai_server.enqueue(openai_text("The weather again."))
    client.chat.completions.create(model="small-model", messages=history)
    first, second = openai_server.requests[-2:]
    assert len(first.body["messages"]) == len(history) - 2
    assert prompt_tokens(second) <= 4_000
    assert len(proxy.proxy.conversations) == 1  # the same conversation, a smaller window


def test_budget_tokens_fixes_the_window_of_every_model(openai_server: ScriptedOpenAIServer) -> None:
    from proxy_helpers import upstream_backend

    backend = upstream_backend("openai", openai_server)
    try:
        chosen = ModelWindows(backend, given=3_000).budget("gpt-4o")
        assert (chosen.tokens, chosen.source) == (3_000, "--budget-tokens")
        assert ModelWindows(backend).budget("gpt-4o").tokens == 128_000 - 4_096
        assert ModelWindows(backend).budget(None).tokens == 32_000  # scripted-model: unknown
    finally:
        backend.close()
