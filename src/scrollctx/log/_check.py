"""The whole-store check behind ``scroll doctor`` and ``scroll stats --verify``.

Three independent checks, each able to find what the others cannot:

1. SQLite's ``PRAGMA quick_check``: the file's pages and b-trees (a torn page, a broken tree).
2. Every row's checksum (``_integrity``): a flipped byte inside a row, which leaves the pages
   well formed and so passes ``quick_check``.
3. Every referenced payload file's SHA-256: a payload gone or changed behind the log's back.

The file is opened read-only and never changed; damage is reported by seq, never repaired.
"""

from __future__ import annotations

import hashlib
import sqlite3
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.errors import IntegrityError, StoreError
from scrollctx.log._failures import known_failure
from scrollctx.log._integrity import CHECKSUM_COLUMNS, stored_checksum, tolerant_text
from scrollctx.log._payloads import PayloadStore

__all__ = ["Damage", "StoreCheck", "check_store", "connect_read_only", "needs_upgrade"]

_CHUNK = 2000
_QUICK_CHECK_LINES = 20


@dataclass(frozen=True, slots=True)
class Damage:
    """One problem found: ``seq`` is the event at fault (None: the file as a whole)."""

    seq: int | None
    problem: str
    detail: str


@dataclass(slots=True)
class StoreCheck:
    """What :func:`check_store` found."""

    store: str
    events: int = 0
    payload_files: int = 0
    quick_check: list[str] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    integrity_check: list[str] | None = None
    """``PRAGMA integrity_check``'s answer, when it was asked for (``full``): it also compares
    every index with its table, which ``quick_check`` does not."""

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        full = self.integrity_check in (None, ["ok"])
        return self.quick_check == ["ok"] and full and not self.damage

    @property
    def bad_seqs(self) -> list[int]:
        """Every damaged event, in seq order."""
        return sorted({d.seq for d in self.damage if d.seq is not None})

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-able data."""
        return {**asdict(self), "ok": self.ok, "bad_seqs": self.bad_seqs}

    def render(self) -> str:
        """Return the human-readable report, one line per problem."""
        checked = (
            f"{self.events} events, {self.payload_files} payload files; "
            f"quick_check: {'; '.join(self.quick_check)}"
        )
        if self.integrity_check is not None:
            checked += f"; integrity_check: {'; '.join(self.integrity_check)}"
        if self.ok:
            return f"store {self.store}: ok ({checked})"
        lines = [f"store {self.store}: DAMAGED ({checked})"]
        lines += [
            f"  {'seq ' + str(d.seq) if d.seq is not None else 'file'}: {d.problem}: {d.detail}"
            for d in self.damage
        ]
        if self.bad_seqs:
            lines.append(f"  damaged seqs: {', '.join(map(str, self.bad_seqs))}")
        return "\n".join(lines)


def check_store(
    db_path: Path, payload_root: Path | None = None, *, full: bool = False
) -> StoreCheck:
    """Check the whole store read-only: quick_check, every row's checksum, every payload, and
    with ``full`` SQLite's ``integrity_check`` too (slower: it reads every index).

    Raises:
        StoreError: there is no store at ``db_path``, or it predates per-event checksums.
        IntegrityError: the file is not a scrollctx store.
    """
    conn = connect_read_only(db_path)
    payloads = PayloadStore(payload_root or db_path.parent / "payloads")
    report = StoreCheck(str(db_path.parent))
    try:
        report.quick_check = _pragma_check(conn, "quick_check")
        if full:
            report.integrity_check = _pragma_check(conn, "integrity_check")
        referenced = _check_rows(conn, report)
    finally:
        conn.close()
    _check_payloads(payloads, referenced, report)
    return report


def _pragma_check(conn: sqlite3.Connection, pragma: str) -> list[str]:
    return [str(row[0]) for row in conn.execute(f"PRAGMA {pragma}").fetchmany(_QUICK_CHECK_LINES)]


def needs_upgrade(db_path: Path) -> str:
    """The message for a store written before per-event checksums, naming the upgrade."""
    return (
        f"{db_path} was written by an older scrollctx: its events have no checksums yet. "
        "Upgrade it once (this adds them and changes nothing else): "
        f"scroll doctor --upgrade --store {db_path.parent}"
    )


def connect_read_only(db_path: Path) -> sqlite3.Connection:
    """Open an existing store's database through a ``mode=ro`` URI (never created here)."""
    if not db_path.is_file():
        raise StoreError(f"no Event Log at {db_path}; point --store at an existing store")
    uri = "file:" + urllib.parse.quote(str(db_path.resolve())) + "?mode=ro"
    # EventLog.open_read_only may hand it to another thread (its callers serialize reads).
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(conversation_history)")}
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise known_failure(db_path, "open", exc) or IntegrityError(
            f"{db_path} is not a usable Event Log: {exc}", path=str(db_path)
        ) from exc
    if not columns:
        conn.close()
        raise IntegrityError(f"{db_path} is not a scrollctx store", path=str(db_path))
    if "checksum" not in columns:
        conn.close()
        raise StoreError(needs_upgrade(db_path))
    return conn


def _check_rows(conn: sqlite3.Connection, report: StoreCheck) -> dict[str, list[int]]:
    """Verify every row's checksum; return ``{payload sha256: [seqs]}`` of the rows read."""
    sql = (
        f"SELECT {', '.join(CHECKSUM_COLUMNS)}, checksum FROM conversation_history "
        f"WHERE seq > ? ORDER BY seq LIMIT {_CHUNK}"
    )
    referenced: dict[str, list[int]] = {}
    after = 0
    with tolerant_text(conn):  # text that is not UTF-8 any more fails its checksum, by seq
        while True:
            try:
                cursor = conn.execute(sql, (after,))
                names = [column[0] for column in cursor.description]
                rows = [dict(zip(names, values, strict=True)) for values in cursor]
            except sqlite3.DatabaseError as exc:
                report.damage.append(
                    Damage(None, "unreadable", f"rows after seq {after} cannot be read: {exc}")
                )
                return referenced
            if not rows:
                return referenced
            for row in rows:
                # A damaged row's payload digest is not trusted enough to look a file up by.
                if _row_holds(row, report) and row["payload_sha256"] is not None:
                    referenced.setdefault(row["payload_sha256"], []).append(row["seq"])
            report.events += len(rows)
            after = rows[-1]["seq"]


def _row_holds(row: dict[str, Any], report: StoreCheck) -> bool:
    if row["checksum"] is not None and stored_checksum(row) == row["checksum"]:
        return True
    what = "has no checksum" if row["checksum"] is None else "does not match its checksum"
    report.damage.append(Damage(row["seq"], "checksum", f"the row {what}"))
    return False


def _check_payloads(
    payloads: PayloadStore, referenced: dict[str, list[int]], report: StoreCheck
) -> None:
    for sha256, seqs in sorted(referenced.items(), key=lambda item: item[1][0]):
        path = payloads.path_for(sha256)
        try:
            with path.open("rb") as handle:
                actual = hashlib.file_digest(handle, "sha256").hexdigest()
        except FileNotFoundError:
            problem, detail = "payload missing", f"{path} is gone"
        except OSError as exc:
            problem, detail = "payload unreadable", f"{path}: {exc.strerror or exc}"
        else:
            report.payload_files += 1
            if actual == sha256:
                continue
            problem, detail = "payload corrupt", f"{path} does not match its sha256"
        report.damage += [Damage(seq, problem, detail) for seq in seqs]
