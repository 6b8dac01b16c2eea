"""Timeouts, crashes and restarts with real workers: what survives and what the model is told."""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import Session, assert_worker_dies_with_killed_host

from scrollctx.errors import WorkerCrashed
from scrollctx.kernel import NAMESPACE_LOST, Kernel, render_observation
from scrollctx.log import EventLog, Kind


def _system_events(session: Session) -> list[str]:
    return [e.content for e in session.log.session_events("k1") if e.kind == Kind.SYSTEM]


def test_runaway_python_loop_is_interrupted_and_the_namespace_kept(own: Session) -> None:
    kernel = own.kernel
    kernel.run_cell("kept = 'still here'")
    pid = kernel.pid
    result = kernel.run_cell("while True:\n    pass", timeout=0.3)
    assert result.timed_out and result.interrupted and not result.namespace_lost
    assert result.error is not None
    assert "interrupted; the namespace is kept" in result.error
    assert result.error.rstrip().endswith("KeyboardInterrupt")
    assert kernel.pid == pid
    assert kernel.run_cell("print(kept)").stdout == "still here\n"


def test_loop_in_c_is_killed_and_the_next_observation_says_namespace_lost(own: Session) -> None:
    kernel = own.kernel
    kernel.run_cell("kept = 1")
    old_pid = kernel.pid
    result = kernel.run_cell("sum(range(10**12))", timeout=0.3)
    assert result.timed_out and result.namespace_lost
    assert result.error is not None and "worker was killed" in result.error
    text = render_observation(result)
    assert text.startswith(f"[kernel] {NAMESPACE_LOST}")
    assert kernel.pid != old_pid
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid or 0, 0)
    after = kernel.run_cell("print('fresh')\nkept")
    assert after.stdout == "fresh\n"
    assert after.error is not None and "NameError" in after.error
    assert any("restarted" in text for text in _system_events(own))


def test_cell_that_ignores_sigint_is_killed(own: Session) -> None:
    kernel = own.kernel
    result = kernel.run_cell(
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        timeout=0.3,
    )
    assert result.timed_out and result.namespace_lost
    assert kernel.run_cell("print(1 + 1)").stdout == "2\n"


@pytest.mark.parametrize(
    ("cell", "how"),
    [
        ("import os\nos._exit(7)", "exit code 7"),
        ("import ctypes\nctypes.string_at(0)", "killed by SIGSEGV"),
    ],
)
def test_worker_death_during_a_cell_restarts_it_with_a_notice(
    own: Session, cell: str, how: str
) -> None:
    kernel = own.kernel
    kernel.run_cell("kept = 1")
    before = [e.seq for e in own.log.session_events("seed")]
    result = kernel.run_cell(cell)
    assert result.namespace_lost and not result.ok
    assert result.error is not None and how in result.error
    assert render_observation(result).startswith("[kernel] ")
    assert kernel.run_cell("'kept' in globals()").stdout == "False\n"
    assert [e.seq for e in own.log.session_events("seed")] == before
    own.log.check()


def test_worker_killed_between_cells_is_restarted_and_the_next_cell_says_so(
    own: Session,
) -> None:
    kernel = own.kernel
    kernel.run_cell("kept = 1")
    pid = kernel.pid or 0
    exited = os.pidfd_open(pid)  # readable once the process has ended
    os.kill(pid, signal.SIGKILL)
    select.select([exited], [], [], 10)
    os.close(exited)
    result = kernel.run_cell("print('after')")
    assert result.stdout == "after\n"
    assert result.namespace_lost
    assert result.kernel_notice is not None
    assert "killed by SIGKILL" in result.kernel_notice and NAMESPACE_LOST in result.kernel_notice


def test_restart_on_request_loses_the_namespace_and_says_so_once(own: Session) -> None:
    kernel = own.kernel
    kernel.run_cell("kept = 1")
    kernel.restart()
    first = kernel.run_cell("'kept' in globals()")
    assert first.namespace_lost and first.stdout == "False\n"
    assert not kernel.run_cell("1").namespace_lost


def test_close_stops_the_worker_and_removes_its_own_scratch(tmp_path: Path) -> None:
    kernel = Kernel()
    kernel.start()
    pid, scratch = kernel.pid, kernel.scratch
    assert scratch.is_dir()
    kernel.close()
    assert not scratch.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid or 0, 0)


def test_close_twice_or_after_the_scratch_is_gone_is_quiet(tmp_path: Path) -> None:
    kernel = Kernel()
    kernel.start()
    scratch = kernel.scratch
    kernel.close()
    kernel.close()  # a with-block's exit after an explicit close
    assert not scratch.exists()


def test_only_the_store_path_may_be_passed_by_position(tmp_path: Path) -> None:
    store = tmp_path / "store" / "history.db"
    with EventLog.open(store) as log:
        with Kernel(db_path=store, scratch=tmp_path / "a") as by_name:
            assert by_name.db_path == store.resolve()
        with pytest.raises(TypeError):
            Kernel(store, log)  # type: ignore[misc]


def test_a_worker_that_cannot_start_raises_worker_crashed(tmp_path: Path) -> None:
    # /bin/false is a real interpreter stand-in that exits at once: start-up must fail loudly.
    kernel = Kernel(scratch=tmp_path / "scratch", python="/bin/false")
    with pytest.raises(WorkerCrashed, match="failed to start"):
        kernel.start()
    kernel.close()


def _start_on_stand_in(tmp_path: Path, body: str, **options: Any) -> str:
    """Start a kernel whose interpreter is a stand-in running ``body`` (no sandbox layer: the
    stand-in lives outside what one shows); return the WorkerCrashed message."""
    stand_in = tmp_path / "stand-in-python"
    stand_in.write_text(f"#!{sys.executable}\nimport os, struct, sys, time\n{body}")
    stand_in.chmod(0o755)
    kernel = Kernel(scratch=tmp_path / "scratch", python=str(stand_in), sandbox="off", **options)
    try:
        with pytest.raises(WorkerCrashed) as failed:
            kernel.start()
    finally:
        kernel.close()
    return str(failed.value)


_NOISE = "sys.stderr.write('e' * 2000 + 'x' * 1500)\nsys.stderr.flush()\n"


def test_a_worker_that_cannot_start_shows_the_last_1500_characters_of_its_output(
    tmp_path: Path,
) -> None:
    # Writes 3,500 characters and exits: the error ends with the last 1,500 of them, exactly.
    failed = _start_on_stand_in(tmp_path, _NOISE + "sys.exit(3)\n")
    assert "failed to start" in failed
    assert f"its output ended with: {'x' * 1500!r}" in failed


def test_a_worker_that_never_answers_boot_is_given_up_after_boot_timeout(tmp_path: Path) -> None:
    # Hangs (a wedged start): the host stops waiting and says so.
    failed = _start_on_stand_in(tmp_path, "time.sleep(60)\n", boot_timeout=0.5)
    assert "did not report ready within 0.5 s" in failed


def test_a_worker_that_answers_boot_with_something_else_shows_its_output(
    tmp_path: Path,
) -> None:
    # Writes 3,500 characters, then a well-formed frame that is not "ready".
    hello = (
        "fd = int(sys.argv[sys.argv.index('--fd-out') + 1])\n"
        'body = b\'{"op": "hello"}\'\n'
        "os.write(fd, struct.pack('>IQ', len(body), 0) + body)\nsys.exit(0)\n"
    )
    failed = _start_on_stand_in(tmp_path, _NOISE + hello)
    assert "did not report ready" in failed
    assert f"its output ended with: {'x' * 1500!r}" in failed


def test_worker_exits_when_the_host_goes_away_despite_threads_left_running(
    own: Session,
) -> None:
    # A host that dies closes its pipe ends; the worker must not linger for a thread a cell
    # started (Python would wait for a non-daemon thread at shutdown, with nobody watching).
    kernel = own.kernel
    kernel.run_cell(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,)).start()"
    )
    pid = kernel.pid or 0
    exited = os.pidfd_open(pid)
    worker = kernel._worker
    assert worker is not None
    worker._close_pipes()  # what the host's death does to the worker's control pipe
    assert select.select([exited], [], [], 30)[0], "the worker outlived its host"
    os.close(exited)
    assert kernel.run_cell("print('after')").stdout == "after\n"


def test_worker_busy_in_a_cell_exits_when_its_host_is_killed(tmp_path: Path) -> None:
    # A host killed outright cannot interrupt its worker; the worker must not be left behind as
    # a spinning orphan.
    cell = "announce()\nwhile True:\n    pass"
    assert_worker_dies_with_killed_host(tmp_path / "scratch", cell)


def test_a_kernel_started_from_a_thread_that_ended_keeps_its_worker(tmp_path: Path) -> None:
    # The MCP server and the proxy start kernels from pool threads that come and go; a worker
    # dies with the *thread* that started it, so every worker is started from one spawner
    # thread that lives as long as the host.
    kernel = Kernel(scratch=tmp_path / "scratch")
    starter = threading.Thread(target=kernel.start)
    starter.start()
    starter.join()
    try:
        pid = kernel.pid
        first = kernel.run_cell("print('alive')")
        assert first.stdout == "alive\n" and not first.namespace_lost, first.error
        assert kernel.pid == pid
    finally:
        kernel.close()
