"""Read commands over a store: ``scroll search``, ``expand``, ``sql``, ``sessions``, ``stats``.

All of them go through the read-only memory surface; none of them creates a store. JSON output
uses the log's column names as keys (plus ``date``, ``snippet``, ``broadened``, ``channel`` on
search hits, ``payload_missing`` on expanded rows); listings print ``[]`` when empty. Notes
(partial, capped, degraded search) go to stderr as ``[note] …`` lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from scrollctx.cli._app import emit, json_option, store_option, warn
from scrollctx.config import Config
from scrollctx.errors import UsageError
from scrollctx.log import check_configured_store, shared_store_facts, synced_local_file
from scrollctx.surface import MemorySurface, ResultRows, open_surface, store_stats

__all__ = ["expand", "search", "sessions", "sql", "stats"]

_CELL_MAX = 60


@contextmanager
def _surface(config: Config) -> Iterator[MemorySurface]:
    ms = open_surface(synced_local_file(config))
    try:
        yield ms
    finally:
        ms.close()


def _emit_rows(rows: ResultRows, as_json: bool, human: Callable[[Any], str]) -> None:
    emit(list(rows), as_json=as_json, human=human)
    for note in rows.notes:
        warn(f"[note] {note}")


@click.command()
@click.argument("query")
@click.option("--k", "k", type=int, default=10, show_default=True, help="How many hits.")
@click.option("--kind", default=None, help="Only events of this kind.")
@click.option("--session", "session_id", default=None, help="Only this session.")
@click.option(
    "--mode",
    type=click.Choice(["bm25", "semantic", "hybrid"]),
    default=None,
    help="Words only, meaning only (needs `scroll embed`), or both fused (the default).",
)
@store_option
@json_option
def search(
    query: str,
    k: int,
    kind: str | None,
    session_id: str | None,
    mode: str | None,
    config: Config,
    json_: bool,
) -> None:
    """Search the history: rows with every word first, then (broadened) rows with some.

    Bare words are AND-ed; when fewer than K rows contain them all, rows that contain only some
    are added after them, marked (broadened). OR, NOT, "phrase" and prefix* are operators.

    Example: scroll search "pamela vendor" --k 5 --kind conversation --mode bm25
    """
    with _surface(config) as ms:
        rows = ms.search(query, k, kind=kind, session_id=session_id, mode=mode, chars=None)
    if any(row.get("broadened") for row in rows):
        rows.note(
            f"fewer than {k} rows contain every word of {query!r}; the rows marked (broadened) "
            "contain only some of them"
        )
    _emit_rows(rows, json_, _render_hits)


@click.command()
@click.argument("seqs", nargs=-1, required=True)
@store_option
@json_option
def expand(seqs: tuple[str, ...], config: Config, json_: bool) -> None:
    """Print whole events by seq (SEQ or LO-HI), payloads read back.

    Example: scroll expand 812 815 900-910
    """
    singles, spans = _parse_seqs(seqs)
    with _surface(config) as ms:
        rows = ms.expand(singles) if singles else ResultRows()
        for lo, hi in spans:
            part = ms.expand(lo, hi)
            rows.extend(part)
            rows.notes += part.notes
    merged = ResultRows({row["seq"]: row for row in rows}.values(), notes=rows.notes)
    merged.sort(key=lambda row: row["seq"])
    _emit_rows(merged, json_, _render_events)


@click.command()
@click.argument("query")
@store_option
@json_option
def sql(query: str, config: Config, json_: bool) -> None:
    """Run one read-only SQL statement against hist.conversation_history.

    Example: scroll sql "SELECT kind, count(*) AS n FROM hist.conversation_history GROUP BY kind"
    """
    with _surface(config) as ms:
        rows = ms.sql_query(query)
    _emit_rows(rows, json_, _render_table)


@click.command()
@store_option
@json_option
def sessions(config: Config, json_: bool) -> None:
    """List the sessions in the store with their seq spans.

    Example: scroll sessions --json
    """
    with _surface(config) as ms:
        rows = ms.sessions(all_agents=True)
    _emit_rows(rows, json_, _render_table)


@click.command()
@click.option(
    "--verify", is_flag=True, help="Also check every event's checksum and payload (exit 3 if bad)."
)
@store_option
@json_option
def stats(verify: bool, config: Config, json_: bool) -> None:
    """Show events, sessions, kinds, last seq, FTS5, payloads and file size of a store.

    Example: scroll stats --store .scroll --verify
    """
    # Imported here: the doctor and store commands' modules load the kernel and the writer,
    # which `scroll search` and the other read commands of this module never need.
    from scrollctx.cli._doctor import raise_if_damaged

    with _surface(config) as ms:
        data = store_stats(ms, config.db_path)
    shared = shared_store_facts(config)
    if shared is not None:
        data["shared"] = shared
    if not verify:
        emit(data, as_json=json_, human=_render_stats)
        return
    report, _ = check_configured_store(config)
    data["verify"] = report.to_dict()
    emit(data, as_json=json_, human=lambda d: f"{_render_stats(d)}\n{report.render()}")
    raise_if_damaged(report)


# -- parsing and rendering --------------------------------------------------------------------


def _parse_seqs(values: Sequence[str]) -> tuple[list[int], list[tuple[int, int]]]:
    singles: list[int] = []
    spans: list[tuple[int, int]] = []
    for value in values:
        lo, sep, hi = value.partition("-")
        try:
            if sep:
                spans.append((int(lo), int(hi)))
            else:
                singles.append(int(value))
        except ValueError as exc:
            raise UsageError(
                f"{value!r} is not a seq or a LO-HI span (e.g. 812 or 800-830)"
            ) from exc
    return singles, spans


def _clip(value: Any, limit: int = _CELL_MAX) -> str:
    text = "" if value is None else " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _render_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    cells = [[_clip(row.get(col)) for col in columns] for row in rows]
    widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(columns)]
    lines = ["  ".join(col.ljust(w) for col, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _render_hits(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no hits)"
    out = []
    for row in rows:
        mark = " (broadened)" if row.get("broadened") else ""
        if row.get("channel") in ("semantic", "both"):
            mark += f" [{row['channel']}]"
        out.append(
            f"seq {row['seq']}  {row['session_id']}  step {row['step_index']}  "
            f"{row['role'] or '-'}  {row['date'] or ''}{mark}"
        )
        out.append("  " + _clip(row["snippet"] or row["content"], 200))
    return "\n".join(out)


def _render_events(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no events)"
    out = []
    for row in rows:
        flag = "  PAYLOAD MISSING (preview only)" if row.get("payload_missing") else ""
        out.append(
            f"--- seq {row['seq']}  {row['kind']}  {row['role'] or '-'}  "
            f"session {row['session_id']}  {row['created_at']}{flag}"
        )
        out.append(row["content"])
    return "\n".join(out)


def _render_stats(data: dict[str, Any]) -> str:
    lines = [
        f"store          {data['store']}",
        f"events         {data['events']}",
        f"sessions       {data['sessions']}",
        f"last seq       {data['last_seq']}",
        f"fts5           {'yes' if data['fts5'] else 'no'}",
        f"payload files  {data['payload_files']} ({data['payload_bytes']} bytes)",
        f"db size        {data['db_bytes']} bytes",
        "kinds",
    ]
    lines += [f"  {kind:<20} {count}" for kind, count in data["kinds"].items()]
    if "shared" in data:
        from scrollctx.cli._store import render_shared

        lines.append(render_shared(data["shared"]))
    return "\n".join(lines)
