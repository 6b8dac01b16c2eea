"""The kernel registry every front door shares: real sandboxed workers, real threads, /proc."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from procs import alive, cpu_ticks, wait_for
from scrollctx.errors import KernelError, SessionLimit, UnknownSession
from scrollctx.kernel import CellResult, Kernel
from scrollctx.log import EventLog
from scrollctx.serve import KernelRegistry, log_name


class Clock:
    """A clock the test moves by hand (idle accounting)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def registry(event_log: EventLog) -> Iterator[KernelRegistry]:
    made = KernelRegistry(
        lambda name: Kernel(event_log=event_log, session_id=name, timeout=30.0), "test"
    )
    yield made
    made.close_all()


def in_thread(call: Callable[[], CellResult]) -> CellResult:
    """Run ``call`` on a fresh thread that has exited when this returns."""
    results: list[CellResult] = []
    thread = threading.Thread(target=lambda: results.append(call()))
    thread.start()
    thread.join()
    return results[0]


def start_spinning(registry: KernelRegistry, key: str) -> tuple[threading.Thread, list[CellResult]]:
    """Start a cell that never ends on another thread; return once it burns CPU."""
    registry.run_cell(key, "1", create=False)  # the worker runs, idle
    kernel = registry.kernel(key)
    assert kernel is not None and kernel.pid is not None
    pid, idle = kernel.pid, cpu_ticks(kernel.pid)
    results: list[CellResult] = []
    source = "while True:\n    pass"
    thread = threading.Thread(target=lambda: results.append(registry.run_cell(key, source)))
    thread.start()
    wait_for(lambda: cpu_ticks(pid) > idle + 20, "the cell to spin")
    return thread, results


def test_variables_survive_calls_from_threads_that_have_ended(registry: KernelRegistry) -> None:
    # The first call starts the worker on a thread that then exits (like an SDK worker thread
    # retiring); a worker tied to that thread would die with it and lose the namespace.
    first = in_thread(lambda: registry.run_cell("conn", "x = 41"))
    assert first.ok, first.error
    second = in_thread(lambda: registry.run_cell("conn", "print(x + 1)"))
    assert second.stdout.strip() == "42"
    assert not second.namespace_lost


def test_sessions_do_not_see_each_other(registry: KernelRegistry) -> None:
    registry.run_cell("a", "secret = 'only a'")
    other = registry.run_cell("b", "print(secret)")
    assert "NameError" in (other.error or "")
    assert registry.kernel("a") is not registry.kernel("b")


def test_a_session_logs_under_a_digest_never_under_its_handle(
    registry: KernelRegistry, event_log: EventLog
) -> None:
    handle = registry.mint()
    registry.run_cell(handle, "1", create=False)
    sessions = {row[0] for row in event_log.execute("SELECT session_id FROM conversation_history")}
    assert sessions == {log_name("test", handle)}
    assert not any(handle in session for session in sessions)


def test_closing_mid_cell_stops_the_worker_and_leaves_none(registry: KernelRegistry) -> None:
    handle = registry.mint()
    thread, results = start_spinning(registry, handle)
    kernel = registry.kernel(handle)
    assert kernel is not None
    pid = kernel.pid
    assert alive(pid)
    registry.close(handle, "the client went away mid-cell")
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert results[0].namespace_lost  # the cell did not finish; its result says so
    assert not alive(pid)
    assert kernel.pid is None  # the worker the kernel restarted after the kill is closed too
    with pytest.raises(UnknownSession, match="the client went away mid-cell"):
        registry.run_cell(handle, "1", create=False)


def test_a_named_session_gets_a_fresh_kernel_that_says_the_namespace_was_lost(
    registry: KernelRegistry,
) -> None:
    registry.run_cell("conn", "x = 1")
    registry.close("conn", "the session ended")
    result = registry.run_cell("conn", "print('x' in dir())")
    assert result.stdout.strip() == "False"
    assert result.namespace_lost
    assert "previous kernel was closed (the session ended)" in (result.kernel_notice or "")


def test_an_unknown_handle_is_refused_without_creating_a_kernel(registry: KernelRegistry) -> None:
    with pytest.raises(UnknownSession, match="never issued"):
        registry.run_cell("made-up", "1", create=False)
    assert len(registry) == 0


def test_idle_kernels_are_reaped(event_log: EventLog) -> None:
    clock = Clock()
    registry = KernelRegistry(
        lambda name: Kernel(event_log=event_log, session_id=name), "idle",
        idle_timeout=60, clock=clock,
    )  # fmt: skip
    try:
        handle = registry.mint()
        registry.run_cell(handle, "x = 1", create=False)
        kernel = registry.kernel(handle)
        assert kernel is not None
        pid = kernel.pid
        clock.now += 59
        assert registry.reap() == []
        clock.now += 2
        assert registry.reap() == [handle]
        assert not alive(pid)
        with pytest.raises(UnknownSession, match="idle for over 60 s"):
            registry.run_cell(handle, "x", create=False)
    finally:
        registry.close_all()


def test_the_least_recently_used_idle_kernel_makes_room(event_log: EventLog) -> None:
    clock = Clock()
    registry = KernelRegistry(
        lambda name: Kernel(event_log=event_log, session_id=name), "lru",
        max_kernels=2, clock=clock,
    )  # fmt: skip
    try:
        registry.run_cell("old", "1")
        clock.now += 1
        registry.run_cell("recent", "1")
        old = registry.kernel("old")
        assert old is not None
        old_pid = old.pid
        clock.now += 1
        registry.run_cell("new", "1")
        assert registry.kernel("old") is None and registry.kernel("recent") is not None
        assert not alive(old_pid)
        again = registry.run_cell("old", "1")
        assert "least recently used" in (again.kernel_notice or "")
    finally:
        registry.close_all()


def test_no_room_when_every_kernel_runs_a_cell(event_log: EventLog) -> None:
    registry = KernelRegistry(
        lambda name: Kernel(event_log=event_log, session_id=name, timeout=30.0), "full",
        max_kernels=1,
    )  # fmt: skip
    try:
        busy = registry.mint()
        thread, _ = start_spinning(registry, busy)
        with pytest.raises(SessionLimit, match="all 1 kernels are running cells"):
            registry.mint()
    finally:
        registry.close_all()
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_close_all_stops_running_cells_and_refuses_new_kernels(event_log: EventLog) -> None:
    registry = KernelRegistry(
        lambda name: Kernel(event_log=event_log, session_id=name, timeout=30.0), "all"
    )
    idle = registry.mint()
    registry.run_cell(idle, "1", create=False)
    busy = registry.mint()
    thread, _ = start_spinning(registry, busy)
    kernels = [registry.kernel(idle), registry.kernel(busy)]
    pids = [k.pid for k in kernels if k is not None]
    registry.close_all()
    assert not any(alive(pid) for pid in pids)
    assert all(k is not None and k.pid is None for k in kernels)
    thread.join(timeout=30)
    with pytest.raises(KernelError, match="server shut down"):
        registry.run_cell("late", "1")
