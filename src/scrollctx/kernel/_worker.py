"""The worker process: boot, confine itself, then serve cells over the control pipe.

Started by the host as ``python -I -m scrollctx.kernel._worker --fd-in N --fd-out M``. Boot order:

1. read the boot frame (scratch folder, ids, policy, tool descriptions, how ``ms`` is bound);
2. import everything the session needs while the file system is still open;
3. apply the sandbox layers and self-test them (:mod:`scrollctx.kernel._sandbox`);
4. bind ``ms``: a :class:`~scrollctx.surface.RemoteSurface` answered by the kernel's memory
   reader (:mod:`scrollctx.kernel._reader`): the first call crosses to the host, which starts
   the reader and hands it the far end of this worker's channel (``--fd-ms``, a socket pair);
   once the reader says ``channel`` there, calls go over it, past the host, and when it breaks
   (the reader died or hung up) they go through the host again. The worker holds no path to the
   store, and its sandbox grants none;
5. send ``ready`` with each layer's status, start a thread that exits the worker once the host's
   end of the control pipe is gone, then serve ``cell`` frames until ``shutdown``.

Every frame the worker sends carries the running cell's request id; bridged tool calls and ``ms``
calls go one at a time (a lock), only while a cell runs, and the cell's result is written only
after every call in flight has its answer, so the host never meets a frame of another request.
If the policy is strict and a layer does not hold, the worker refuses every cell itself as well
(the host refuses first; this is the second lock).
"""

from __future__ import annotations

import builtins
import faulthandler
import os
import select
import signal
import sys
import threading
import weakref
from typing import Any

from scrollctx.errors import ProtocolError, QueryError, WorkerCrashed
from scrollctx.kernel._bridge import ToolCallError, bind_stubs
from scrollctx.kernel._cell import CellRunner
from scrollctx.kernel._digest import summarize_namespace
from scrollctx.kernel._frames import (
    FrameReader,
    encode_frame,
    hang_up,
    pipe_arguments,
    write_frame,
)
from scrollctx.kernel._result import cap_error, cap_notes
from scrollctx.kernel._sandbox import SandboxPlan, apply_sandbox, die_with_host

__all__ = ["main"]

_FROM_HOST = 1 << 30  # the host is trusted; its frames are bounded where it builds them


class _NoSurface:
    """Stands in for ``ms`` when no Event Log is bound; every use says why."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"ms is not available in this kernel: {self._reason}")

    def __repr__(self) -> str:
        return f"<ms unavailable: {self._reason}>"


class Worker:
    """One worker: its control pipe, namespace and bridge state."""

    def __init__(self, fd_in: int, fd_out: int, fd_ms: int | None = None) -> None:
        self.reader = FrameReader(fd_in, max_size=_FROM_HOST)
        self.fd_out = fd_out
        self.channel = FrameReader(fd_ms, max_size=_FROM_HOST) if fd_ms is not None else None
        """The direct ``ms`` channel to this worker's memory reader (None: calls go through
        the host); usable once the reader has said so (:attr:`channel_live`)."""
        self.channel_live = False
        self.cell_id: int | None = None
        self.calls = 0
        self.max_input = 256 * 1024
        self.surface: Any = None
        self.refusal: str | None = None
        self.prebound: dict[str, Any] = {}
        self.runner = CellRunner({})
        self._bridge = threading.Lock()
        self._earlier: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    def boot(self) -> None:
        boot = self.reader.read()
        if boot is None or boot.get("op") != "boot":
            raise SystemExit("the first frame must be a boot frame")
        remote = _remote_surface() if boot.get("ms") else None
        plan = SandboxPlan.from_wire(boot["policy"], boot["scratch"], None)
        report = apply_sandbox(plan)
        tasks = boot.get("tasks")
        if isinstance(tasks, str) and report.get("rlimits", {}).get("state") == "ok":
            report["rlimits"]["detail"] += f"; {tasks[:200]}"
        if boot["policy"].get("profile") == "strict":
            weak = [name for name, item in report.items() if item["state"] != "ok"]
            if weak:
                self.refusal = f"required sandbox layer(s) not holding: {', '.join(weak)}"
        self.max_input = int(boot.get("max_tool_input", self.max_input))
        self._bind(boot, remote)
        write_frame(self.fd_out, encode_frame(0, {"op": "ready", "layers": report}))

    def _bind(self, boot: dict[str, Any], remote: Any) -> None:
        ms: Any = _NoSurface("no Event Log bound (the kernel was started without one)")
        if remote is not None:
            surface, binding, budgets = remote
            bound = boot["ms"]
            ms = surface(
                self.call_memory,
                binding(bound.get("session_id"), bound.get("task_id"), bound.get("agent_id")),
                budgets(**bound.get("budgets", {})),
            )
        self.surface = ms
        self.prebound = {"ms": ms, "ToolCallError": ToolCallError, **_helpers()}
        self.prebound.update(bind_stubs(boot.get("tools", []), self.call_tool))
        self.runner.namespace.update(
            {"__name__": "__main__", "__builtins__": builtins, **self.prebound}
        )

    def serve(self) -> None:
        while True:
            message = self.reader.read()
            if message is None:
                continue
            if message.get("op") == "shutdown":
                return
            if message.get("op") == "cell":
                self._cell(self.reader.last_id, message)

    def _cell(self, cell_id: int, message: dict[str, Any]) -> None:
        if self.refusal is not None:
            error = f"cell refused by the worker: {self.refusal}"
            write_frame(self.fd_out, encode_frame(cell_id, {"op": "result", "error": error}))
            return
        self._earlier = weakref.WeakSet(threading.enumerate())
        self.cell_id = cell_id
        outcome = self.runner.run(
            str(message.get("code", "")),
            stdout_cap=int(message.get("stdout_cap", 32000)),
            stderr_cap=int(message.get("stderr_cap", 8000)),
            index=int(message.get("index", 0)) or None,
        )
        reply = {
            "op": "result",
            "stdout": outcome.stdout,
            "stdout_hidden": outcome.stdout_hidden,
            "stderr": outcome.stderr,
            "stderr_hidden": outcome.stderr_hidden,
            "error": cap_error(outcome.error),
            "interrupted": outcome.interrupted,
            "digest": summarize_namespace(self.runner.namespace, self.prebound),
            "notes": list(cap_notes(self._drain_notes())),
        }
        with self._bridge:  # a call still in flight from one of the cell's threads ends first
            self.cell_id = None
            write_frame(self.fd_out, encode_frame(cell_id, reply))

    def _drain_notes(self) -> list[str]:
        drain = getattr(type(self.surface), "drain_notes", None)
        if drain is None:
            return []
        try:
            return [str(note) for note in drain(self.surface)]
        except Exception as exc:  # noqa: BLE001 - a failing drain must not lose the cell result
            return [f"could not collect ms notes: {type(exc).__name__}: {exc}"]

    def _caller_cell(self, what: str) -> int:
        """The running cell's id, if the calling thread may call ``what`` now."""
        cell = self.cell_id
        if cell is None:
            raise ToolCallError(
                f"{what} was called while no cell was running, by a thread an earlier cell "
                "left behind; tools and ms answer only during a cell: join your threads"
            )
        thread = threading.current_thread()
        if thread is not threading.main_thread() and (
            thread in self._earlier or isinstance(thread, threading._DummyThread)
        ):
            raise ToolCallError(
                f"{what} was called from a thread an earlier cell started; only the running "
                "cell and threads it starts (threading.Thread) may call tools"
            )
        return cell

    def call_tool(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Send one tool call to the host and wait for its answer (runs inside a cell)."""
        with self._bridge:
            cell = self._caller_cell(f"{name}()")
            self.calls += 1
            call = {"op": "tool_call", "call": self.calls, "name": name}
            try:
                frame = encode_frame(cell, {**call, "args": args, "kwargs": kwargs})
            except (TypeError, ValueError) as exc:
                raise TypeError(f"arguments to {name}() must be JSON-able: {exc}") from None
            if len(frame) > self.max_input:
                # The host refuses it anyway; it gets the size (and logs the attempt), not the
                # bytes, so no frame the worker sends is larger than the protocol needs.
                frame = encode_frame(
                    cell, {**call, "args": [], "kwargs": {}, "omitted": len(frame)}
                )
            reply = self._exchange(frame, "tool_result", self.calls)
        if reply.get("ok"):
            return reply.get("value")
        raise ToolCallError(str(reply.get("error", f"{name} failed on the host")))

    def call_memory(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one ``ms`` call to the memory reader, over the channel or through the host, and
        return its reply (the ms transport)."""
        method = str(request.get("method"))
        with self._bridge:
            self.calls += 1
            frame = encode_frame(self._memory_cell(method), {"op": "ms", "call": self.calls,
                                                              **request})  # fmt: skip
            if len(frame) > self.max_input:
                raise QueryError(
                    f"the arguments to ms.{method} take {len(frame):,} bytes, over the "
                    f"{self.max_input:,}-byte limit of one ms call; pass less (a seq span "
                    "ms.expand(lo, hi) instead of a long list, shorter SQL)"
                )
            if self._channel_ready():
                reply = self._over_channel(frame, self.calls)
                if reply is not None:
                    return reply
            # Through the host: the first call (it starts the reader), and every call once the
            # channel is gone (the reader died, or refused what came over it).
            return self._exchange(frame, "ms_result", self.calls)

    def _channel_ready(self) -> bool:
        # The reader says "channel" on it once it serves it (after the call that started it).
        channel = self.channel
        if channel is None or self.channel_live:
            return self.channel_live
        if not (channel.buffered() or select.select([channel.fd], [], [], 0)[0]):
            return False
        try:
            hello = channel.read()
        except (OSError, WorkerCrashed, ProtocolError):  # the reader hung up or died first
            hello = None
        if hello is None or hello.get("op") != "channel":
            self._drop_channel()
        else:
            self.channel_live = True
        return self.channel_live

    def _over_channel(self, frame: bytes, call: int) -> dict[str, Any] | None:
        """One ``ms`` call straight to the reader; ``None`` if the channel is gone (the call
        then goes through the host, which says what became of the reader)."""
        channel = self.channel
        if channel is None:
            return None
        try:
            self._write(channel.fd, frame)
            while True:
                reply = channel.read()
                if reply and reply.get("op") == "ms_result" and reply.get("call") == call:
                    return dict(reply)
        except (OSError, WorkerCrashed, ProtocolError):
            self._drop_channel()
            return None

    def _drop_channel(self) -> None:
        if self.channel is not None:
            hang_up(self.channel.fd)
        self.channel, self.channel_live = None, False

    def _memory_cell(self, method: str) -> int:
        # ms is not logged, so a thread an earlier cell left may use it during any cell.
        if self.cell_id is None:
            raise RuntimeError(
                f"ms.{method} was called while no cell was running, by a thread an earlier "
                "cell left behind; ms answers only during a cell: join your threads"
            )
        return self.cell_id

    def _write(self, fd: int, frame: bytes) -> None:
        # An interrupt is held back while the frame is written, so it never goes out torn
        # (interrupts reach the main thread only).
        if threading.current_thread() is threading.main_thread():
            with self.runner.deferred_interrupts():
                write_frame(fd, frame)
        else:
            write_frame(fd, frame)

    def _exchange(self, frame: bytes, op: str, call: int) -> dict[str, Any]:
        # Replies to calls an interrupt abandoned arrive late and are skipped by their number.
        self._write(self.fd_out, frame)
        while True:
            reply = self.reader.read()
            if reply and reply.get("op") == op and reply.get("call") == call:
                return dict(reply)


def _remote_surface() -> tuple[Any, Any, Any] | None:
    try:
        from scrollctx.surface import Budgets, RemoteSurface
        from scrollctx.surface._filters import Binding
    except ImportError:
        return None
    return RemoteSurface, Binding, Budgets


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


def main(argv: list[str] | None = None) -> int:
    """Run the worker until the host sends ``shutdown`` or closes the pipe."""
    die_with_host()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only a running cell may be interrupted
    faulthandler.enable()
    pipes = pipe_arguments("scrollctx.kernel._worker", argv)
    worker = Worker(pipes.fd_in, pipes.fd_out, pipes.ms)
    try:
        worker.boot()
        threading.Thread(
            target=_exit_with_host, args=(pipes.fd_in,), name="scroll-host-watch", daemon=True
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
