"""The namespaces layer on its own, with real bubblewrap: each check with the others bypassed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import Session, open_session

from needs import missing
from scrollctx.kernel import SandboxPolicy, render_observation
from scrollctx.kernel._namespace import (
    foreign_namespaces,
    host_namespaces,
    launch_problem,
    sandbox_command,
    worker_reads,
)

_SELF_TEST = """
import json, sys
from scrollctx.kernel._sandbox import SandboxPlan, _SelfTestFailed, _check_namespaces
plan = SandboxPlan(apply=(), unavailable=(), limits={}, scratch=sys.argv[1], db_path=None,
                   namespaces=json.loads(sys.argv[2]))
try:
    print("ok", _check_namespaces(plan))
except _SelfTestFailed as exc:
    print("failed", exc)
"""


def _bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        missing("bwrap not found: apt install bubblewrap")
    return found


def self_test_in(tmp_path: Path, *, drop: tuple[str, ...] = (), add: tuple[str, ...] = ()) -> str:
    """Run the worker's namespaces self-test in real bwrap, its command changed by ``drop``
    (options, or ``"--remount-ro /"``) and ``add`` (options put first)."""
    python = sys.executable
    argv = [python, "-I", "-c", _SELF_TEST, str(tmp_path), json.dumps(host_namespaces())]
    info_read, info_write = os.pipe()
    reads = worker_reads(python)
    command = sandbox_command(
        _bwrap(), argv, reads=reads, scratch=str(tmp_path), scratch_size=2**20, info_fd=info_write
    )
    for option in drop:
        words = option.split()
        at = next(i for i in range(len(command)) if command[i : i + len(words)] == words)
        del command[at : at + len(words)]
    command[1:1] = add
    try:
        done = subprocess.run(command, pass_fds=(info_write,), capture_output=True, check=False)
    finally:
        os.close(info_read)
        os.close(info_write)
    return done.stdout.decode() + done.stderr.decode()


def test_the_self_test_passes_in_the_namespaces_the_host_makes(tmp_path: Path) -> None:
    said = self_test_in(tmp_path)
    assert said.startswith("ok private mount, PID, IPC and UTS namespaces: the worker is pid 1")
    assert "etc" not in said.split("holds only")[1]


@pytest.mark.parametrize(
    ("drop", "add", "said"),
    [
        (("--unshare-ipc",), (), "the worker shares the host's ipc namespace"),
        (("--unshare-uts",), (), "the worker shares the host's uts namespace"),
        (("--unshare-pid", "--as-pid-1"), (), "the worker shares the host's pid namespace"),
        (("--as-pid-1",), (), "the worker is pid 2, not 1, in its namespace"),
        ((), ("--ro-bind", "/etc", "/etc"), "the root also holds ['etc']"),
        (("--remount-ro /",), (), "the root is writable"),
    ],
    ids=["ipc", "uts", "pid", "not-pid-1", "extra-root-entry", "writable-root"],
)
def test_each_namespace_check_fails_when_its_part_is_missing(
    tmp_path: Path, drop: tuple[str, ...], add: tuple[str, ...], said: str
) -> None:
    assert self_test_in(tmp_path, drop=drop, add=add) == f"failed self-test: {said}\n"


def test_the_host_checks_the_namespaces_from_outside(shared: Session) -> None:
    # The worker's own report is the worker's word; the host compares /proc/<pid>/ns itself.
    assert foreign_namespaces(os.getpid()) == (
        "the host sees the worker in its own mnt, pid, ipc, uts namespace(s)"
    )
    assert foreign_namespaces(shared.kernel.pid or 0) is None
    assert shared.kernel.start().layer("namespaces").holds


@pytest.fixture
def fresh_launch_probe() -> Iterator[None]:
    """Forget whether bwrap works here, before and after the test that changes PATH."""
    launch_problem.cache_clear()
    yield
    launch_problem.cache_clear()


def test_strict_refuses_and_names_the_cause_when_bwrap_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_launch_probe: None
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-folder"))
    session = open_session(tmp_path)
    try:
        status = session.kernel.start()
        layer = status.layer("namespaces")
        assert (layer.state, layer.detail) == (
            "unavailable",
            "bwrap not found: apt install bubblewrap",
        )
        assert [s.name for s in status.missing] == ["namespaces"] and session.kernel.pid is None
        result = session.kernel.run_cell("open('pwned', 'w').write('x')")
        assert result.refused and result.error is not None
        assert "namespaces (unavailable: bwrap not found: apt install bubblewrap)" in result.error
        assert "sandbox='best-effort'" in result.error and not (tmp_path / "scratch/pwned").exists()
    finally:
        session.kernel.close()
        session.log.close()


def test_best_effort_runs_without_namespaces_bwrap_cannot_make_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_launch_probe: None
) -> None:
    # A bwrap that fails stands in for a kernel that refuses the namespaces (user namespaces
    # disabled, Ubuntu's AppArmor restriction, a container without unshare).
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").symlink_to(shutil.which("false") or "/bin/false")
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    policy = SandboxPolicy("best-effort")
    session = open_session(tmp_path, sandbox=policy)
    try:
        layer = session.kernel.start().layer("namespaces")
        assert layer.state == "unavailable"
        assert layer.detail.startswith("bwrap could not create the namespaces (1)")
        result = session.kernel.run_cell("print('ran')")
        assert result.stdout == "ran\n"
        assert render_observation(result).splitlines()[0] == (
            "[sandbox] opt-out 'best-effort': layers not holding: namespaces"
        )
    finally:
        session.kernel.close()
        session.log.close()


def test_without_seccomp_no_process_outside_the_pid_namespace_can_be_named(
    tmp_path: Path,
) -> None:
    # Attack 2 on a machine without seccomp (non-x86_64): F_SETOWN, FIOSETOWN and kill need a
    # pid, and the host's processes have none in the worker's PID namespace.
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    policy = SandboxPolicy("best-effort", unavailable=frozenset({"seccomp", "landlock"}))
    session = open_session(tmp_path, sandbox=policy)
    try:
        assert session.kernel.start().layer("namespaces").holds
        cell = (
            "import errno, fcntl, os, signal, socket, struct\nout = {}\nr, w = os.pipe()\n"
            "a, b = socket.socketpair()\n"
            f"for name, call in [('F_SETOWN', lambda: fcntl.fcntl(r, 8, {victim.pid})),"
            f" ('FIOSETOWN', lambda: fcntl.ioctl(a, 0x8901, struct.pack('i', {victim.pid}))),"
            f" ('kill', lambda: os.kill({victim.pid}, 0)),"
            f" ('kill_host', lambda: os.kill({os.getpid()}, 0))]:\n"
            "    try:\n        call()\n        out[name] = 'DONE'\n"
            "    except OSError as e:\n        out[name] = errno.errorcode[e.errno]\n"
            "fcntl.fcntl(r, 10, signal.SIGKILL)\n"
            "fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)\nos.write(w, b'x')\n"
            "print(out)"
        )
        result = session.kernel.run_cell(cell)
        assert result.stdout == str(dict.fromkeys(["F_SETOWN", "FIOSETOWN", "kill", "kill_host"],
                                                  "ESRCH")) + "\n", result.error  # fmt: skip
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
        session.kernel.close()
        session.log.close()
