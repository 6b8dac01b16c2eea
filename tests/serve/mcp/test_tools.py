"""Every tool, resource and the prompt of ``scroll mcp`` on an ingested BEAM store, driven by
the official SDK client over stdio and streamable HTTP, in both protocol eras
(2026-07-28 and the 2025 handshake)."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from mcp import Client
from mcp_helpers import call, http_server, http_session, stdio_session, text

from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import open_surface
from scrollctx.view import INDEX_KIND, EvictionIndex, IndexBlock, IndexLine

pytestmark = pytest.mark.anyio

TOOLS = {"scroll_search", "scroll_expand", "scroll_sql", "scroll_sessions", "scroll_index",
         "scroll_python", "scroll_append", "scroll_ingest"}  # fmt: skip
B1 = "beam:100K/1:b1"
TRANSCRIPT = "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def add_index(store: Path, session_id: str) -> EvictionIndex:
    """Append the eviction index a view would write after evicting two spans of a session."""
    index = EvictionIndex(4, session_id)
    index.add(IndexBlock([IndexLine(1, 4, "turn", "set up the budget tracker")]), 4)
    index.add(IndexBlock([IndexLine(5, 9, "user", "user: add analytics")]), 5)
    with EventLog.open(store / "history.db") as log:
        log.append(NewEvent(session_id=session_id, kind=INDEX_KIND, content="index",
                            metadata=index.to_data(), searchable=False))  # fmt: skip
    return index


@pytest.fixture
def allowed(tmp_path: Path, transcripts: Path) -> Path:
    """A folder the server may import from, holding one real Claude Code transcript."""
    folder = tmp_path / "allowed"
    folder.mkdir()
    shutil.copy(transcripts / TRANSCRIPT, folder / "session.jsonl")
    (folder / "escape.jsonl").symlink_to(transcripts / TRANSCRIPT)
    return folder


@asynccontextmanager
async def connected(
    transport: str, store: Path, *args: str, errlog: Path, mode: str
) -> AsyncIterator[Client]:
    """The SDK client on a real ``scroll mcp STORE ARGS`` over ``transport``."""
    if transport == "stdio":
        async with stdio_session(store, *args, errlog=errlog, mode=mode) as client:
            yield client
        return
    with http_server(store, *args, errlog=errlog) as (url, _):
        async with http_session(url, mode=mode) as client:
            yield client


@pytest.mark.parametrize(
    "transport,mode", [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto"), ("http", "legacy")]
)
async def test_every_tool_on_a_beam_store(
    beam_store: Path, allowed: Path, tmp_path: Path, transport: str, mode: str
) -> None:
    add_index(beam_store, "chat-indexed")
    with open_surface(beam_store / "history.db") as ms:
        expected = {row["seq"]: row["content"] for row in ms.expand(1, 60)}
    args = ("--ingest-dir", str(allowed))
    errlog = tmp_path / "err"
    async with connected(transport, beam_store, *args, errlog=errlog, mode=mode) as client:
        listed = (await client.list_tools()).tools
        assert {tool.name for tool in listed} == TOOLS
        assert all(tool.description and "Example" in tool.description for tool in listed)

        hits = await call(client, "scroll_search", query="Flask budget tracker", k=3)
        assert not hits.is_error
        rows = [json.loads(line) for line in text(hits).splitlines()]
        assert [r["seq"] for r in rows] == [h["seq"] for h in hits.structured_content["hits"]]
        assert {97, 98} <= {r["seq"] for r in rows}
        only_b1 = await call(client, "scroll_search", query="budget", session_id=B1, role="user")
        assert {h["session_id"] for h in only_b1.structured_content["hits"]} == {B1}

        page = await call(client, "scroll_expand", seqs=[98, 97])
        assert [e["seq"] for e in page.structured_content["events"]] == [97, 98]
        seen, pages, args_ = [], 0, {"lo": 1, "hi": 60, "max_bytes": 24_000}
        while args_ is not None:  # every event larger than nothing but the page: none is cut
            result = await call(client, "scroll_expand", **args_)
            events, pages = result.structured_content["events"], pages + 1
            assert len(json.dumps(events, ensure_ascii=False).encode()) <= 24_000
            seen += [(e["seq"], e["content"]) for e in events]
            more = result.structured_content["more"]
            args_ = {**more, "max_bytes": 24_000} if more else None
        assert pages > 5 and dict(seen) == expected and [s for s, _ in seen] == list(range(1, 61))
        big = max(expected, key=lambda seq: len(expected[seq]))
        cut = await call(client, "scroll_expand", seqs=[big, big + 1], max_bytes=2000)
        (event,) = cut.structured_content["events"]
        assert event["content_cut"] and expected[big].startswith(event["content"])
        assert cut.structured_content["more"] == {"seqs": [big + 1]}
        assert f"print(ms.expand({big})[0]['content'][1000:" in text(cut)

        counts = await call(client, "scroll_sql", sql="SELECT session_id, count(*) AS n FROM "
                            "hist.conversation_history WHERE kind = ? GROUP BY session_id",
                            params=["conversation"])  # fmt: skip
        assert [r["n"] for r in counts.structured_content["rows"]] == [60, 56, 72]
        many = await call(client, "scroll_sql", sql="SELECT a.seq FROM hist.conversation_history"
                          " AS a, (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL "
                          "SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6)")  # fmt: skip
        assert many.structured_content["truncated"] and len(many.structured_content["rows"]) == 1000
        assert "1000-row cap" in text(many) and "LIMIT/OFFSET" in text(many)

        sessions = await call(client, "scroll_sessions")
        names = [s["session_id"] for s in sessions.structured_content["sessions"]]
        assert names[:3] == [B1, "beam:100K/1:b2", "beam:100K/1:b3"]

        indexed = await call(client, "scroll_index", session_id="chat-indexed")
        assert "seq 1-4" in text(indexed) and "== tier 0 ==" in text(indexed)
        assert [t["tier"] for t in indexed.structured_content["tiers"]] == [0]
        assert text(await call(client, "scroll_index", session_id=B1)) == "(nothing evicted)"

        first = await call(client, "scroll_python", source="hits = ms.search('Flask', k=5)")
        assert not first.is_error and "hits: ResultRows" in text(first)
        handle = first.structured_content["session"]  # minted over HTTP 2026-07-28 only
        assert (handle is not None) == (transport == "http" and mode == "auto")
        kernel = {"session": handle} if handle else {}
        second = await call(client, "scroll_python",
                            source="print(sorted(h['seq'] for h in hits))", **kernel)  # fmt: skip
        assert text(second).startswith("stdout:\n[")

        note = {"session_id": "notes", "content": "Chose SQLite for the prototype", "key": "db"}
        added = await call(client, "scroll_append", kind="decision", **note)
        again = await call(client, "scroll_append", kind="decision", **note)
        assert added.structured_content["added"] and not again.structured_content["added"]
        assert added.structured_content["seq"] == again.structured_content["seq"]
        found = await call(client, "scroll_search", query="prototype SQLite", kind="decision")
        assert [h["seq"] for h in found.structured_content["hits"]] == [
            added.structured_content["seq"]]  # fmt: skip

        imported = await call(client, "scroll_ingest", path=str(allowed / "session.jsonl"))
        assert not imported.is_error and imported.structured_content["events_added"] > 0
        escaped = await call(client, "scroll_ingest", path=str(allowed / "escape.jsonl"))
        assert escaped.is_error and "outside the folders" in text(escaped)


async def test_resources_and_the_prompt(beam_store: Path, tmp_path: Path) -> None:
    add_index(beam_store, "chat/indexed:1")
    async with stdio_session(beam_store, errlog=tmp_path / "err") as client:
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        assert templates == {"scroll://session/{session_id}{?after_seq}", "scroll://event/{seq}",
                             "scroll://index/{session_id}"}  # fmt: skip

        async def read(uri: str) -> str:
            contents = (await client.read_resource(uri)).contents
            return contents[0].text  # type: ignore[union-attr]

        listed = json.loads(await read("scroll://sessions"))["sessions"]
        assert [s["session_id"] for s in listed][:3] == [B1, "beam:100K/1:b2", "beam:100K/1:b3"]
        session = json.loads(await read(f"scroll://session/{quote(B1, safe='')}"))
        assert [e["seq"] for e in session["events"]] == list(range(1, 61))
        rest = json.loads(await read(f"scroll://session/{quote(B1, safe='')}?after_seq=58"))
        assert [e["seq"] for e in rest["events"]] == [59, 60]
        event = json.loads(await read("scroll://event/97"))
        assert event["seq"] == 97 and "Flask" in event["content"]
        index = await read(f"scroll://index/{quote('chat/indexed:1', safe='')}")
        assert "seq 5-9" in index
        for missing in ("scroll://event/99999", "scroll://session/nope"):
            with pytest.raises(Exception, match="no event at seq 99999|no session 'nope'"):
                await read(missing)

        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["scroll_recall_rules"]
        rules = (await client.get_prompt("scroll_recall_rules")).messages[0].content
        assert "scroll_search" in rules.text and "scroll_python" in rules.text  # type: ignore[union-attr]
