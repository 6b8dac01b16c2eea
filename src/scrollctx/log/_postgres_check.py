"""What ``scroll stats`` and ``scroll doctor`` say about a PostgreSQL store.

:func:`shared_facts` is cheap: the server, the migrations, the head, the replica's lag.
:func:`verify_shared` reads everything, like the SQLite check (``_check``), and reports in the
same :class:`StoreCheck` shape: the server-side invariants (migrations applied, no row above the
head, every payload's bytes matching its name) stand where SQLite's ``quick_check`` stands,
then every row's checksum; damage is named by seq, never repaired. Both only read.
"""

from __future__ import annotations

import functools
from typing import Any

from psycopg.rows import dict_row

from scrollctx.log._check import Damage, StoreCheck
from scrollctx.log._integrity import CHECKSUM_COLUMNS, stored_checksum
from scrollctx.log._postgres import Connection, PostgresEventStore
from scrollctx.log._postgres_schema import MIGRATIONS, pending_migrations

__all__ = ["shared_facts", "verify_shared"]

_CHUNK = 2000
_ROWS = (
    f"SELECT {', '.join(CHECKSUM_COLUMNS)}, checksum FROM conversation_history "
    f"WHERE seq > %s ORDER BY seq LIMIT {_CHUNK}"
)


def shared_facts(store: PostgresEventStore) -> dict[str, Any]:
    """Return the connection, migrations, head, payload totals and replica lag of ``store``."""

    def read(conn: Connection) -> dict[str, Any]:
        server = conn.execute("SHOW server_version").fetchone()
        user = conn.execute("SELECT current_user, current_database()").fetchone()
        head = conn.execute("SELECT last_seq FROM log_head").fetchone()
        payloads = conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM payloads").fetchone()
        pending = pending_migrations(conn)
        return {
            "server": store.where,
            "server_version": server[0] if server else None,
            "user": user[0] if user else None,
            "database": user[1] if user else None,
            "migrations": len(MIGRATIONS) - len(pending),
            "migrations_pending": pending,
            "last_seq": int(head[0]) if head else 0,
            "payload_rows": int(payloads[0]) if payloads else 0,
            "payload_bytes": int(payloads[1]) if payloads else 0,
        }

    facts = store._run("read", read)
    replica_seq = store.replica.log.last_seq()
    facts["replica"] = {
        "path": str(store.path),
        "last_seq": replica_seq,
        "lag": max(0, facts["last_seq"] - replica_seq),
    }
    return facts


def verify_shared(store: PostgresEventStore) -> StoreCheck:
    """Check the whole shared log read-only; report damage by seq (see the module doc)."""
    report = StoreCheck(store.where)
    report.quick_check = store._run("check", _server_invariants) or ["ok"]
    after = 0
    while True:
        rows = store._run("check", functools.partial(_rows_after, after=after))
        if not rows:
            break
        for row in rows:
            if stored_checksum(row) != row["checksum"]:
                report.damage.append(Damage(row["seq"], "checksum", "the row does not match it"))
        report.events += len(rows)
        after = rows[-1]["seq"]
    report.payload_files = store._run("check", _payload_rows)
    return report


def _payload_rows(conn: Connection) -> int:
    row = conn.execute("SELECT count(*) FROM payloads").fetchone()
    return int(row[0]) if row else 0


def _server_invariants(conn: Connection) -> list[str]:
    problems = [f"migration {name} not applied" for name in pending_migrations(conn)]
    above = conn.execute(
        "SELECT count(*) FROM conversation_history WHERE seq > (SELECT last_seq FROM log_head)"
    ).fetchone()
    if above and above[0]:
        problems.append(f"{above[0]} row(s) above log_head")
    bad = conn.execute(
        "SELECT sha256 FROM payloads WHERE sha256 <> encode(sha256(data), 'hex') LIMIT 20"
    ).fetchall()
    problems += [f"payload {row[0][:12]}… does not match its sha256" for row in bad]
    return problems


def _rows_after(conn: Connection, *, after: int) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(_ROWS, (after,)).fetchall()
