"""``scroll serve`` itself: refusals before it listens, and the installed command serving a client
until Ctrl-C, with an opted-out sandbox stated in every answer."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from proxy_helpers import body_begun, read_answer
from scripted_servers import ScriptedOpenAIServer

from scrollctx.cli import run
from scrollctx.config import resolve_config
from scrollctx.log import open_store

SCROLL = Path(sys.executable).with_name("scroll")


@pytest.mark.parametrize(
    "args,said",
    [
        (["--host", "0.0.0.0"], "refusing to serve 0.0.0.0 without a token"),
        (["--host", "0.0.0.0"], "--token-file FILE (or --token / SCROLL_SERVE_TOKEN)"),
        (["--host", "192.0.2.1", "--token", "short"], "use at least 16"),
        (["--without", "landlock"], "refusing to start: the recall kernel's sandbox"),
    ],
)
def test_serve_refuses_before_it_listens(
    openai_server: ScriptedOpenAIServer,
    tmp_path: Path,
    args: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run(["serve", "--upstream", openai_server.base_url, "--port", "0",
                "--store", str(tmp_path / "store"), *args])  # fmt: skip
    assert code == 2
    assert said in capsys.readouterr().err
    assert openai_server.requests == []


@pytest.mark.parametrize("shared", [False, True], ids=["folder", "postgresql"])
def test_the_installed_command_serves_until_interrupted(
    openai_server: ScriptedOpenAIServer,
    tmp_path: Path,
    shared: bool,
    request: pytest.FixtureRequest,
) -> None:
    import openai

    store = request.getfixturevalue("postgres_url") if shared else str(tmp_path / "store")
    local = {"SCROLL_LOCAL_DIR": str(tmp_path / "host")}  # a shared store's replica
    command = [str(SCROLL), "serve", "--upstream", openai_server.base_url, "--port", "0",
               "--sandbox", "best-effort", "--store", store, "--body-seconds", "0.5"]  # fmt: skip
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **local})  # fmt: skip
    try:
        assert server.stderr is not None
        line = server.stderr.readline()  # written once the socket listens
        found = re.search(r"point clients at (http://\S+)", line)
        assert found, line
        openai_server.enqueue_text("Hello from upstream.")
        client = openai.OpenAI(base_url=found.group(1), api_key="k", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "Hi"}]
        )
        assert raw.parse().choices[0].message.content == "Hello from upstream."
        assert raw.headers["x-scroll-sandbox"] == "best-effort (opt-out)"
        client.close()
        with body_begun(found.group(1)) as stalled:
            assert b"did not arrive within 0.5 s" in read_answer(stalled)  # --body-seconds
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 130  # interrupted: the exit code of Ctrl-C
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stderr is not None:
            server.stderr.close()
    with open_store(resolve_config(store, environ=local)) as log:
        said = [e.content for e in log.session_events("proxy")]
        asked = [e.content for e in log.events_after(0, 100) if e.kind == "user_message"]
    assert said == ["scroll serve runs recall cells with sandbox best-effort (opt-out)"]
    assert asked == ["Hi"]


_WITHOUT_UVICORN = """
import sys
sys.modules["uvicorn"] = None  # the serve extra is not installed
from scrollctx.cli import run
sys.exit(run(sys.argv[1:]))
"""


def test_serve_without_its_extra_names_the_install_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_UVICORN, "serve", "--upstream", "http://127.0.0.1:9/v1",
         "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "Error: starlette, uvicorn and orjson are not installed; "
        "install them with: pip install 'scrollctx[serve]'"
    )
