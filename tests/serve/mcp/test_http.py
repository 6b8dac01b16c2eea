"""``scroll mcp --http``: the SDK client over streamable HTTP on loopback, the bearer token on
every request, the refusal to serve the network without one, and a handshake-era session whose
end stops its kernel."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp_helpers import call, eventually, http_server, http_session, text

from procs import alive, descendants
from scrollctx.cli import run

pytestmark = pytest.mark.anyio

TOKEN = "t0ken-for-tests-only-3f9a1c"


async def test_every_request_needs_the_token(beam_store: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    args = ("--token-file", str(token_file))
    with http_server(beam_store, *args, errlog=tmp_path / "err") as (url, _):
        async with http_session(url, token=TOKEN) as client:
            hits = await call(client, "scroll_search", query="Flask", k=2)
            assert not hits.is_error and len(hits.structured_content["hits"]) == 2
        for sent in (None, "wrong-token-of-enough-length", TOKEN + "x"):
            headers = {"Authorization": f"Bearer {sent}"} if sent else {}
            async with httpx2.AsyncClient(headers=headers) as http:
                for method in ("POST", "GET", "DELETE"):
                    response = await http.request(method, url, json={})
                    assert response.status_code == 401, (sent, method)
                    assert "Bearer" in response.headers["www-authenticate"]
        with pytest.raises(Exception):  # noqa: B017 - the SDK raises its own transport error
            async with http_session(url, token="wrong-token-of-enough-length") as client:
                await call(client, "scroll_sessions")


@pytest.mark.parametrize(
    "args,said",
    [
        (["--http", "0.0.0.0:0"], "refusing to serve 0.0.0.0 without a token"),
        (["--http", "192.0.2.1:0", "--token", "short"], "use at least 16"),
        (["--http", "localhost"], "--http takes HOST:PORT"),
    ],
)
def test_the_network_needs_a_token_and_a_real_one(
    beam_store: Path, args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["mcp", "--store", str(beam_store), *args]) == 2  # refused before it listens
    assert said in capsys.readouterr().err


async def test_a_handshake_session_keeps_its_kernel_until_the_client_ends_it(
    beam_store: Path, tmp_path: Path
) -> None:
    with http_server(beam_store, errlog=tmp_path / "err") as (url, server):
        async with http_session(url, mode="legacy") as client:
            assert not (await call(client, "scroll_sessions")).is_error
            memory_reader = descendants(server.pid)  # the server's own, for its lifetime
            first = await call(client, "scroll_python", source="x = 41")
            assert first.structured_content["session"] is None  # the MCP session is the key
            second = await call(client, "scroll_python", source="print(x + 1)")
            assert text(second).startswith("stdout:\n42")
            kernel = descendants(server.pid) - memory_reader
            assert kernel and memory_reader
        # Leaving the client sends DELETE for its session: the kernel stops, the server stays.
        await eventually(lambda: not any(alive(pid) for pid in kernel), "the kernel to stop")
        assert server.poll() is None
        assert all(alive(pid) for pid in memory_reader)
        async with http_session(url, mode="legacy") as again:
            fresh = await call(again, "scroll_python", source="print('x' in dir())")
            assert text(fresh).startswith("stdout:\nFalse")
