"""``scroll store``: move a whole Event Log between backends; how a shared store is described.

``scroll store copy SRC DST`` takes two store locations (a folder or a ``postgresql://`` URL),
copies every event and payload of SRC that DST lacks, and verifies the two digests match
(``scrollctx.log.copy_log``). The progress bar goes to stderr on a terminal only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import click

from scrollctx.cli._app import emit, json_option
from scrollctx.config import resolve_config
from scrollctx.log import copy_log, open_existing_store, open_store

__all__ = ["render_shared", "store_group"]


@click.group(name="store")
def store_group() -> None:
    """Whole stores: copy one into another (SQLite folder <-> PostgreSQL).

    Example: scroll store copy .scroll postgresql://scroll@db.internal/team
    """


@store_group.command("copy")
@click.argument("source", metavar="SRC")
@click.argument("target", metavar="DST")
@json_option
def copy_command(source: str, target: str, json_: bool) -> None:
    """Copy every event and payload of SRC that DST lacks, then verify both digests match.

    Resumable: rerun the same command after an interruption. DST must be empty or a copy.
    Example: scroll store copy .scroll postgresql://writer@localhost/team
    """
    src_config, dst_config = resolve_config(source), resolve_config(target)
    with open_existing_store(src_config) as src, open_store(dst_config) as dst:
        with _progress_bar(src.last_seq()) as progress:
            result = copy_log(src, dst, progress=progress)
    emit(asdict(result), as_json=json_, human=_render_copy)


def render_shared(facts: dict[str, Any]) -> str:
    """Return the human lines about a shared store (for ``scroll stats`` and ``doctor``)."""
    replica = facts["replica"]
    pending = ", ".join(facts["migrations_pending"]) or "none"
    return "\n".join(
        [
            f"shared store   {facts['server']} (PostgreSQL {facts['server_version']})",
            f"migrations     {facts['migrations']} applied, pending: {pending}",
            f"shared seq     {facts['last_seq']}",
            f"payload rows   {facts['payload_rows']} ({facts['payload_bytes']} bytes)",
            f"replica        {replica['path']} at seq {replica['last_seq']} (lag {replica['lag']})"
            + _restored(replica.get("payloads_restored")),
        ]
    )


def _restored(count: int | None) -> str:
    return f"; {count} payload files restored from the shared store" if count else ""


def _render_copy(data: dict[str, Any]) -> str:
    resumed = f", resumed after seq {data['resumed_after']}" if data["resumed_after"] else ""
    return (
        f"copied {data['copied']} events{resumed}; both stores hold {data['events']} events up to "
        f"seq {data['last_seq']}, digest {data['digest'][:16]}… (equal)"
    )


@contextmanager
def _progress_bar(total: int) -> Iterator[Callable[[int, int], None] | None]:
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("copying events", total=total or None)
        yield lambda done, last: bar.update(task, completed=done, total=last)
