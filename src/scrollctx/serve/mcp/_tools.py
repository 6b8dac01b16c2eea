"""The MCP server's memory tools: search, expand, SQL, sessions, index, append, ingest.

Each tool is a thin call of :class:`~scrollctx.serve.mcp._memory.Memory` (so of ``ms``). Its
docstring is the description the client's model reads: what the tool is for, what it returns,
how to page. Every result has two forms: text for the model (one JSON object per row, then the
``[note] …`` lines of the call) and the same data as structured content. Failures are raised as
scrollctx errors and become one-line tool errors in the server (:mod:`._server`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from scrollctx.errors import UsageError
from scrollctx.serve.mcp._memory import APPEND_KINDS
from scrollctx.surface import format_notes
from scrollctx.view import EvictionIndex

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from scrollctx.serve.mcp._server import Door

__all__ = ["WRITE_TOOLS", "index_text", "jsonable", "register_memory_tools", "tool_result"]

WRITE_TOOLS = frozenset({"scroll_append", "scroll_ingest"})
"""The tools that write the store; a --read-only server does not offer them."""

_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                         open_world_hint=False)  # fmt: skip
_EXPAND_BYTES = 60_000
_SPAN_ROWS = 200

Seq = Annotated[int, Field(ge=1, description="An event's seq (its permanent address).")]
KindFilter = Annotated[
    str | list[str] | None, Field(description="Only events of this kind (or these kinds).")
]


def tool_result(text: str, data: Mapping[str, Any], *, error: bool = False) -> CallToolResult:
    """A tool result: ``text`` for the model, ``data`` as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=jsonable(dict(data)),
        is_error=error,
    )


def index_text(index: Mapping[str, Any]) -> str:
    """An eviction index (``ms.index()`` data) as the model reads it."""
    if not index.get("tiers"):
        return "(nothing evicted)"
    try:
        return EvictionIndex.from_data(dict(index)).render()
    except (KeyError, TypeError, ValueError):  # written by something other than the view
        shown = json.dumps(jsonable(index["tiers"]), ensure_ascii=False)
        return f"[note] this index is not in the view's format; its tiers as stored:\n{shown}"


def _rows_text(rows: Iterable[Mapping[str, Any]], notes: list[str], empty: str) -> str:
    lines = [json.dumps(jsonable(dict(row)), ensure_ascii=False) for row in rows]
    body = "\n".join(lines) or empty
    return body + (f"\n{format_notes(notes)}" if notes else "")


def register_memory_tools(server: MCPServer[Any], door: Door) -> None:
    """Add the memory tools to ``server`` (the write tools only when the door may write)."""
    memory = door.memory

    @server.tool(annotations=_READ)
    def scroll_search(
        query: Annotated[str, Field(min_length=1, description="Words to find (see above).")],
        k: Annotated[int, Field(ge=1, le=200, description="How many hits.")] = 10,
        kind: KindFilter = None,
        role: Annotated[
            str | list[str] | None, Field(description="Only this role: user, assistant, tool.")
        ] = None,
        session_id: Annotated[str | None, Field(description="Only this session.")] = None,
        seq_from: Annotated[int | None, Field(description="Only seq >= this.")] = None,
        seq_to: Annotated[int | None, Field(description="Only seq <= this.")] = None,
        created_from: Annotated[
            str | None, Field(description="Only events on or after this ISO date.")
        ] = None,
        created_to: Annotated[
            str | None, Field(description="Only events on or before this ISO date (inclusive).")
        ] = None,
        mode: Annotated[
            Literal["bm25", "semantic", "hybrid"] | None,
            Field(description="bm25: words; semantic: meaning (needs `scroll embed`); hybrid."),
        ] = None,
        chars: Annotated[
            int, Field(ge=0, le=20_000, description="Characters of each hit's content.")
        ] = 300,
    ) -> CallToolResult:
        """Search your lossless history (every past session in this Scroll store); best first.

        Query language: words are AND-combined; uppercase OR / AND / NOT are operators;
        "exact phrase"; prefix*. Anything else is literal text. If fewer than k rows match
        every word, an OR pass fills up and marks its rows broadened=true (leads to verify).
        Returns one hit per line: seq, session_id, step_index, kind, role, created_at, date,
        headline, snippet («match» in context), content (first `chars` characters), metadata.
        Search with a few concrete words, one entity at a time; raise k only when needed.
        Read a hit whole with scroll_expand(seqs=[seq]); its neighbours with lo/hi.
        Example: scroll_search(query="sprint Jira", k=5, role="user")
        """
        span = None if seq_from is None and seq_to is None else (seq_from, seq_to)
        options: dict[str, Any] = {
            "kind": kind, "role": role, "session_id": session_id, "seq_range": span,
            "created_from": created_from, "created_to": created_to, "mode": mode, "chars": chars,
        }  # fmt: skip
        hits, notes = memory.read(lambda ms: ms.search(query, k, all_agents=True, **options))
        data = {"hits": list(hits), "notes": notes, "partial": hits.partial}
        return tool_result(_rows_text(hits, notes, "(no hits)"), data)

    @server.tool(annotations=_READ)
    def scroll_expand(
        seqs: Annotated[
            list[Seq] | None, Field(min_length=1, description="Events to return, by seq.")
        ] = None,
        lo: Annotated[int | None, Field(ge=1, description="First seq of a span.")] = None,
        hi: Annotated[
            int | None, Field(ge=1, description="Last seq of a span (inclusive).")
        ] = None,
        max_bytes: Annotated[
            int, Field(ge=1_000, le=1_000_000, description="Bytes of events per page.")
        ] = _EXPAND_BYTES,
    ) -> CallToolResult:
        """Return whole events (full content, large tool outputs read back) in seq order.

        Pass seqs=[...] or a span lo..hi (inclusive). A page holds at most max_bytes; when
        more events remain, the result's `more` holds the arguments of the next page: call
        scroll_expand again with them. One event larger than a page comes back cut, with a
        note saying how much is hidden (read it in slices with scroll_python).
        Example: scroll_expand(seqs=[812, 815]) or scroll_expand(lo=800, hi=830)
        """
        rows, notes, more = _expand_page(door, seqs, lo, hi, max_bytes)
        data = {"events": rows, "more": more, "notes": notes}
        text = _rows_text(rows, notes, "(no events)")
        if more is not None:
            text += f"\n[more] next page: scroll_expand({_call_args(more)})"
        return tool_result(text, data)

    @server.tool(annotations=_READ)
    def scroll_sql(
        sql: Annotated[str, Field(min_length=1, description="One read-only SQL statement.")],
        params: Annotated[
            list[str | int | float | None] | None, Field(description="Values for ? markers.")
        ] = None,
    ) -> CallToolResult:
        """Run one read-only SQL statement over the history; at most 1000 rows come back.

        Table hist.conversation_history: seq, session_id, agent_id, run_id, task_id,
        step_index, msg_index, kind, role, name, content, headline, label, tool_call_id,
        tool_input, tool_state, metadata (JSON), created_at (ISO-8601 text, sorts as it reads),
        payload_sha256, payload_size; full-text index hist.conversation_history_fts. Bind values
        with ? and params. More than 1000 rows: the first 1000 come back, truncated=true and a
        note say so -- page with LIMIT/OFFSET or narrow with WHERE. Writes are refused.
        Example: scroll_sql(sql="SELECT seq, role, substr(content, 1, 200) AS text FROM
        hist.conversation_history WHERE created_at >= ? ORDER BY seq LIMIT 50",
        params=["2024-07-01"])
        """
        rows, notes = memory.read(lambda ms: ms.sql_query(sql, params))
        data = {"rows": list(rows), "notes": notes, "truncated": rows.truncated,
                "partial": rows.partial}  # fmt: skip
        return tool_result(_rows_text(rows, notes, "(no rows)"), data)

    @server.tool(annotations=_READ)
    def scroll_sessions() -> CallToolResult:
        """List the sessions in the store, oldest first: session_id, task_id, events,
        first_seq, last_seq, first_created_at, last_created_at, first_step, last_step.

        Use a session_id to filter scroll_search, read it in order with scroll_expand(lo=
        first_seq, hi=last_seq), or see its eviction index with scroll_index.
        Example: scroll_sessions()
        """
        rows, notes = memory.read(lambda ms: ms.sessions(all_agents=True))
        data = {"sessions": list(rows), "notes": notes, "partial": rows.partial}
        return tool_result(_rows_text(rows, notes, "(no sessions)"), data)

    @server.tool(annotations=_READ)
    def scroll_index(
        session_id: Annotated[str, Field(min_length=1, description="The session to show.")],
    ) -> CallToolResult:
        """Show a Scroll agent session's eviction index: what left its working view, and where.

        Tiers of headlines, each block with the seq span it stands for (recover one with
        scroll_expand(lo=..., hi=...)). Returned as text and as data (tiers of blocks).
        Sessions that never evicted anything have an empty index.
        Example: scroll_index(session_id="chat-1a2b3c4d5e6f")
        """
        index, notes = memory.read(lambda ms: ms.index(session_id))
        text = index_text(index)
        if notes:
            text += f"\n{format_notes(notes)}"
        return tool_result(text, {"session_id": session_id, **index, "text": text})

    if door.read_only:
        return

    @server.tool(annotations=_WRITE)
    def scroll_append(
        session_id: Annotated[str, Field(min_length=1, max_length=200, description="Session.")],
        content: Annotated[
            str, Field(max_length=4_000_000, description="The text to remember, verbatim.")
        ],
        kind: Annotated[
            Literal[APPEND_KINDS], Field(description="What the event is.")  # type: ignore[valid-type]
        ] = "note",
        role: Annotated[
            Literal["user", "assistant", "tool"] | None, Field(description="Who said it.")
        ] = None,
        key: Annotated[
            str | None,
            Field(max_length=200, description="Your idempotency key: a repeat adds nothing."),
        ] = None,
        headline: Annotated[
            str | None, Field(max_length=500, description="A one-line summary.")
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="JSON data to keep with it.")
        ] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Write one event into your history: a note, a decision, a message or a tool result.

        It is stored verbatim at a new permanent seq and becomes searchable at once. Pass a
        key (unique within the session) to make retries safe: appending the same key again
        adds nothing and returns the first event's seq (added=false).
        Example: scroll_append(session_id="project-x", content="Chose SQLite over Postgres
        for the prototype: one file, no server.", kind="decision", key="db-choice")
        """
        client = _client_name(ctx)
        extra = {**(metadata or {}), "via": "mcp", **({"client": client} if client else {})}
        appended = memory.append(
            session_id, content, kind=kind, role=role, name=client, key=key,
            headline=headline, metadata=extra,
        )  # fmt: skip
        verb = "appended" if appended.added else "already there (same key)"
        text = f"{verb}: seq {appended.seq} in session {appended.session_id}"
        return tool_result(text, {"seq": appended.seq, "session_id": session_id,
                                  "added": appended.added})  # fmt: skip

    @server.tool(annotations=_WRITE)
    def scroll_ingest(
        path: Annotated[
            str, Field(min_length=1, description="A transcript file in an allowed folder.")
        ],
        format: Annotated[str, Field(description="auto, or an importer's name.")] = "auto",
    ) -> CallToolResult:
        """Import a transcript file (Claude Code, Codex CLI, Gemini CLI, ChatGPT export, Aider,
        OpenAI-style chat JSON) into the history; re-importing adds only what is new.

        Only files inside the folders the server operator allow-listed (--ingest-dir) can be
        read; a path is resolved (symlinks too) before that check. Returns what was added.
        Example: scroll_ingest(path="~/.claude/projects/app/0b7c.jsonl")
        """
        report = memory.ingest(path, format=format)
        text = (
            f"imported {report['path']} ({report['format']}): {report['events_added']} events "
            f"added, {report['events_skipped']} already there, {report['sessions']} sessions"
        )
        if report["problems"]:
            text += "\n" + "\n".join(f"[note] {p}" for p in report["problems"])
        return tool_result(text, report)


def _expand_page(
    door: Door, seqs: list[int] | None, lo: int | None, hi: int | None, max_bytes: int
) -> tuple[list[dict[str, Any]], list[str], dict[str, Any] | None]:
    """One page of events of at most ``max_bytes``, and the arguments of the next page."""
    if (seqs is None) == (lo is None and hi is None) or (lo is None) != (hi is None):
        raise UsageError("scroll_expand takes seqs=[...] or both lo and hi, not both or neither")
    if seqs is not None:
        wanted = sorted(set(seqs))
        chunk = wanted[:_SPAN_ROWS]
        rows, notes = door.memory.read(lambda ms: ms.expand(chunk))
        top = chunk[-1]
    else:
        first, last = sorted((int(lo or 0), int(hi or 0)))
        top = min(last, first + _SPAN_ROWS - 1)
        rows, notes = door.memory.read(lambda ms: ms.expand(first, top))
    page: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        size = len(json.dumps(jsonable(row), ensure_ascii=False).encode("utf-8"))
        if page and used + size > max_bytes:
            break
        if size > max_bytes:
            row = _cut_content(row, max_bytes, notes)
        page.append(row)
        used += size
    if len(page) < len(rows):
        reached = page[-1]["seq"]
    elif rows.partial:  # a budget of ms stopped early: continue after its last row
        reached = rows[-1]["seq"] if rows else top
    else:
        reached = top
    if seqs is not None:
        rest = [s for s in wanted if s > reached]
        return page, notes, {"seqs": rest} if rest else None
    return page, notes, {"lo": reached + 1, "hi": last} if reached < last else None


def _cut_content(row: dict[str, Any], max_bytes: int, notes: list[str]) -> dict[str, Any]:
    content = str(row.get("content") or "")
    keep = max_bytes // 2  # characters: room for the other fields and multi-byte text
    seq = row["seq"]
    notes.append(
        f"seq {seq} is larger than a page: its content was cut after {keep:,} characters and "
        f"{len(content) - keep:,} are hidden; read the rest in slices with scroll_python, "
        f"e.g. print(ms.expand({seq})[0]['content'][{keep}:{keep + 20_000}])"
    )
    return {**row, "content": content[:keep], "content_cut": True}


def _call_args(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in args.items())


def _client_name(ctx: Context | None) -> str | None:
    if ctx is None:
        return None
    try:
        params = ctx.session.client_params
    except ValueError:  # no request context (called outside a request)
        return None
    return params.client_info.name[:100] if params is not None else None


def jsonable(value: Any) -> Any:
    """``value`` with bytes as ``{"base64": ...}`` and other non-JSON leaves as text."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
