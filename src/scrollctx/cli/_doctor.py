"""``scroll doctor``: is this store intact, and would the sandbox run cells here?

The store part reads the whole store read-only (``scrollctx.log.check_store``: quick_check,
every event's checksum, every payload's SHA-256) and names every damaged seq; the sandbox part
is a one-line summary of ``scroll kernel doctor``. Exit 3 when the store is damaged, else 0
(the sandbox line informs; ``scroll kernel doctor`` is the command whose exit code judges it).
"""

from __future__ import annotations

from typing import Any

import click

from scrollctx.cli._app import emit, json_option, store_option
from scrollctx.cli._store import render_shared
from scrollctx.config import Config
from scrollctx.errors import IntegrityError, KernelError
from scrollctx.kernel import doctor
from scrollctx.log import EventLog, StoreCheck, check_configured_store

__all__ = ["doctor_command", "raise_if_damaged"]


@click.command("doctor")
@click.option(
    "--upgrade", is_flag=True, help="First upgrade a store from before per-event checksums."
)
@click.option(
    "--full", is_flag=True, help="Also run SQLite's integrity_check (every index; slower)."
)
@store_option
@json_option
def doctor_command(upgrade: bool, full: bool, config: Config, json_: bool) -> None:
    """Check the store (quick_check, every event's checksum and payload) and the sandbox.

    Exit 3 if the store is damaged; every damaged seq is named.
    Example: scroll doctor --store .scroll --json   (--full: integrity_check as well)
    """
    if upgrade and config.store_url is None and config.db_path.is_file():
        EventLog.open(config.db_path).close()  # the writer applies every pending migration
    report, shared = check_configured_store(config, full=full)
    data = {"store": report.to_dict(), "sandbox": _sandbox_summary()}
    sandbox = data["sandbox"]["summary"]
    text = report.render() if shared is None else f"{report.render()}\n{render_shared(shared)}"
    if shared is not None:
        data["shared"] = shared
    emit(data, as_json=json_, human=lambda _: f"{text}\nsandbox: {sandbox}")
    raise_if_damaged(report)


def raise_if_damaged(report: StoreCheck) -> None:
    """Raise :class:`IntegrityError` (exit 3) naming the damaged seqs, if there are any."""
    if report.ok:
        return
    seqs = report.bad_seqs
    more = f" and {len(seqs) - 20} more" if len(seqs) > 20 else ""
    shown = ", ".join(map(str, seqs[:20])) + more
    what = f"{len(seqs)} damaged event(s): seq {shown}" if seqs else "the file is damaged"
    raise IntegrityError(
        f"{report.store} failed its check: {what}. Restore the store from a copy or re-import "
        "its sources; the damaged rows are never served",
        path=report.store,
    )


def _sandbox_summary() -> dict[str, Any]:
    try:
        report = doctor()
    except KernelError as exc:
        return {"strict_holds": False, "summary": f"could not be probed ({exc})"}
    if report.strict_holds:
        summary = "strict profile holds (every layer); details: scroll kernel doctor"
    else:
        missing = ", ".join(s.name for s in report.status.layers if not s.holds)
        summary = f"strict profile would REFUSE cells (missing: {missing}); scroll kernel doctor"
    return {"strict_holds": report.strict_holds, "summary": summary}
