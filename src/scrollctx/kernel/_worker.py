"""The worker process: boot, confine itself, then serve cells over the control pipe.

Started by the host as ``python -I -m scrollctx.kernel._worker --fd-in N --fd-out M``. Boot order:

1. read the boot frame (scratch folder, Event Log path, ids, policy, tool descriptions);
2. import everything the session needs while the file system is still open;
3. apply the sandbox layers and self-test them (:mod:`scrollctx.kernel._sandbox`);
4. open ``ms`` read-only (after Landlock, so SQLite's ``-shm`` mapping is read-only too);
5. send ``ready`` with each layer's status, start a thread that exits the worker once the host's
   end of the control pipe is gone, then serve ``cell`` frames until ``shutdown``.

If the policy is strict and a layer does not hold, the worker refuses every cell itself as well
(the host refuses first; this is the second lock).
"""

from __future__ import annotations

import argparse
import builtins
import faulthandler
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from scrollctx.errors import WorkerCrashed
from scrollctx.kernel._bridge import ToolCallError, bind_stubs
from scrollctx.kernel._cell import CellRunner
from scrollctx.kernel._digest import summarize_namespace
from scrollctx.kernel._frames import MAX_FRAME, FrameReader, encode_frame, write_frame
from scrollctx.kernel._sandbox import SandboxPlan, apply_sandbox, die_with_host

__all__ = ["main"]

_ERROR_CHARS = 20_000


class _NoSurface:
    """Stands in for ``ms`` when no Event Log could be bound; every use says why."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"ms is not available in this kernel: {self._reason}")

    def __repr__(self) -> str:
        return f"<ms unavailable: {self._reason}>"


class Worker:
    """One worker: its control pipe, namespace and bridge state."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.reader = FrameReader(fd_in)
        self.fd_out = fd_out
        self.cell_id: int | None = None
        self.calls = 0
        self.surface: Any = None
        self.refusal: str | None = None
        self.prebound: dict[str, Any] = {}
        self.runner = CellRunner({})

    def boot(self) -> None:
        boot = self.reader.read()
        if boot is None or boot.get("op") != "boot":
            raise SystemExit("the first frame must be a boot frame")
        db_path = boot.get("db_path")
        open_surface = _import_surface() if db_path else None
        plan = SandboxPlan.from_wire(boot["policy"], boot["scratch"], db_path)
        report = apply_sandbox(plan)
        tasks = boot.get("tasks")
        if isinstance(tasks, str) and report.get("rlimits", {}).get("state") == "ok":
            report["rlimits"]["detail"] += f"; {tasks[:200]}"
        if boot["policy"].get("profile") == "strict":
            weak = [name for name, item in report.items() if item["state"] != "ok"]
            if weak:
                self.refusal = f"required sandbox layer(s) not holding: {', '.join(weak)}"
        surface_state = self._bind(boot, open_surface)
        write_frame(
            self.fd_out,
            {"op": "ready", "id": boot.get("id"), "layers": report, "ms": surface_state},
        )

    def _bind(self, boot: dict[str, Any], open_surface: Callable[..., Any] | None) -> str:
        state = "no Event Log bound (the kernel was started without one)"
        ms: Any = _NoSurface(state)
        if open_surface is not None:
            try:
                ms = open_surface(
                    boot["db_path"],
                    session_id=boot.get("session_id"),
                    task_id=boot.get("task_id"),
                    agent_id=boot.get("agent_id"),
                )
                state = "bound"
            except Exception as exc:  # noqa: BLE001 - reported to the host and shown on use
                state = f"{type(exc).__name__}: {exc}"
                ms = _NoSurface(state)
        self.surface = ms
        self.prebound = {"ms": ms, "ToolCallError": ToolCallError, **_helpers()}
        self.prebound.update(bind_stubs(boot.get("tools", []), self.call_tool))
        self.runner.namespace.update(
            {"__name__": "__main__", "__builtins__": builtins, **self.prebound}
        )
        return state

    def serve(self) -> None:
        while True:
            message = self.reader.read()
            if message is None:
                continue
            if message.get("op") == "shutdown":
                return
            if message.get("op") == "cell":
                self._cell(message)

    def _cell(self, message: dict[str, Any]) -> None:
        self.cell_id = message.get("id")
        if self.refusal is not None:
            write_frame(self.fd_out, {"op": "result", "id": self.cell_id, "refused": self.refusal})
            return
        outcome = self.runner.run(
            str(message.get("code", "")),
            stdout_cap=int(message.get("stdout_cap", 32000)),
            stderr_cap=int(message.get("stderr_cap", 8000)),
            index=int(message.get("index", 0)) or None,
        )
        reply = {
            "op": "result",
            "id": self.cell_id,
            "stdout": outcome.stdout,
            "stdout_hidden": outcome.stdout_hidden,
            "stderr": outcome.stderr,
            "stderr_hidden": outcome.stderr_hidden,
            "error": _clip(outcome.error),
            "interrupted": outcome.interrupted,
            "digest": summarize_namespace(self.runner.namespace, self.prebound),
            "notes": [_clip(note, 2000) for note in self._drain_notes()[:50]],
        }
        write_frame(self.fd_out, reply)

    def _drain_notes(self) -> list[str]:
        drain = getattr(type(self.surface), "drain_notes", None)
        if drain is None:
            return []
        try:
            return [str(note) for note in drain(self.surface)]
        except Exception as exc:  # noqa: BLE001 - a failing drain must not lose the cell result
            return [f"could not collect ms notes: {type(exc).__name__}: {exc}"]

    def call_tool(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Send one tool call to the host and wait for its answer (runs inside a cell)."""
        self.calls += 1
        call = self.calls
        try:
            frame = encode_frame(
                {
                    "op": "tool_call",
                    "id": self.cell_id,
                    "call": call,
                    "name": name,
                    "args": args,
                    "kwargs": kwargs,
                }
            )
        except (TypeError, ValueError) as exc:
            raise TypeError(f"arguments to {name}() must be JSON-able: {exc}") from None
        if len(frame) > MAX_FRAME:
            raise ValueError(f"arguments to {name}() are too large ({len(frame):,} bytes)")
        write_frame(self.fd_out, frame)
        while True:
            reply = self.reader.read()
            if reply and reply.get("op") == "tool_result" and reply.get("call") == call:
                break
        if reply.get("ok"):
            return reply.get("value")
        raise ToolCallError(str(reply.get("error", f"{name} failed on the host")))


def _clip(text: str | None, limit: int = _ERROR_CHARS) -> str | None:
    # A traceback keeps its head (where) and tail (what); the middle of a huge message goes.
    if text is None or len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half:,} characters cut …]\n{text[-half:]}"


def _import_surface() -> Callable[..., Any] | None:
    try:
        from scrollctx.surface import open_surface
    except ImportError:
        return None
    return open_surface


def _helpers() -> dict[str, Any]:
    try:
        from scrollctx.surface import days_between, or_terms
    except ImportError:
        return {}
    return {"days_between": days_between, "or_terms": or_terms}


def _exit_with_host(fd_in: int) -> None:
    # Started after the sandbox holds (so the thread is confined too). Blocks in poll, using no
    # CPU; once every writer of the control pipe is gone (the host died or killed its end), the
    # worker exits even if a cell is still running: no worker outlives its host unwatched. A
    # cell that holds the GIL in C code delays this until it lets go.
    poller = select.poll()
    poller.register(fd_in, 0)  # POLLHUP, POLLERR and POLLNVAL are always reported
    quit_now = os._exit
    while True:
        if poller.poll():
            quit_now(0)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scrollctx.kernel._worker")
    parser.add_argument("--fd-in", type=int, required=True)
    parser.add_argument("--fd-out", type=int, required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the worker until the host sends ``shutdown`` or closes the pipe."""
    die_with_host()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only a running cell may be interrupted
    faulthandler.enable()
    args = _parse_args(argv)
    worker = Worker(args.fd_in, args.fd_out)
    try:
        worker.boot()
        threading.Thread(
            target=_exit_with_host, args=(args.fd_in,), name="scroll-host-watch", daemon=True
        ).start()
        worker.serve()
    except WorkerCrashed:
        return 0  # the host closed the pipe: nothing is left to serve
    return 0


if __name__ == "__main__":
    # os._exit, not sys.exit: a non-daemon thread a cell started must not keep the worker alive
    # after the host has gone (Python would wait for it at shutdown, unwatched, forever).
    sys.stdout.flush()
    os._exit(main())
