"""An MCP server (official SDK) whose tools misbehave: run as ``python faulty_server.py``.

``echo(text)`` answers with text; ``crash()`` kills the server process mid-call (exit code 3,
after a line on stderr); ``hang()`` never answers. With ``--silent`` the process never speaks
MCP at all: it reads nothing and answers nothing, like a server stuck before its handshake.
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("faulty")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the text unchanged (as text content only)."""
    return text


@server.tool()
def crash() -> str:
    """Kill this server while the call is in flight."""
    print("faulty: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never return."""
    import anyio

    await anyio.sleep_forever()
    return "unreachable"


if __name__ == "__main__":
    if "--silent" in sys.argv:
        time.sleep(3600)
    server.run()
