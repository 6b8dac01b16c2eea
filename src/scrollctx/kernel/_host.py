"""The host side of the kernel: :class:`Kernel` runs cells in a sandboxed persistent worker.

Guarantees (on Linux with every layer holding, i.e. the ``strict`` profile's condition):

- model code runs only in the worker, never in the host; the worker cannot write outside its
  scratch folder, open network sockets, spawn processes, raise its limits, trace or signal the
  host (see :mod:`scrollctx.kernel._policy` for each layer), and it holds no path to the store:
  ``ms`` calls cross to a memory reader process (:mod:`._reader`), the first through the host,
  later ones over the worker's own channel to it; the host bounds each call's time (on the
  channel through its watch over the reader's call clock) and each reply's size;
- the host trusts nothing the worker sends after its boot report: a frame is checked by its
  header before it is read (its size against what the protocol needs, its request id against
  the running cell: anything else gets the worker killed and restarted, at O(1) cost), then
  shape-checked (nesting and integer length included); every field of a result is capped before
  it becomes an observation, and a refusal is the host's decision, never a field of a frame;
  nothing the worker sends raises out of :meth:`Kernel.run_cell`;
- the host caps the worker's threads (``pids`` cgroup, where writable) and kills a worker that
  writes past its scratch quota, leaves the disk under its floor or burns CPU between cells
  (:mod:`._quota`);
- a cell past its timeout is interrupted (namespace kept); one that ignores the interrupt for the
  grace period, or a worker that dies, is killed and restarted, and the observation says the
  namespace was lost;
- the worker reaches only the tools the host declared; each call is logged as a tool-call and a
  tool-result event (full result; the Event Log externalizes large ones); calls and their sizes
  are bounded per cell and per session, so forged calls cannot make the host write without end;
  an Event Log that refuses a write during a cell (locked, full) costs that call, is said in the
  observation and logged once the log works again, and never raises out of ``run_cell``.

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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from scrollctx.errors import CellTimeout, ProtocolError, StoreError, UsageError, WorkerCrashed
from scrollctx.kernel._ahead import first_ms_call
from scrollctx.kernel._bridge import (
    MAX_TOOL_INPUT,
    ToolSpec,
    answer_tool_call,
    describe_tools,
    refuse_tool_call,
)
from scrollctx.kernel._digest import parse_digest
from scrollctx.kernel._frames import MAX_FRAME, Body, encode_frame, frame_parts, is_count
from scrollctx.kernel._journal import KernelJournal
from scrollctx.kernel._namespace import namespace_request
from scrollctx.kernel._policy import SandboxPolicy, SandboxStatus, parse_layers, resolve_policy
from scrollctx.kernel._process import WorkerProcess, default_python
from scrollctx.kernel._reader_host import MemoryReader, ReaderLimits
from scrollctx.kernel._result import CellResult, cap_error, cap_notes, result_frame_limit
from scrollctx.log import EventStore
from scrollctx.surface import Budgets
from scrollctx.surface._filters import Binding
from scrollctx.surface._remote import error_reply

__all__ = [
    "Kernel",
    "NAMESPACE_LOST",
    "OPT_OUT",
    "reader_opt_out",
]

NAMESPACE_LOST = (
    "the worker was restarted, so the namespace was lost: every variable, import and function "
    "from earlier cells is gone; re-create what you need"
)
OPT_OUT = "Kernel(sandbox='best-effort') or 'off' (scroll exec --sandbox best-effort|off)"
"""How a refusal tells the caller to opt out, unless the kernel is given its own words."""
_FRAME_OVERHEAD = 4096


def _explicit_opt_out(how: str) -> str:
    """The end of a refused cell's message: how to opt out, and that opting out is visible."""
    return f"opt out explicitly: {how}; the opt-out is logged and shown in every observation"


def reader_opt_out(how: str) -> str:
    """The end of a memory reader's refusal (its sandbox does not hold): how to opt out."""
    return f"To read it without them, {_explicit_opt_out(how)}"


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
            (a larger call is logged without them and not run; an ``ms`` call larger than this
            is refused in the worker). Both keep a hostile cell from filling the host's disk
            through the log.
        session_tool_calls, session_log_bytes: the same bound over the kernel's whole session
            (every cell, across restarts): bridged calls, and bytes of arguments and results
            they logged. Past either, calls are answered with an error, neither run nor
            logged, and the observation says so. The defaults are far above any real agent's
            session (50,000 calls; 1 GiB).
        budgets: the per-call time, row and byte budgets of ``ms``; ``reader_limits``: the
            memory reader's own limits (:class:`ReaderLimits`: memory, one value, one reply).
        opt_out: how whoever runs this kernel opts out of a layer, named in a refusal (a
            front door names its own flag, e.g. ``scroll mcp --sandbox best-effort``); default
            :data:`OPT_OUT`.
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
        session_tool_calls: int = 50_000,
        session_log_bytes: int = 1024**3,
        budgets: Budgets | None = None,
        reader_limits: ReaderLimits | None = None,
        opt_out: str = OPT_OUT,
    ) -> None:
        if not (timeout > 0 and grace > 0 and boot_timeout > 0):
            raise UsageError(f"timeouts must be positive (timeout={timeout}, grace={grace})")
        if stdout_cap < 1 or stderr_cap < 1:
            raise UsageError(f"output caps must be positive ({stdout_cap}, {stderr_cap})")
        calls, sizes = (max_tool_calls, session_tool_calls), (max_tool_input, session_log_bytes)
        if min(calls) < 0 or min(sizes) < 1:
            raise UsageError(f"tool-call limits must be positive ({calls}, {sizes})")
        self.max_tool_calls, self.max_tool_input = max_tool_calls, max_tool_input
        self.session_tool_calls, self.session_log_bytes = session_tool_calls, session_log_bytes
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
        self.budgets = budgets or Budgets()
        self.opt_out = _explicit_opt_out(opt_out)
        self.reader = (
            MemoryReader(self.db_path, Binding(session_id, task_id, agent_id), policy=self.policy,
                         budgets=self.budgets, limits=reader_limits, python=self.python,
                         opt_out=reader_opt_out(opt_out),
                         on_ready=self._reader_ready, max_request=max_tool_input,
                         idle_cpu=self.policy.limits.idle_cpu
                         if "rlimits" in self.policy.applied else None)
            if self.db_path is not None
            else None
        )  # fmt: skip
        """The memory reader that answers this kernel's ``ms`` (None: no Event Log bound); it
        starts on the first ``ms`` call, not with the worker."""
        self.frame_limit = max(
            result_frame_limit(stdout_cap, stderr_cap), max_tool_input + _FRAME_OVERHEAD
        )
        """The largest frame the host accepts from the worker, in bytes."""
        self.status: SandboxStatus | None = None
        self._worker: WorkerProcess | None = None
        self._ids = itertools.count(1)
        self._cells = 0
        self._notice: str | None = None
        self._calls: list[str] = []
        self._host_notes: list[str] = []
        self._store_errors: list[str] = []
        self._session_calls = 0
        self._session_bytes = 0

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

    @property
    def ms_state(self) -> str:
        """``bound`` when ``ms`` reads the store; otherwise why it does not.

        Until the first ``ms`` call starts the memory reader, it is ``NOT_STARTED`` ("not started
        yet: ..."): whether the store opens, and whether the reader's layers hold, is known only
        then (the answer is logged as a ``system`` event, and this property tells it after).
        """
        if self.reader is None:
            return "no Event Log bound (the kernel was started without one)"
        return self.reader.state

    def start_reader(self) -> bool:
        """Start the memory reader now, not on the first ``ms`` call; return whether ``ms`` is
        bound. Like that call's start, it is logged, and it gets the worker's direct channel."""
        if self.reader is None:
            return False
        channel = self._worker.take_channel if self._worker is not None else None
        return self.reader.wait_ready(channel) is not None

    def close(self) -> None:
        """Stop the worker and the memory reader; remove a scratch folder the kernel made."""
        worker, self._worker = self._worker, None
        try:
            if worker is not None:
                worker.stop()
        finally:  # the rest of the cleanup whatever stopping the worker raised
            if self.reader is not None:
                self.reader.close()
            if self._own_scratch:
                shutil.rmtree(self.scratch, ignore_errors=True)

    def _discard(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        if self.reader is not None:
            self.reader.retire()  # its channel led to that worker; the next ms call starts one

    def _refresh(self) -> None:
        # A shared store's local replica: every host's newest rows reach ms before each cell.
        if self.event_log is not None:
            self.event_log.refresh()

    def _boot(self, reason: str) -> SandboxStatus:
        self._refresh()  # the file ms opens must exist (a new host's replica) and be current
        self.scratch.mkdir(parents=True, exist_ok=True)
        applies_limits = "rlimits" in self.policy.applied
        worker = WorkerProcess(
            self.python,
            self.scratch,
            self.policy.limits if applies_limits else None,
            namespaces=namespace_request(self.policy, None),  # no store in its file system
            channel=self.reader is not None,  # ms straight to the reader, past the host
        )
        worker.reader.max_size = self.frame_limit
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
        self.status = status
        self._worker = worker
        self._set_busy(worker, False)
        if not status.holds:
            self._discard()  # fail closed: no unconfined worker is left running
        self._journaled(self.journal.sandbox, status, reason)
        return status

    def _reader_ready(self, status: SandboxStatus) -> None:
        # Each memory reader that reports ready (the first ms call's, then each replacement)
        # is logged with its layers, as a worker start is.
        first = self.reader is None or self.reader.restarts == 0
        reason = "started on the first ms call" if first else "restarted"
        self._journaled(self.journal.memory_reader, status, reason)

    def _journaled(self, write: Callable[..., Any], *args: Any) -> None:
        # A kernel event the Event Log refuses (locked, full) is noted, never raised: the
        # observation says so and the next cell tries to log it.
        try:
            write(*args)
        except StoreError as exc:
            self._store_errors.append(f"{getattr(write, '__name__', 'write')}: {exc}")

    def _handshake(self, worker: WorkerProcess) -> dict[str, Any]:
        deadline = time.monotonic() + self.boot_timeout
        ms = None
        if self.reader is not None:  # the worker's ms is bound as the reader's surface is
            ms = {**asdict(self.reader.binding), "budgets": asdict(self.budgets)}
        boot = {
            "op": "boot",
            "scratch": str(self.scratch),
            "ms": ms,
            "policy": {**self.policy.to_wire(), "namespaces": worker.namespace_facts},
            "tools": [spec.to_wire() for spec in self.tools.values()],
            "tasks": _host_limits(worker),
            "max_tool_input": self.max_tool_input,
        }
        try:
            worker.send(encode_frame(0, boot), deadline)
            ready = worker.reader.read(deadline, expect=0)
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
        if len(source) > MAX_FRAME // 4:
            raise UsageError(
                f"a cell of {len(source):,} characters is too large (at most {MAX_FRAME // 4:,}); "
                "put big data in a file in scratch, or pass it through a tool"
            )
        cell_id = next(self._ids)
        self._refresh()
        # Right after the refresh (a shared store's replica taking other hosts' rows would make
        # an earlier guess stale), before the rest: the reader runs it while that is done.
        self._ask_ahead(source, cell_id)
        self.start()
        self._cells += 1
        notice, self._notice = self._notice, None
        if self.status is not None and not self.status.holds:
            return self._refusal(notice)
        if self._worker is None or not self._worker.is_alive():
            notice = self._revive()
            if self.status is not None and not self.status.holds:
                return self._refusal(notice)
        return self._run(source, cell_id, limit, notice)

    def _revive(self) -> str:
        exit_text = self._worker.exit_text() if self._worker else "not running"
        self._discard()
        self._boot("restarted after the worker ended between cells")
        return f"the worker had ended since the last cell ({exit_text}); " + NAMESPACE_LOST

    def _run(self, source: str, cell_id: int, limit: float, notice: str | None) -> CellResult:
        worker = self._worker
        if worker is None:
            raise WorkerCrashed("no kernel worker is running; call start() or restart()")
        self._calls, self._host_notes = [], []
        self._log_store_errors()
        started = time.monotonic()
        request = {
            "op": "cell",
            "code": source,
            "index": self._cells,
            "stdout_cap": self.stdout_cap,
            "stderr_cap": self.stderr_cap,
        }
        try:
            self._set_busy(worker, True)
            worker.begin_cell()
            worker.send(encode_frame(cell_id, request), started + limit)
            reply, interrupted = self._await(worker, cell_id, started + limit)
            self._set_busy(worker, False)
            synced = worker.end_cell()
            result = self._result(reply, started, limit, interrupted, notice, synced)
            self._log_store_errors()
            return result
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
            frame = worker.reader.read(deadline, expect=cell_id)
            overdue = time.monotonic() > deadline
            if frame is not None and frame.get("op") == "result":
                # Kept even when it comes late: an ms call the host interrupted at the cell's
                # deadline ends the cell at once, and its result may beat the host's interrupt.
                return frame, interrupted or overdue
            if frame is None or overdue:
                if interrupted:
                    raise _Killed
                worker.interrupt()
                if self.reader is not None:  # a call over the channel stops too
                    self.reader.interrupt()
                interrupted = True
                deadline = time.monotonic() + self.grace
                continue
            op = frame.get("op")
            answer_by = max(deadline, time.monotonic() + self.grace)
            if op == "tool_call":
                self._dispatch(worker, frame, cell_id, answer_by)
            elif op == "ms":
                if self._memory(worker, frame, cell_id, deadline, answer_by):
                    interrupted = True  # the host interrupted the cell at its deadline
                    deadline = time.monotonic() + self.grace
            else:
                raise ProtocolError(f"unexpected frame op {str(op)[:40]!r} during a cell")

    def _lost(
        self, error: str, started: float, reason: str, *, timed_out: bool = False
    ) -> CellResult:
        self._discard()
        self._boot(f"restarted {reason}")
        return CellResult(
            error=f"{error}; a fresh worker was started.",
            duration=time.monotonic() - started,
            notes=self._notes(),
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
        synced: list[str],
    ) -> CellResult:
        stdout, stdout_hidden = _capped(reply, "stdout", self.stdout_cap)
        stderr, stderr_hidden = _capped(reply, "stderr", self.stderr_cap)
        error = reply.get("error")
        if error is not None and not isinstance(error, str):
            raise ProtocolError("result frame has a non-text error")
        error = cap_error(error)
        if interrupted and reply.get("interrupted") is True:
            error = (f"the cell ran past its {limit:g} s timeout and was interrupted; "
                     f"the namespace is kept.\n{error or ''}")  # fmt: skip
        notes = reply.get("notes", [])
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise ProtocolError("result frame has malformed notes")
        digest, more = parse_digest(reply.get("digest"))
        return CellResult(
            stdout=stdout,
            stderr=stderr,
            error=error or None,
            duration=time.monotonic() - started,
            digest=digest,
            digest_more=more,
            notes=self._notes([*synced, *notes]),
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

    def _refusal(self, notice: str | None) -> CellResult:
        # Decided here, from the status the worker reported before any model code ran.
        status = self.status
        missing = (
            ", ".join(f"{s.name} ({s.state}: {s.detail})" for s in status.missing) if status else ""
        )
        return CellResult(
            error=(
                f"cell refused: the sandbox profile {self.policy.profile!r} requires layers that "
                f"do not hold here: {missing}. Nothing ran. To run without them, {self.opt_out}. "
                "Run 'scroll kernel doctor' to see which layers this machine offers."
            ),
            refused=True,
            namespace_lost=notice is not None,
            kernel_notice=notice,
            sandbox=status,
            cell_index=self._cells,
        )

    def _notes(self, worker_notes: list[str] | None = None) -> tuple[str, ...]:
        # The host's own notes (trusted, few) first, then the worker's and the scratch sync's
        # (whose text names the cell's files), capped together.
        return (*dict.fromkeys(self._host_notes), *cap_notes(worker_notes or []))

    # -- tool bridge and ms ------------------------------------------------------------------

    def _dispatch(
        self, worker: WorkerProcess, frame: dict[str, Any], cell_id: int, deadline: float
    ) -> None:
        refusal = self._over_budget()
        if refusal is not None:
            worker.send(refuse_tool_call(frame, cell_id, refusal), deadline)
            return
        answered = answer_tool_call(
            frame,
            self.tools,
            self.journal,
            self._cells,
            request=cell_id,
            size=worker.reader.last_size,
            max_input=self.max_tool_input,
        )
        self._calls.append(answered.tool_call_id)
        self._session_calls += 1
        self._session_bytes += answered.logged_bytes
        if answered.store_error is not None:
            self._store_errors.append(f"tool call {answered.tool_call_id}: {answered.store_error}")
            self._host_notes.append(
                f"the Event Log refused a write during this cell ({answered.store_error}); the "
                "call it concerned failed with ToolCallError. Nothing already written is lost"
            )
        worker.send(answered.reply, deadline)

    def _over_budget(self) -> str | None:
        if len(self._calls) >= self.max_tool_calls:
            return (
                f"this cell already made {self.max_tool_calls} tool calls, the limit of one "
                "cell; the call was not run. Batch the work, or continue in the next cell"
            )
        if self._session_calls >= self.session_tool_calls:
            spent = f"{self._session_calls:,} tool calls, the limit of one kernel session"
        elif self._session_bytes >= self.session_log_bytes:
            spent = (
                f"tool calls that logged {self._session_bytes:,} bytes, over the "
                f"{self.session_log_bytes:,}-byte limit of one kernel session"
            )
        else:
            return None
        refusal = (
            f"this session already made {spent}; the call was neither run nor logged. Finish "
            "with what you have, or start a new session"
        )
        self._host_notes.append(refusal)
        return refusal

    def _memory(
        self,
        worker: WorkerProcess,
        frame: dict[str, Any],
        cell_id: int,
        cell_deadline: float,
        answer_by: float,
    ) -> bool:
        """Answer one ``ms`` call; return whether the cell's deadline passed meanwhile."""
        call, what = frame.get("call"), f"ms.{str(frame.get('method'))[:40]}"
        body: Body
        if worker.reader.last_size > self.max_tool_input:
            # The worker refuses such a call itself; this frame was forged.
            raise ProtocolError(
                f"an ms call of {worker.reader.last_size:,} bytes exceeds the "
                f"{self.max_tool_input:,}-byte limit of one call"
            )
        if self.reader is None:  # a forged call: the worker's ms is unbound and never sends
            body = error_reply(call, RuntimeError("ms is not available in this kernel"))
        else:
            body = self.reader.forward(worker.reader.last_body, call, what, until=cell_deadline,
                                       channel=worker.take_channel)  # fmt: skip
        overdue = time.monotonic() > cell_deadline
        if overdue:
            # The reader's query was interrupted for the cell's timeout: the cell is too, before
            # the answer reaches it, so it ends as an interrupted cell, namespace kept.
            worker.interrupt()
        worker.send(frame_parts(cell_id, body), max(answer_by, time.monotonic() + self.grace))
        return overdue

    def _ask_ahead(self, source: str, cell_id: int) -> None:
        # The cell's first ms call, if its text says exactly what it is, is run by the reader
        # while the worker starts the cell (read here, before the cell is sent: parsing it in
        # the reader, beside the worker's start, measured slower); the reader uses the answer
        # only if it is what the call would get then.
        if self.reader is not None and self.reader.answers_ahead:
            request = first_ms_call(source)
            if request is not None:
                self.reader.ask_ahead(cell_id, request)

    def _set_busy(self, worker: WorkerProcess, busy: bool) -> None:
        worker.set_busy(busy)
        if self.reader is not None:
            self.reader.set_busy(busy)

    def _log_store_errors(self) -> None:
        # Writes the Event Log refused earlier, recorded now if it works again (else kept).
        if not self._store_errors:
            return
        failures, self._store_errors = self._store_errors, []
        try:
            self.journal.store_errors(failures, self._cells)
        except StoreError:
            self._store_errors = failures


def _check_scratch(scratch: Path, db_path: Path | None) -> None:
    # The scratch folder is the one place the worker may write. It must not hold the Event
    # Log, and it may neither hold nor lie inside the interpreter or the folder of the code the
    # host and the worker import: a file written there (a .pth, a module) would run in the host.
    code = {Path(sys.prefix), Path(sys.base_prefix), Path(__file__).parents[2]}
    forbidden = [(path.resolve(), True, "overlaps {}, code") for path in sorted(code)]
    if db_path is not None:  # a subfolder of the store is fine: the store's files are beside it
        forbidden.append((db_path.resolve().parent, False, "contains {}, which"))
    for real, nor_inside, overlap in forbidden:
        if scratch == real or scratch in real.parents or (nor_inside and real in scratch.parents):
            raise UsageError(
                f"scratch folder {scratch} {overlap.format(real)} the kernel must not write. "
                "Choose a scratch folder outside it (a subfolder of the store is fine)"
            )


def _host_limits(worker: WorkerProcess) -> str:
    # What the host enforces from outside the worker, added to the rlimits layer's detail.
    return worker.limits_detail()


def _capped(reply: dict[str, Any], key: str, cap: int) -> tuple[str, int]:
    text, hidden = reply.get(key, ""), reply.get(f"{key}_hidden", 0)
    if not isinstance(text, str) or not is_count(hidden):
        raise ProtocolError(f"result frame has a malformed {key} or {key}_hidden")
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
