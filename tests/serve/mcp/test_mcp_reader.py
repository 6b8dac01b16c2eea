"""The memory tools of ``scroll mcp`` run in a memory reader process, never in the server.

A query bomb through ``scroll_sql`` costs the reader (a one-line tool error; a fresh reader
answers the next call), never the server's memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_helpers import call, http_server, http_session, text

from procs import descendants

pytestmark = pytest.mark.anyio

BOMBS = [
    ("SELECT randomblob(400000000) AS b", "string or blob too big"),
    ("SELECT length(randomblob(300000000)) AS n", "too big"),
]


def peak_rss(pid: int) -> int:
    """The most memory ``pid`` has held so far (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def store_fds(pid: int, db: Path) -> int:
    """How many of ``pid``'s open files are the store's database files."""
    prefix = str(db.resolve())
    found = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found += str(fd.resolve()).startswith(prefix)
        except OSError:  # closed meanwhile
            pass
    return found


async def test_query_bombs_cost_the_reader_not_the_server(beam_store: Path, tmp_path: Path) -> None:
    db = beam_store / "history.db"
    with http_server(beam_store, "--read-only", errlog=tmp_path / "err") as (url, server):
        async with http_session(url) as client:
            warm = await call(client, "scroll_search", query="Flask", k=3)
            assert not warm.is_error, text(warm)
            before = peak_rss(server.pid)
            for sql, said in BOMBS:
                result = await call(client, "scroll_sql", sql=sql)
                assert result.is_error and said in text(result), text(result)
                assert "\n" not in text(result)
                after = await call(client, "scroll_search", query="Flask", k=3)
                assert not after.is_error and after.structured_content["hits"]
            assert peak_rss(server.pid) - before < 64 * 1024**2
            readers = [pid for pid in descendants(server.pid) if store_fds(pid, db)]
            assert readers, "a reader process should hold the store open"
        assert server.poll() is None
