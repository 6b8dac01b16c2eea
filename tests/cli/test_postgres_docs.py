"""docs/postgres.md's role setup, run as written against a real server.

The page's two ``sql`` blocks (as a superuser, then as the owner after its first open) must
give a writer that appends but can neither update nor delete, even with the triggers disabled,
and a reader that syncs a replica and searches it but cannot append.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from needs import import_or_missing
from postgres_server import PostgresServer
from scrollctx.errors import StoreAccessDenied
from scrollctx.log import Kind, NewEvent
from scrollctx.surface import open_surface

DOCS = Path(__file__).resolve().parents[2] / "docs" / "postgres.md"


def _sql_blocks() -> list[list[str]]:
    blocks = re.findall(r"```sql\n(.*?)```", DOCS.read_text(), re.DOTALL)
    return [[s.strip() for s in block.split(";") if s.strip()] for block in blocks]


def test_the_documented_roles_hold(postgres_server: PostgresServer, tmp_path: Path) -> None:
    psycopg = import_or_missing("psycopg")
    from scrollctx.log._postgres import PostgresEventStore

    as_superuser, as_owner = _sql_blocks()
    with postgres_server.admin() as admin:
        for statement in as_superuser:
            admin.execute(statement)
    owner_url = postgres_server.url("team", "scroll_owner", "change-me-owner")
    writer_url = postgres_server.url("team", "scroll_writer", "change-me-writer")
    reader_url = postgres_server.url("team", "scroll_reader", "change-me-reader")
    PostgresEventStore.open(owner_url, replica_path=tmp_path / "o" / "history.db").close()
    with psycopg.connect(owner_url, autocommit=True) as owner:
        for statement in as_owner:
            owner.execute(statement)
    with PostgresEventStore.open(writer_url, replica_path=tmp_path / "w" / "history.db") as w:
        w.append(NewEvent(session_id="s", kind=Kind.CONVERSATION, content="the otter swims"))
        w.append(NewEvent(session_id="s", kind=Kind.TOOL_RESULT, content="big " * 10_000))
    with psycopg.connect(owner_url, autocommit=True) as owner:
        owner.execute("ALTER TABLE conversation_history DISABLE TRIGGER USER")
        try:
            with psycopg.connect(writer_url, autocommit=True) as writer:
                for sql in (
                    "UPDATE conversation_history SET content = 'x'",
                    "DELETE FROM conversation_history",
                    "DELETE FROM payloads",
                ):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        writer.execute(sql)
        finally:
            owner.execute("ALTER TABLE conversation_history ENABLE TRIGGER USER")
    with PostgresEventStore.open(reader_url, replica_path=tmp_path / "r" / "history.db") as r:
        assert r.refresh() == 2
        with open_surface(r.path) as ms:
            assert [hit["content"] for hit in ms.search("otter")] == ["the otter swims"]
        with pytest.raises(StoreAccessDenied, match="may not append"):
            r.append(NewEvent(session_id="s", kind=Kind.CONVERSATION, content="nope"))
