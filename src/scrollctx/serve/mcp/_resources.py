"""The MCP server's resources (sessions, a session, an event, an index) and its prompt.

Resources are read-only views of the same ``ms`` calls as the tools, as JSON (the index as
text). A session id may contain ``/`` or ``:`` (``beam:100K/1:b3``): clients percent-encode it
in the URI, and it is matched against the log by value only (it never names a file).
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import ResourceSecurity

from scrollctx.serve.mcp._tools import index_text, jsonable

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from scrollctx.serve.mcp._server import Door

__all__ = ["package_text", "register_resources"]

_BY_VALUE = ResourceSecurity(exempt_params={"session_id"})


def package_text(name: str) -> str:
    """A text file shipped with this package (the prompt, the server's instructions)."""
    return files("scrollctx.serve.mcp").joinpath(name).read_text(encoding="utf-8").strip()


def _json(data: Any) -> str:
    return json.dumps(jsonable(data), ensure_ascii=False)


def register_resources(server: MCPServer[Any], door: Door) -> None:
    """Add the resources and the ``scroll_recall_rules`` prompt to ``server``."""
    memory = door.memory

    @server.resource("scroll://sessions", mime_type="application/json")
    def sessions() -> str:
        """Every session in the store, oldest first, with its seq span and event count."""
        rows, notes = memory.read(lambda ms: ms.sessions(all_agents=True))
        return _json({"sessions": list(rows), "notes": notes})

    @server.resource(
        "scroll://session/{session_id}{?after_seq}", mime_type="application/json",
        security=_BY_VALUE,
    )  # fmt: skip
    def session(session_id: str, after_seq: int = 0) -> str:
        """One session's events, oldest first (at most 1000; continue with ?after_seq=SEQ)."""
        rows, notes = memory.read(lambda ms: ms.session(session_id, after_seq=after_seq))
        if not rows and not rows.partial and after_seq == 0:
            raise ResourceNotFoundError(f"no session {session_id!r} in this store")
        return _json({"events": list(rows), "notes": notes, "partial": rows.partial})

    @server.resource("scroll://event/{seq}", mime_type="application/json")
    def event(seq: int) -> str:
        """One event by seq, whole (a large tool output read back)."""
        rows, _ = memory.read(lambda ms: ms.expand([seq]))
        if not rows:
            raise ResourceNotFoundError(f"no event at seq {seq}")
        return _json(rows[0])

    @server.resource("scroll://index/{session_id}", mime_type="text/plain", security=_BY_VALUE)
    def index(session_id: str) -> str:
        """A Scroll agent session's eviction index: headlines and the seq span of each block."""
        data, _ = memory.read(lambda ms: ms.index(session_id))
        return index_text(data)

    @server.prompt(name="scroll_recall_rules")
    def recall_rules() -> str:
        """Rules that make an agent recall from its Scroll history before it answers or redoes."""
        return package_text("recall_rules.md")
