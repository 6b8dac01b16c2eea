"""``scroll mcp --store postgresql://…``: a shared store served through this host's replica,
brought up to date before every read, so another host's new rows are found at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_helpers import call, stdio_session, text

from scrollctx.config import resolve_config
from scrollctx.log import NewEvent, open_store

pytestmark = pytest.mark.anyio


async def test_a_shared_store_is_served_current(postgres_url: str, tmp_path: Path) -> None:
    other_host = open_store(resolve_config(postgres_url, environ={
        "SCROLL_LOCAL_DIR": str(tmp_path / "other")}))  # fmt: skip
    try:
        other_host.append(
            NewEvent(session_id="team", kind="note", content="the deploy key rotates")
        )
        local = {"SCROLL_LOCAL_DIR": str(tmp_path / "here")}
        async with stdio_session(postgres_url, errlog=tmp_path / "err", **local) as client:
            found = await call(client, "scroll_search", query="deploy key")
            assert [h["content"] for h in found.structured_content["hits"]] == [
                "the deploy key rotates"]  # fmt: skip
            mine = await call(client, "scroll_append", session_id="team", content="rotated on Mon")
            assert not mine.is_error, text(mine)
            other_host.append(NewEvent(session_id="team", kind="note", content="and on Thursday"))
            later = await call(client, "scroll_python", source="print(len(ms.session('team')))")
            assert text(later).startswith("stdout:\n3")  # the kernel reads the current replica
            again = await call(client, "scroll_search", query="Thursday")
            assert len(again.structured_content["hits"]) == 1
        other_host.refresh()
        contents = [event.content for event in other_host.session_events("team")]
        assert "rotated on Mon" in contents  # the append went to the shared store
    finally:
        other_host.close()
