"""Run one cell in the worker's persistent namespace and capture what it printed.

Jupyter semantics: the source is parsed once; if its last statement is an expression, its value
is printed (``repr``) and bound to ``_``. Top-level ``await`` works (one event loop lives for the
whole session, so tasks survive between cells). Tracebacks show cell frames only, with the
source lines (each cell is registered in :mod:`linecache` as ``<cell-N>``).

SIGINT raises ``KeyboardInterrupt`` only while model code runs; the handler is re-installed
before every cell (a cell may replace it) and ignores signals that arrive between cells, so a
late interrupt never tears a reply frame. While the cell's own thread writes a frame (a tool or
``ms`` call), an interrupt is held back and raised once the frame is out
(:meth:`CellRunner.deferred_interrupts`).
"""

from __future__ import annotations

import ast
import inspect
import io
import linecache
import os
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType, FrameType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["CappedText", "CellOutcome", "CellRunner"]

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_KERNEL_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class CappedText(io.TextIOBase):
    """A text stream that keeps the first ``cap`` characters and counts the rest."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.hidden = 0
        self._parts: list[str] = []
        self._kept = 0

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = max(0, self.cap - self._kept)
        if room:
            self._parts.append(text[:room])
            self._kept += min(room, len(text))
        self.hidden += max(0, len(text) - room)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)

    @property
    def buffer(self) -> _BytesInto:
        """A binary view (``sys.stdout.buffer.write(b"...")``), decoded as UTF-8 into the text."""
        return _BytesInto(self)


class _BytesInto(io.RawIOBase):
    """Binary writes decoded (UTF-8, invalid bytes replaced) into a :class:`CappedText`."""

    def __init__(self, text: CappedText) -> None:
        super().__init__()
        self._text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._text.write(chunk.decode("utf-8", "replace"))
        return len(chunk)


@dataclass(slots=True)
class CellOutcome:
    """What a cell left behind, before the worker adds the digest and notes."""

    stdout: str
    stdout_hidden: int
    stderr: str
    stderr_hidden: int
    error: str | None
    interrupted: bool


class CellRunner:
    """Executes cells in one namespace; holds the session's event loop."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.count = 0
        self._interruptible = False
        self._deferred: bool | None = None  # None: not deferring; True: an interrupt waits
        self._loop: asyncio.AbstractEventLoop | None = None

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._deferred is not None:
            self._deferred = self._deferred or self._interruptible
        elif self._interruptible:
            raise KeyboardInterrupt

    @contextmanager
    def deferred_interrupts(self) -> Iterator[None]:
        """Hold an interrupt back for the block (call it on the main thread only)."""
        self._deferred = False
        try:
            yield
        finally:
            pending, self._deferred = self._deferred, None
            if pending and self._interruptible:
                raise KeyboardInterrupt

    def run(
        self, source: str, *, stdout_cap: int, stderr_cap: int, index: int | None = None
    ) -> CellOutcome:
        """Run ``source`` as cell ``index``; never raises for anything the cell does."""
        self.count += 1
        filename = f"<cell-{index or self.count}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        out, err = CappedText(stdout_cap), CappedText(stderr_cap)
        saved = sys.stdout, sys.stderr
        signal.signal(signal.SIGINT, self._on_sigint)
        sys.stdout, sys.stderr = out, err
        error: str | None = None
        interrupted = False
        try:
            self._execute(source, filename)
        except KeyboardInterrupt as exc:
            interrupted = True
            error = _format(exc)
        except BaseException as exc:  # noqa: BLE001 - the cell's failure is its observation
            error = _format(exc)
        finally:
            self._interruptible = False
            sys.stdout, sys.stderr = saved
            signal.signal(signal.SIGINT, self._on_sigint)  # undo a handler the cell installed
        return CellOutcome(
            out.getvalue(), out.hidden, err.getvalue(), err.hidden, error, interrupted
        )

    def _execute(self, source: str, filename: str) -> None:
        tree = ast.parse(source, filename, mode="exec")
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body[-1].value
            tree.body.pop()
        body = compile(tree, filename, "exec", flags=_FLAGS)
        tail = compile(ast.Expression(last), filename, "eval", flags=_FLAGS) if last else None
        self._interruptible = True
        try:
            self._evaluate(body)
            value = self._evaluate(tail) if tail is not None else None
        finally:
            self._interruptible = False
        if value is not None:
            self.namespace["_"] = value
            print(repr(value))

    def _evaluate(self, code: CodeType) -> Any:
        if not code.co_flags & inspect.CO_COROUTINE:
            return eval(code, self.namespace)
        if self._loop is None or self._loop.is_closed():
            self._loop = _session_loop()
        return self._loop.run_until_complete(eval(code, self.namespace))


def _session_loop() -> asyncio.AbstractEventLoop:
    # The loop a synchronous cell reaches through asyncio.get_event_loop() (ensure_future, ...)
    # must be the one top-level await runs on, or tasks end up on two loops. asyncio is
    # imported here, at the first top-level await: most sessions never pay for it at start.
    import asyncio

    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:
        loop = None
    if loop is None or loop.is_closed():
        loop = policy.new_event_loop()
        policy.set_event_loop(loop)
    return loop


def _format(exc: BaseException) -> str:
    report = traceback.TracebackException(
        type(exc), exc, _cell_frames(exc.__traceback__), compact=True
    )
    _drop_kernel_frames(report, set())
    return "".join(report.format()).rstrip("\n")


def _cell_frames(tb: TracebackType | None) -> TracebackType | None:
    # Drop the kernel's own frames (and asyncio's) above the first frame of cell code.
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    return tb


def _drop_kernel_frames(report: traceback.TracebackException, seen: set[int]) -> None:
    # The tool stubs and the SIGINT handler are kernel plumbing, not the model's code.
    if id(report) in seen:
        return
    seen.add(id(report))
    kept = [f for f in report.stack if not f.filename.startswith(_KERNEL_DIR)]
    report.stack = traceback.StackSummary.from_list(kept)
    for linked in (report.__cause__, report.__context__):
        if linked is not None:
            _drop_kernel_frames(linked, seen)
