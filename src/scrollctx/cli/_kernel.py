"""Kernel commands: ``scroll exec`` runs one cell, ``scroll kernel doctor`` checks the sandbox.

``scroll exec`` prints the observation exactly as the model would see it (stdout of this command
is that text; with ``--json``, one document with the observation and its parts) and exits 0
when the cell ran to its end, 1 when it raised or timed out (the error is in the observation,
as the model would see it, and named again on stderr), 2 when the sandbox refused the cell (a
required layer does not hold here; the observation and the error name the opt-out) or when
CODE names a file (run that with ``--file``). ``scroll kernel doctor``
exits 0 when the strict profile holds here and 2 when it would refuse cells. On a terminal, the
control characters a cell printed (escape sequences that could retitle the window, write the
clipboard or hide text) are shown as ``\\x1b``-style escapes; piped output is the exact text.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from scrollctx.cli._app import emit, json_option, store_option
from scrollctx.config import Config
from scrollctx.errors import CellFailed, CellTimeout, SandboxUnavailable, UsageError
from scrollctx.kernel import (
    LAYERS,
    PROFILES,
    CellResult,
    DoctorReport,
    Kernel,
    SandboxPolicy,
    doctor,
)
from scrollctx.kernel import render_observation as render
from scrollctx.log import open_existing_store

__all__ = ["exec_cell", "kernel_group"]

_layer_option = click.option(
    "--without",
    "without",
    multiple=True,
    type=click.Choice(LAYERS),
    envvar="SCROLL_SANDBOX_WITHOUT",
    help="Treat a layer as missing on this machine (repeatable; env SCROLL_SANDBOX_WITHOUT).",
)


def _slug(text: str) -> str:
    # The session id names a folder: keep it one plain path component.
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)[:80] or "exec"


def _read_source(code: str | None, file: Path | None) -> str:
    if code is not None and file is not None:
        raise UsageError("give the cell either as CODE or with --file, not both")
    if file is not None:
        try:
            return file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read cell file {file}: {exc}") from exc
    if code is not None and code != "-":
        _refuse_a_path(code)
        return code
    if code is None and sys.stdin.isatty():
        raise UsageError("no cell given: pass CODE, --file F, or pipe the code on stdin")
    return sys.stdin.read()


def _refuse_a_path(code: str) -> None:
    """``scroll exec script.py`` means the file: say how, instead of running its name."""
    if "\n" in code or len(code) > 4096:
        return
    path = Path(code).expanduser()
    try:
        is_file = path.is_file()
    except OSError:  # a name too long or otherwise unusable as a path: it is code
        return
    if is_file:
        raise UsageError(f"{code} is a file; to run it as a cell use --file {code}")


def _document(result: CellResult, observation: str) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "observation": observation,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "error": result.error,
        "duration": round(result.duration, 6),
        "timed_out": result.timed_out,
        "refused": result.refused,
        "namespace_lost": result.namespace_lost,
        "notes": list(result.notes),
        "digest": [{"name": e.name, "type": e.type, "summary": e.summary} for e in result.digest],
        "cell_index": result.cell_index,
    }


def _raise_for(result: CellResult) -> None:
    """Exit non-zero when the cell did not run to its end (the observation says why)."""
    if result.ok or result.refused:
        return
    last = (result.error or "").strip().splitlines()[-1:] or ["(no message)"]
    if result.timed_out:
        raise CellTimeout(f"the cell timed out: {last[0]}")
    raise CellFailed(f"the cell raised {last[0]}")


@click.command(name="exec")
@click.argument("code", required=False)
@click.option("--file", "file", type=click.Path(path_type=Path, dir_okay=False), help="Cell file.")
@click.option("--session", "session_id", default="exec", show_default=True, help="Session id.")
@click.option("--task", "task_id", default=None, help="Task id bound to ms.")
@click.option("--sandbox", type=click.Choice(PROFILES), default="strict", show_default=True,
              help="Sandbox profile; anything but strict is an opt-out (logged).")  # fmt: skip
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per cell.")
@_layer_option
@store_option
@json_option
def exec_cell(
    code: str | None,
    file: Path | None,
    session_id: str,
    task_id: str | None,
    sandbox: str,
    timeout: float,
    without: tuple[str, ...],
    config: Config,
    json_: bool,
) -> None:
    """Run one cell in the sandboxed kernel with ms bound to the store; print the observation.

    Example: scroll exec "hits = ms.search('adoption', k=3); print(len(hits))" --store .scroll
    """
    source = _read_source(code, file)
    policy = SandboxPolicy(sandbox, unavailable=frozenset(without))
    scratch = config.store_dir / "scratch" / _slug(session_id)
    with open_existing_store(config) as log:
        kernel = Kernel(event_log=log, session_id=session_id, task_id=task_id,
                        scratch=scratch, sandbox=policy, timeout=timeout)  # fmt: skip
        with kernel:
            result = kernel.run_cell(source)
    observation = render(result)
    emit(_document(result, observation), as_json=json_, human=lambda _: observation)
    _raise_for(result)
    if result.refused and kernel.status is not None:
        raise SandboxUnavailable(
            "the cell was refused: required sandbox layer(s) "
            f"{', '.join(s.name for s in kernel.status.missing)} do not hold here; "
            "opt out with --sandbox best-effort or off (logged)",
            layers={s.name: s.state for s in kernel.status.layers},
        )


@click.group(name="kernel")
def kernel_group() -> None:
    """The sandboxed Python kernel.

    Example: scroll kernel doctor --json
    """


@kernel_group.command(name="doctor")
@_layer_option
@json_option
def doctor_command(without: tuple[str, ...], json_: bool) -> None:
    """Report which sandbox layers hold on this machine (exit 2 if strict would refuse cells).

    Example: scroll kernel doctor --without landlock
    """
    report = doctor(unavailable=without)
    if json_:
        emit(report.to_dict(), as_json=True, human=str)
    else:
        emit(report, as_json=False, human=DoctorReport.render)
    if not report.strict_holds:
        missing = [s for s in report.status.layers if not s.holds]
        raise SandboxUnavailable(
            f"the strict profile would refuse cells here (missing: "
            f"{', '.join(s.name for s in missing)}); opt out with --sandbox best-effort or off",
            layers={s.name: s.state for s in report.status.layers},
        )
