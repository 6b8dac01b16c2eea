"""Drive a real ``scroll mcp`` with the official SDK client, over stdio and streamable HTTP."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from procs import wait_for

SCROLL = str(Path(sys.executable).with_name("scroll"))
"""The installed console script: the tests run the command a user runs."""


def text(result: CallToolResult) -> str:
    """The text a model reads from a tool result."""
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def server_env() -> dict[str, str]:
    """The test's environment (HOME under tmp_path) for a server subprocess."""
    return {key: value for key, value in os.environ.items() if key in ("HOME", "PATH", "TMPDIR")}


@asynccontextmanager
async def stdio_session(
    store: Path | str, *args: str, errlog: Path, mode: str = "auto", **env: str
) -> AsyncIterator[Client]:
    """A client connected to ``scroll mcp --store STORE ARGS`` started over stdio."""
    params = StdioServerParameters(
        command=SCROLL, args=["mcp", "--store", str(store), *args], env=server_env() | env
    )
    with errlog.open("a") as err:
        async with Client(stdio_client(params, errlog=err), mode=mode) as client:
            yield client


@contextmanager
def http_server(
    store: Path, *args: str, errlog: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``scroll mcp --http 127.0.0.1:0`` in a subprocess; yields its URL and the process."""
    command = [SCROLL, "mcp", "--store", str(store), "--http", "127.0.0.1:0", *args]
    with errlog.open("ab") as err:
        proc = subprocess.Popen(command, stderr=err, env=server_env())
    try:
        wait_for(lambda: "serving http://" in errlog.read_text() or proc.poll() is not None,
                 "the server to listen")  # fmt: skip
        line = next((ln for ln in errlog.read_text().splitlines() if "serving http://" in ln), "")
        assert line, errlog.read_text()
        yield line.split()[-1], proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@asynccontextmanager
async def http_session(
    url: str, *, token: str | None = None, mode: str = "auto"
) -> AsyncIterator[Client]:
    """A client of the streamable HTTP server at ``url``, sending ``token`` if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


def store_digest(store: Path) -> dict[str, str]:
    """sha256 of every file of a store (the SQLite shared-memory index aside: readers write it)."""
    return {
        str(path.relative_to(store)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(store.rglob("*"))
        if path.is_file() and not path.name.endswith("-shm")
    }


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition`` off the event loop, so the client's own tasks keep running."""
    await anyio.to_thread.run_sync(partial(wait_for, condition, what))


async def call(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    """Call ``tool`` and return its result (errors included)."""
    return await client.call_tool(tool, arguments)
