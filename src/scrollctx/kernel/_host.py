"""The host side of the kernel: :class:`Kernel` runs cells in a sandboxed persistent worker.

Guarantees (on Linux with every layer holding, i.e. the ``strict`` profile's condition):

- model code runs only in the worker, never in the host; the worker cannot write outside its
  scratch folder, write the Event Log, open network sockets, spawn processes, raise its limits,
  trace or signal the host (see :mod:`scrollctx.kernel._policy` for each layer);
- everything the worker sends is untrusted: frames are size-capped and shape-checked (nesting and
  integer length included), a bad frame gets the worker killed and restarted, and replies for
  other requests are dropped; nothing the worker sends raises out of :meth:`Kernel.run_cell`;
- the host caps the worker's threads (``pids`` cgroup, where writable) and kills a worker that
  writes past its scratch quota, leaves the disk under its floor or burns CPU between cells
  (:mod:`._quota`);
- a cell past its timeout is interrupted (namespace kept); one that ignores the interrupt for the
  grace period, or a worker that dies, is killed and restarted, and the observation says the
  namespace was lost;
- the worker reaches only the tools the host declared; each call is logged as a tool-call and a
  tool-result event (full result; the Event Log externalizes large ones); per cell, calls and
  their argument sizes are bounded, so forged calls cannot make the host write without end.

When a required layer does not hold, cells are refused (never run unconfined) with a message that
names the layer and the opt-out. An opt-out profile is logged as a ``system`` event and shown at
the top of every observation. A :class:`Kernel` is not thread-safe: one caller at a time.
"""

from __future__ import annotations

import itertools
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from scrollctx.errors import CellTimeout, ProtocolError, UsageError, WorkerCrashed
from scrollctx.kernel._bridge import (
    MAX_TOOL_INPUT,
    ToolSpec,
    answer_tool_call,
    describe_tools,
    refuse_tool_call,
)
from scrollctx.kernel._digest import parse_digest
from scrollctx.kernel._journal import KernelJournal
from scrollctx.kernel._namespace import namespace_request
from scrollctx.kernel._policy import SandboxPolicy, SandboxStatus, parse_layers, resolve_policy
from scrollctx.kernel._process import WorkerProcess, default_python
from scrollctx.kernel._result import CellResult
from scrollctx.log import EventStore

__all__ = [
    "Kernel",
    "NAMESPACE_LOST",
]

NAMESPACE_LOST = (
    "the worker was restarted, so the namespace was lost: every variable, import and function "
    "from earlier cells is gone; re-create what you need"
)
_MAX_TEXT = 1_000_000


class _Killed(Exception):
    """The cell outlived its timeout plus the grace period; the worker must be killed."""


class Kernel:
    """A persistent, sandboxed Python worker for one agent session.

    Example::

        with Kernel(event_log=log, session_id="s1", tools=[lookup]) as kernel:
            print(render_observation(kernel.run_cell("hits = ms.search('adoption')\\nlen(hits)")))

    Args:
        db_path: the Event Log ``ms`` reads (default: ``event_log.path``); ``None`` binds none.
        event_log: the host's open writer; sandbox status, opt-outs and bridged tool calls are
            logged here. Open it before starting the kernel (the worker's read-only SQLite needs
            the ``-wal``/``-shm`` files it creates).
        scratch: the one writable folder (created if missing; default: a temporary folder that
            :meth:`close` removes). It must not contain the Event Log.
        sandbox: ``"strict"`` (default), ``"best-effort"``, ``"off"`` or a :class:`SandboxPolicy`.
        tools: host callables (or a name -> callable mapping) the cell may call.
        timeout: seconds a cell may run before it is interrupted; ``grace``: seconds more before
            the worker is killed.
        max_tool_calls: bridged calls one cell may make (later ones are answered with an error,
            neither run nor logged); ``max_tool_input``: bytes of arguments one call may carry
            (a larger call is logged without them and not run). Both keep a hostile cell from
            filling the host's disk through the log.
    """

    def __init__(
        self,
        db_path: str | Path | None = None,
        *,
        event_log: EventStore | None = None,
        session_id: str = "kernel",
        task_id: str | None = None,
        agent_id: str | None = None,
        scratch: str | Path | None = None,
        sandbox: str | SandboxPolicy | None = "strict",
        tools: Iterable[Callable[..., Any]] | Mapping[str, Callable[..., Any]] = (),
        timeout: float = 60.0,
        grace: float = 2.0,
        stdout_cap: int = 32_000,
        stderr_cap: int = 8_000,
        boot_timeout: float = 15.0,
        python: str | None = None,
        max_tool_calls: int = 500,
        max_tool_input: int = MAX_TOOL_INPUT,
    ) -> None:
        if not (timeout > 0 and grace > 0 and boot_timeout > 0):
            raise UsageError(f"timeouts must be positive (timeout={timeout}, grace={grace})")
        if stdout_cap < 1 or stderr_cap < 1:
            raise UsageError(f"output caps must be positive ({stdout_cap}, {stderr_cap})")
        if max_tool_calls < 0 or max_tool_input < 1:
            raise UsageError(
                f"tool-call limits must be positive ({max_tool_calls}, {max_tool_input})"
            )
        self.max_tool_calls, self.max_tool_input = max_tool_calls, max_tool_input
        if not session_id:
            raise UsageError("a kernel needs a non-empty session_id")
        self.policy = resolve_policy(sandbox)
        self.tools: dict[str, ToolSpec] = describe_tools(tools)
        self.event_log = event_log
        db_file = db_path or (event_log.path if event_log else None)
        self.db_path = Path(db_file).resolve() if db_file else None
        self.session_id, self.task_id, self.agent_id = session_id, task_id, agent_id
        self.journal = KernelJournal(event_log, session_id, task_id, agent_id)
        self._own_scratch = scratch is None
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="scroll-scratch-")).resolve()
        _check_scratch(self.scratch, self.db_path)
        self.timeout, self.grace, self.boot_timeout = timeout, grace, boot_timeout
        self.stdout_cap, self.stderr_cap = stdout_cap, stderr_cap
        self.python = python or default_python()
        self.status: SandboxStatus | None = None
        self.ms_state = ""
        self._worker: WorkerProcess | None = None
        self._ids = itertools.count(1)
        self._cells = 0
        self._notice: str | None = None
        self._calls: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Kernel:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The running worker's process id (``None`` when no worker runs)."""
        return self._worker.pid if self._worker else None

    def start(self) -> SandboxStatus:
        """Start the worker (if not running) and return its sandbox status."""
        if self.status is None:
            return self._boot("started")
        return self.status

    def restart(self) -> SandboxStatus:
        """Replace the worker with a fresh one; the next observation says the namespace is lost."""
        self._discard()
        self._notice = NAMESPACE_LOST
        return self._boot("restarted on request")

    def close(self) -> None:
        """Stop the worker and remove a scratch folder the kernel created itself."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _discard(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None

    def _refresh(self) -> None:
        # A shared store's local replica: every host's newest rows reach ms before each cell.
        if self.event_log is not None:
            self.event_log.refresh()

    def _boot(self, reason: str) -> SandboxStatus:
        self._refresh()  # the file ms opens must exist (a new host's replica) and be current
        self.scratch.mkdir(parents=True, exist_ok=True)
        if self.db_path is not None:
            # The worker may read only the log's files and this folder, which must exist now
            # for its Landlock rule (the log creates it lazily, on the first large payload).
            try:
                (self.db_path.parent / "payloads").mkdir(exist_ok=True)
            except OSError:
                pass  # a read-only store: the log cannot write payloads there either
        applies_limits = "rlimits" in self.policy.applied
        worker = WorkerProcess(
            self.python,
            self.scratch,
            self.policy.limits if applies_limits else None,
            namespaces=namespace_request(self.policy, self.db_path),
        )
        try:
            ready = self._handshake(worker)
            layers = worker.accept_ready(ready.get("layers"))
        except BaseException:
            worker.kill()
            raise
        status = SandboxStatus(
            self.policy.profile,
            parse_layers(layers),
            self.policy.required,
        )
        ms_state = ready.get("ms")
        self.ms_state = ms_state[:500] if isinstance(ms_state, str) else "unknown"
        self.status = status
        self._worker = worker
        worker.set_busy(False)
        if not status.holds:
            self._discard()  # fail closed: no unconfined worker is left running
        self.journal.sandbox(status, reason)
        return status

    def _handshake(self, worker: WorkerProcess) -> dict[str, Any]:
        deadline = time.monotonic() + self.boot_timeout
        boot = {
            "op": "boot",
            "id": 0,
            "scratch": str(self.scratch),
            "db_path": str(self.db_path) if self.db_path else None,
            "session_id": self.session_id,
            "task_id": self.task_id,
            "agent_id": self.agent_id,
            "policy": {**self.policy.to_wire(), "namespaces": worker.namespace_facts},
            "tools": [spec.to_wire() for spec in self.tools.values()],
            "tasks": _host_limits(worker),
        }
        try:
            worker.send(boot, deadline)
            ready = worker.reader.read(deadline)
        except (WorkerCrashed, CellTimeout, ProtocolError) as exc:
            raise WorkerCrashed(
                f"the kernel worker failed to start ({worker.exit_text()}): {exc}; "
                f"its output ended with: {worker.output.text(0.5)[-1500:]!r}"
            ) from exc
        if ready is None or ready.get("op") != "ready":
            raise WorkerCrashed(
                f"the kernel worker did not report ready within {self.boot_timeout:g} s; "
                f"its output ended with: {worker.output.text(0.5)[-1500:]!r}"
            )
        return ready

    # -- cells -------------------------------------------------------------------------------

    def run_cell(self, source: str, *, timeout: float | None = None) -> CellResult:
        """Run one cell and return its result (failures of the cell are part of the result).

        Raises:
            UsageError: ``source`` is not a string or ``timeout`` is not positive.
            WorkerCrashed: a replacement worker could not be started.
        """
        if not isinstance(source, str):
            raise UsageError(f"a cell is a str of Python source, not {type(source).__name__}")
        limit = self.timeout if timeout is None else timeout
        if not limit > 0:
            raise UsageError(f"timeout must be positive, got {timeout}")
        self._refresh()
        self.start()
        self._cells += 1
        notice, self._notice = self._notice, None
        if self.status is not None and not self.status.holds:
            return self._refusal(notice)
        if self._worker is None or not self._worker.is_alive():
            notice = self._revive()
            if self.status is not None and not self.status.holds:
                return self._refusal(notice)
        return self._run(source, limit, notice)

    def _revive(self) -> str:
        exit_text = self._worker.exit_text() if self._worker else "not running"
        self._discard()
        self._boot("restarted after the worker ended between cells")
        return f"the worker had ended since the last cell ({exit_text}); " + NAMESPACE_LOST

    def _run(self, source: str, limit: float, notice: str | None) -> CellResult:
        worker = self._worker
        if worker is None:
            raise WorkerCrashed("no kernel worker is running; call start() or restart()")
        cell_id = next(self._ids)
        self._calls = []
        started = time.monotonic()
        request = {
            "op": "cell",
            "id": cell_id,
            "code": source,
            "index": self._cells,
            "stdout_cap": self.stdout_cap,
            "stderr_cap": self.stderr_cap,
        }
        try:
            worker.begin_cell()
            worker.set_busy(True)
            worker.send(request, started + limit)
            reply, interrupted = self._await(worker, cell_id, started + limit)
            worker.set_busy(False)
            return worker.end_cell(self._result(reply, started, limit, interrupted, notice))
        except (_Killed, CellTimeout):
            killed = _killed_text(limit, self.grace)
            return self._lost(killed, started, "after a timeout kill", timed_out=True)
        except WorkerCrashed:
            died = f"the worker died during the cell ({worker.exit_text()}){_tail(worker)}"
            return self._lost(died, started, "after the worker died")
        except ProtocolError as exc:
            broke = f"the worker broke the frame protocol ({exc}); it was killed"
            return self._lost(broke, started, "after a protocol violation")

    def _await(
        self, worker: WorkerProcess, cell_id: int, deadline: float
    ) -> tuple[dict[str, Any], bool]:
        interrupted = False
        while True:
            frame = worker.reader.read(deadline)
            if frame is None or time.monotonic() > deadline:
                if interrupted:
                    raise _Killed
                worker.interrupt()
                interrupted = True
                deadline = time.monotonic() + self.grace
                continue
            if frame.get("id") != cell_id:
                continue  # a stale or forged frame for another request: dropped
            if frame.get("op") == "tool_call":
                self._dispatch(worker, frame, max(deadline, time.monotonic() + self.grace))
            elif frame.get("op") == "result":
                return frame, interrupted

    def _lost(
        self, error: str, started: float, reason: str, *, timed_out: bool = False
    ) -> CellResult:
        self._discard()
        self._boot(f"restarted {reason}")
        return CellResult(
            error=f"{error}; a fresh worker was started.",
            duration=time.monotonic() - started,
            namespace_lost=True,
            kernel_notice=NAMESPACE_LOST,
            timed_out=timed_out,
            sandbox=self.status,
            cell_index=self._cells,
            tool_calls=tuple(self._calls),
        )

    def _result(
        self,
        reply: dict[str, Any],
        started: float,
        limit: float,
        interrupted: bool,
        notice: str | None,
    ) -> CellResult:
        if "refused" in reply:
            return self._refusal(notice, str(reply["refused"])[:500])
        stdout, stdout_hidden = _capped(reply, "stdout", self.stdout_cap)
        stderr, stderr_hidden = _capped(reply, "stderr", self.stderr_cap)
        error = reply.get("error")
        if error is not None and not isinstance(error, str):
            raise ProtocolError("result frame has a non-text error")
        if interrupted and reply.get("interrupted") is True:
            error = (f"the cell ran past its {limit:g} s timeout and was interrupted; "
                     f"the namespace is kept.\n{error or ''}")  # fmt: skip
        notes = reply.get("notes")
        digest, more = parse_digest(reply.get("digest"))
        return CellResult(
            stdout=stdout,
            stderr=stderr,
            error=error[:_MAX_TEXT] if error else None,
            duration=time.monotonic() - started,
            digest=digest,
            digest_more=more,
            notes=tuple(str(n)[:2000] for n in notes[:50]) if isinstance(notes, list) else (),
            namespace_lost=notice is not None,
            kernel_notice=notice,
            stdout_hidden=stdout_hidden,
            stderr_hidden=stderr_hidden,
            timed_out=interrupted,
            interrupted=interrupted and reply.get("interrupted") is True,
            sandbox=self.status,
            cell_index=self._cells,
            tool_calls=tuple(self._calls),
        )

    def _refusal(self, notice: str | None, detail: str | None = None) -> CellResult:
        status = self.status
        missing = (
            ", ".join(f"{s.name} ({s.state}: {s.detail})" for s in status.missing) if status else ""
        )
        return CellResult(
            error=(
                f"cell refused: the sandbox profile {self.policy.profile!r} requires layers that "
                f"do not hold here: {detail or missing}. Nothing ran. To run without them, opt "
                "out explicitly: Kernel(sandbox='best-effort') or 'off' (scroll exec --sandbox "
                "best-effort|off); the opt-out is logged and shown in every observation. "
                "Run 'scroll kernel doctor' to see which layers this machine offers."
            ),
            refused=True,
            namespace_lost=notice is not None,
            kernel_notice=notice,
            sandbox=status,
            cell_index=self._cells,
        )

    # -- tool bridge -------------------------------------------------------------------------

    def _dispatch(self, worker: WorkerProcess, frame: dict[str, Any], deadline: float) -> None:
        if len(self._calls) >= self.max_tool_calls:
            error = (
                f"this cell already made {self.max_tool_calls} tool calls, the limit of one cell; "
                "the call was not run. Batch the work, or continue in the next cell"
            )
            worker.send(refuse_tool_call(frame, error), deadline)
            return
        reply, tool_call_id = answer_tool_call(
            frame,
            self.tools,
            self.journal,
            self._cells,
            size=worker.reader.last_size,
            max_input=self.max_tool_input,
        )
        self._calls.append(tool_call_id)
        worker.send(reply, deadline)


def _check_scratch(scratch: Path, db_path: Path | None) -> None:
    # The scratch folder is the one place the worker may write: it must not hold the Event Log,
    # the interpreter or the code the worker imports.
    protected = {Path(sys.prefix), Path(sys.base_prefix), Path(__file__).parents[2]}
    if db_path is not None:
        protected.add(db_path.resolve().parent)
    for path in sorted(protected):
        real = path.resolve()
        if scratch == real or scratch in real.parents:
            raise UsageError(
                f"scratch folder {scratch} contains {real}, which the kernel must not write. "
                "Choose a scratch folder outside it (a subfolder of the store is fine)"
            )


def _host_limits(worker: WorkerProcess) -> str:
    # What the host enforces from outside the worker, added to the rlimits layer's detail.
    return worker.limits_detail()


def _capped(reply: dict[str, Any], key: str, cap: int) -> tuple[str, int]:
    text, hidden = reply.get(key, ""), reply.get(f"{key}_hidden", 0)
    if not isinstance(text, str) or not isinstance(hidden, int) or hidden < 0:
        raise ProtocolError(f"result frame has a malformed {key}")
    extra = max(0, len(text) - cap)
    return text[:cap], hidden + extra


def _killed_text(limit: float, grace: float) -> str:
    return (
        f"the cell ran past its {limit:g} s timeout and did not stop within {grace:g} s of the "
        "interrupt (a loop in C code, or a cell that blocks SIGINT); the worker was killed"
    )


def _tail(worker: WorkerProcess) -> str:
    text = worker.output.text(0.5).strip()
    if not text:
        return ""
    return f"; its last output (untrusted) was:\n{text[-1500:]}"
