"""An MCP client that dies mid-cell: run as ``python crashing_client.py STORE``.

It starts ``scroll mcp`` over stdio with the SDK client, runs ``x = 1``, prints ``SERVER <pid>``
and then starts a cell that never ends; the test kills this process outright (SIGKILL), so the
server sees its stdin close with nobody left to stop it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

SCROLL = str(Path(sys.executable).with_name("scroll"))


def child_server() -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == os.getpid():
                return int(entry.name)
    raise SystemExit("no server process")


async def main(store: str) -> None:
    params = StdioServerParameters(command=SCROLL, args=["mcp", "--store", store],
                                   env={"HOME": os.environ["HOME"]})  # fmt: skip
    async with Client(stdio_client(params, errlog=sys.stderr)) as client:
        await client.call_tool("scroll_python", {"source": "x = 1"})
        print("SERVER", child_server(), flush=True)
        await client.call_tool("scroll_python", {"source": "while True:\n    pass"})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
