"""Hostile cells: each attack must fail inside the worker while the host and the log stay whole.

Every test runs the attack in a real sandboxed worker, then checks that the host still works (a
plain cell runs) and that the Event Log passes ``quick_check`` and is byte for byte what it was
(rows, last seq, the database and WAL files' sha256). Attacks that cost the worker its life check
instead that only the kernel's own restart notice was appended.

Attacks on what the sandbox confines (files, processes, signals, syscalls, ``/proc``, the store)
run under every variant of ``sandbox_variant``: strict with the Landlock ABI capped at 1 … 7, and
best-effort without Landlock; they use the ``hostile`` and ``hostile_own`` fixtures. Attacks on
what no Landlock ABI changes (timeouts and kills, the frame protocol, output and memory caps, the
tool bridge's bounds) run once, under the default strict sandbox (``shared`` and ``own``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import pwd
import select
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import (
    WORKER,
    SandboxVariant,
    Session,
    assert_host_unharmed,
    assert_only_restart_logged,
    assert_worker_dies_with_killed_host,
    attack,
    open_session,
)

from needs import missing
from scrollctx.kernel import CellResult, Kernel, Limits, SandboxPolicy, render_observation
from scrollctx.kernel._namespace import worker_reads
from scrollctx.kernel._quota import written_bytes
from scrollctx.log import Kind, NewEvent

_ATTEMPT = (
    "import errno, os\n"
    "def attempt(action):  # 'DONE', or the name of the errno that stopped it\n"
    "    try:\n        action()\n        return 'DONE'\n"
    "    except OSError as exc:\n        return errno.errorcode.get(exc.errno, str(exc.errno))\n"
)
REFUSED = {"EACCES", "EPERM", "EROFS"}
"""What stops a write outside scratch: Landlock (EACCES), seccomp (EPERM), read-only binds."""
HIDDEN = {"EACCES", "ENOENT"}
"""What stops a read of something the worker must not see: Landlock, or its absence there."""


def outcomes(result: CellResult) -> Any:
    """The Python value a cell printed (a list or dict of attempt outcomes)."""
    assert result.error is None, result.error
    return eval(result.stdout)  # noqa: S307 - printed by the cell, on the test's own terms


def sandbox_skeleton(kernel: Kernel, folder: str) -> set[str]:
    """The names a folder outside the worker's mounts may show in its mount namespace: only
    the path components that lead to its own binds (the interpreter, scratch; never the store,
    which only the memory reader reads)."""
    mounts = [*worker_reads(kernel.python), str(kernel.scratch)]
    return {m[len(folder) + 1 :].split("/")[0] for m in mounts if m.startswith(folder + "/")}


_LOOK = _ATTEMPT + (
    "def look(path):  # a folder's names, 'READ' for a file, or the errno that stopped it\n"
    "    try:\n"
    "        if os.path.isdir(path):\n            return sorted(os.listdir(path))\n"
    "        return open(path).read(0) + 'READ'\n"
    "    except OSError as exc:\n        return errno.errorcode.get(exc.errno, str(exc.errno))\n"
)


def assert_unseen(kernel: Kernel, seen: dict[str, Any]) -> None:
    """Each path was hidden or refused; a folder may show no more than the sandbox skeleton."""
    for path, outcome in seen.items():
        if isinstance(outcome, list):
            assert set(outcome) <= sandbox_skeleton(kernel, path), (path, outcome)
        else:
            assert outcome in HIDDEN, (path, outcome)


def _denied(result: CellResult, error: str = "PermissionError") -> None:
    assert result.error is not None, result.stdout
    assert result.error.splitlines()[-1].startswith(error), result.error


@pytest.mark.parametrize("kind", ["SOCK_STREAM", "SOCK_DGRAM"])
def test_open_tcp_or_udp_socket(hostile: Session, kind: str) -> None:
    result, before = attack(hostile, f"import socket\nsocket.socket(socket.AF_INET, socket.{kind})")
    _denied(result)
    assert_host_unharmed(hostile, before)


def test_connect_to_a_loopback_service_started_by_the_test(hostile: Session) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        result, before = attack(
            hostile,
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)",
        )
        _denied(result)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    assert_host_unharmed(hostile, before)


def test_write_a_file_outside_scratch(hostile: Session) -> None:
    targets = [hostile.log.path.parent / "planted.txt", hostile.root / "planted.txt"]
    targets += [Path("/tmp/scroll-planted.txt"), Path("/dev/scroll-planted")]
    paths = [str(t) for t in targets]
    cell = _ATTEMPT + f"print([attempt(lambda p=p: open(p, 'w').write('x')) for p in {paths!r}])"
    result, before = attack(hostile, cell)
    assert set(outcomes(result)) <= REFUSED | {"ENOENT"}, result.stdout
    assert not any(t.exists() for t in targets)
    inside = hostile.kernel.run_cell("open('notes.txt', 'w').write('mine')")
    assert inside.ok and (hostile.root / "scratch" / "notes.txt").read_text() == "mine"
    assert_host_unharmed(hostile, before)


def test_delete_a_file_outside_scratch(hostile: Session) -> None:
    victim = str(hostile.log.path.parent / "victim.txt")
    Path(victim).write_text("keep me")
    cell = _ATTEMPT + (
        f"print([attempt(lambda: os.remove({victim!r})),"
        f" attempt(lambda: os.rename({victim!r}, 'stolen.txt'))])"
    )
    result, before = attack(hostile, cell)
    assert set(outcomes(result)) <= REFUSED | {"ENOENT", "EXDEV"}, result.stdout
    assert Path(victim).read_text() == "keep me"
    assert_host_unharmed(hostile, before)


def test_write_the_event_log_or_its_wal(hostile: Session) -> None:
    # Attack 1: the worker holds no descriptor on the store, and in its mount namespace the
    # store's files do not exist (only the memory reader reads them).
    db = str(hostile.log.path)
    inos = {os.stat(db + s).st_ino for s in ("", "-wal", "-shm")}
    cell = _ATTEMPT + (
        f"db = {db!r}\nout = {{\n"
        "    'db': attempt(lambda: open(db, 'r+b').write(b'garbage')),\n"
        "    'wal': attempt(lambda: open(db + '-wal', 'ab').write(b'garbage')),\n"
        "    'shm': attempt(lambda: open(db + '-shm', 'r+b').write(b'garbage')),\n"
        "    'truncate': attempt(lambda: os.truncate(db, 0)),\n"
        "    'truncate_wal': attempt(lambda: os.truncate(db + '-wal', 0)),\n"
        "    'link': attempt(lambda: os.link(db, 'copy.db')),\n}\n"
        "fds = [fd for fd in range(3, 64) if attempt(lambda fd=fd: os.fstat(fd)) == 'DONE']\n"
        f"held = [fd for fd in fds if os.fstat(fd).st_ino in {inos!r}]\n"
        "out['fds'] = sorted({attempt(lambda fd=fd: os.write(fd, b'x')) for fd in held})\n"
        "print(out)"
    )
    result, before = attack(hostile, cell)
    out = outcomes(result)
    assert out.pop("fds") == [], result.stdout
    assert set(out.values()) <= REFUSED | {"ENOENT", "EXDEV"}, result.stdout
    assert not (hostile.root / "scratch" / "copy.db").exists()
    assert_host_unharmed(hostile, before)


@pytest.mark.parametrize(
    "cell",
    [
        "import subprocess\nsubprocess.run(['touch', 'spawned'])",
        "import os\nos.fork()",
        "import os\nos.posix_spawn('/usr/bin/touch', ['touch', 'spawned'], {})",
        "import os\nos.execv('/usr/bin/touch', ['touch', 'spawned'])",
    ],
    ids=["subprocess", "fork", "posix_spawn", "execv"],
)
def test_spawn_a_process(hostile: Session, cell: str) -> None:
    result, before = attack(hostile, cell)
    _denied(result)
    assert not (hostile.root / "scratch" / "spawned").exists()
    assert_host_unharmed(hostile, before)


def test_os_system_runs_no_shell(hostile: Session) -> None:
    result, before = attack(hostile, "import os\nprint(os.system('touch spawned') != 0)")
    assert result.stdout == "True\n"
    assert not (hostile.root / "scratch" / "spawned").exists()
    assert_host_unharmed(hostile, before)


def test_raise_rlimits(hostile: Session) -> None:
    cell = (
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (hard, hard))\n"
        "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))"
    )
    result, before = attack(hostile, cell)
    _denied(result, "ValueError: not allowed to raise maximum limit")
    limit = hostile.kernel.run_cell("print(resource.getrlimit(resource.RLIMIT_AS))")
    assert limit.stdout == f"({2 * 1024**3}, {2 * 1024**3})\n"
    assert_host_unharmed(hostile, before)


def test_ptrace_or_signal_the_host(hostile: Session) -> None:
    cell = (
        "import ctypes, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.ptrace(16, os.getppid(), 0, 0), ctypes.get_errno())\n"
        "os.kill(os.getppid(), signal.SIGTERM)"
    )
    result, before = attack(hostile, cell)
    assert result.stdout == "-1 1\n"  # PTRACE_ATTACH: EPERM
    _denied(result)
    assert_host_unharmed(hostile, before)


def test_allocate_50_gb(shared: Session) -> None:
    shared.kernel.run_cell("survivor = 'kept'")
    result, before = attack(shared, "hog = bytearray(50 * 10**9)")
    _denied(result, "MemoryError")
    assert shared.kernel.run_cell("print(survivor)").stdout == "kept\n"
    assert_host_unharmed(shared, before)


def test_print_100_mb(shared: Session) -> None:
    result, before = attack(shared, "print('y' * 100_000_000)")
    assert len(result.stdout) == shared.kernel.stdout_cap
    assert result.stdout_hidden == 100_000_001 - shared.kernel.stdout_cap
    assert "more characters hidden" in render_observation(result)
    assert_host_unharmed(shared, before)


def test_infinite_loop(shared: Session) -> None:
    shared.kernel.run_cell("survivor = 'kept'")
    result, before = attack(shared, "while True:\n    pass", timeout=0.3)
    assert result.interrupted and not result.namespace_lost
    assert shared.kernel.run_cell("print(survivor)").stdout == "kept\n"
    assert_host_unharmed(shared, before)


def test_loop_in_c(own: Session) -> None:
    result, before = attack(own, "sum(range(10**12))", timeout=0.3)
    assert result.timed_out and result.namespace_lost and not result.interrupted
    assert_only_restart_logged(own, before)


def test_catastrophic_regex(own: Session) -> None:
    # The regex engine polls for signals, so this C loop is interrupted with the namespace kept.
    own.kernel.run_cell("survivor = 'kept'")
    result, before = attack(own, "import re\nre.match(r'(a|aa)+$', 'a' * 5000 + 'b')", timeout=0.3)
    assert result.timed_out and result.interrupted and not result.namespace_lost
    assert own.kernel.run_cell("print(survivor)").stdout == "kept\n"
    assert_host_unharmed(own, before)


def test_forge_a_reply_frame_on_stdout(shared: Session) -> None:
    cell = (
        "import json, os, struct, sys\n"
        "body = json.dumps({'op': 'result', 'id': 1, 'stdout': 'FORGED'}).encode()\n"
        "os.write(1, struct.pack('>I', len(body)) + body)\n"
        "sys.__stdout__.write('FORGED via sys.__stdout__')\nsys.__stdout__.flush()\n"
        "print('honest')"
    )
    result, before = attack(shared, cell)
    assert result.stdout == "honest\n"
    assert "FORGED" not in render_observation(result)
    assert_host_unharmed(shared, before)


def test_read_the_host_environment_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value")
    session = open_session(tmp_path)
    try:
        cell = (
            "import os\nprint(sorted(os.environ))\nprint('sk-test' in repr(os.environ))\n"
            "for path in ['/proc/%d/environ' % os.getppid(), '/proc/self/environ']:\n"
            "    try:\n        print(open(path, 'rb').read())\n"
            "    except (PermissionError, FileNotFoundError):\n        print('denied')"
        )
        result, before = attack(session, cell)
        assert "sk-test-secret-value" not in render_observation(result)
        assert result.stdout.splitlines()[1:] == ["False", "denied", "denied"]
        assert "OPENAI_API_KEY" not in result.stdout
        assert_host_unharmed(session, before)
    finally:
        session.kernel.close()
        session.log.close()


def test_import_ctypes_and_call_libc_directly(hostile: Session) -> None:
    cell = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = []\n"
        "for name, call in [('socket', lambda: libc.syscall(41, 2, 1, 0)),"
        " ('fork', lambda: libc.syscall(57)), ('vfork', lambda: libc.syscall(58)),"
        " ('execve', lambda: libc.execve(b'/bin/sh', None, None)),"
        " ('unshare', lambda: libc.unshare(0x40000000)),"
        " ('mknod', lambda: libc.mknod(b'disk', 0o60600, 0x800)),"
        " ('prlimit', lambda: libc.syscall(302, 0, 9, ctypes.byref(ctypes.c_ulonglong(1)), 0))]:\n"
        "    rc = call()\n    out.append((name, rc, ctypes.get_errno()))\nprint(out)"
    )
    result, before = attack(hostile, cell)
    assert result.ok, result.error
    calls = eval(result.stdout)  # noqa: S307 - a list of tuples printed by the cell
    assert [(name, rc) for name, rc, _ in calls] == [(name, -1) for name, _, _ in calls]
    assert {errno for _, _, errno in calls} == {1}  # EPERM, from seccomp
    assert not (hostile.root / "scratch" / "disk").exists()
    assert_host_unharmed(hostile, before)


def test_change_modes_owners_or_flags_outside_scratch(hostile: Session) -> None:
    # The worker is still uid 0 and owns root's files; capabilities are gone and seccomp denies
    # mode, owner, xattr and inode-flag changes, so nothing about a host file can be altered.
    victim = hostile.log.path.parent / "victim-mode.txt"
    victim.write_text("keep me")
    stat_before = victim.stat()
    db = str(hostile.log.path)
    attempts = {
        "chmod": f"os.chmod({str(victim)!r}, 0o4777)",
        "chmod_db": f"os.chmod({db!r}, 0)",
        "chown": f"os.chown({str(victim)!r}, 1234, 1234)",
        "setxattr": f"os.setxattr({str(victim)!r}, 'user.planted', b'1')",
        "chattr_immutable": (  # on a file the worker may open: the store is not one
            "fcntl.ioctl(open(os.__file__, 'rb').fileno(), 0x40086602, struct.pack('i', 0x10))"
        ),
    }
    cell = "import fcntl, os, struct\nout = {}\n" + "".join(
        f"try:\n    {code}\n    out[{name!r}] = 'DONE'\nexcept OSError as e:\n"
        f"    out[{name!r}] = e.errno\n"
        for name, code in attempts.items()
    )
    result, before = attack(hostile, cell + "print(sorted(set(out.values())))")
    assert result.stdout == "[1]\n", result.stdout  # every attempt: EPERM
    after = victim.stat()
    assert (after.st_mode, after.st_uid) == (stat_before.st_mode, stat_before.st_uid)
    assert os.access(db, os.W_OK) and os.stat(db).st_mode & 0o600 == 0o600
    assert_host_unharmed(hostile, before)


def test_read_files_outside_the_allow_list(hostile: Session) -> None:
    repo = Path(__file__).resolve().parents[2]
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)  # the real one; the fixture moved $HOME
    secrets = [Path("/etc/passwd"), home, repo / "pyproject.toml", hostile.root, Path("/tmp")]
    secrets += [repo / ".git", Path("/etc/shadow")]
    paths = [str(p) for p in secrets]
    result, before = attack(hostile, _LOOK + f"print({{p: look(p) for p in {paths!r}}})")
    assert_unseen(hostile.kernel, outcomes(result))
    allowed = hostile.kernel.run_cell("import scrollctx.errors\nprint('imports still work')")
    assert allowed.stdout == "imports still work\n"
    assert_host_unharmed(hostile, before)


# -- attacks beyond the issue's list (audit) ---------------------------------------------------


def test_proc_of_the_worker_and_of_the_host_is_out_of_reach(
    hostile: Session, sandbox_variant: SandboxVariant
) -> None:
    # /proc/self/mem would let a process patch its own seccomp-free code paths; /proc/<host>/
    # would expose the host's memory, environment, descriptors and root.
    host = os.getpid()
    targets = [
        ("/proc/self/mem", "r+b"),
        ("/proc/self/environ", "rb"),
        (f"/proc/{host}/mem", "r+b"),
        (f"/proc/{host}/environ", "rb"),
        (f"/proc/{host}/cmdline", "rb"),
        (f"/proc/{host}/fd/0", "rb"),
        (f"/proc/{host}/root/etc/passwd", "rb"),
        ("/proc/sys/kernel/core_pattern", "r+b"),
    ]
    cell = _ATTEMPT + (
        f"print({{p: attempt(lambda p=p, m=m: open(p, m).read(1)) for p, m in {targets!r}}})"
    )
    result, before = attack(hostile, cell)
    out = outcomes(result)
    # Without Landlock, the worker may read its own (scrubbed) environment; nothing else.
    own_environ = out.pop("/proc/self/environ")
    assert own_environ in HIDDEN or not sandbox_variant.has_landlock, own_environ
    assert set(out.values()) <= HIDDEN | REFUSED, out  # the host's pid does not exist there
    assert_host_unharmed(hostile, before)


def test_memfd_create_or_a_scratch_binary_then_execveat(hostile: Session) -> None:
    # memfd_create is denied outright (see the memory test below); a binary copied into scratch
    # cannot be run by execveat, execve or through /proc either.
    cell = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "try:\n    os.memfd_create('payload')\nexcept PermissionError:\n"
        "    print('memfd denied')\n"
        "with open('true', 'wb') as f:\n    f.write(open('/bin/true', 'rb').read())\n"
        "fd = os.open('true', os.O_RDONLY)\n"
        "rc = libc.syscall(322, fd, b'', None, None, 0x1000)  # execveat(AT_EMPTY_PATH)\n"
        "print(rc, ctypes.get_errno())\n"
        "for path in ['true', f'/proc/self/fd/{fd}']:\n"
        "    try:\n        os.execv(path, ['x'])\n"
        "    except PermissionError:\n        print('exec denied')"
    )
    result, before = attack(hostile, cell)
    assert result.stdout == "memfd denied\n-1 1\nexec denied\nexec denied\n", result.stdout
    assert_host_unharmed(hostile, before)


def test_memory_outside_the_address_space_limit_or_outliving_the_worker(hostile: Session) -> None:
    # memfds hold memory RLIMIT_AS does not count (256 fds of 256 MiB = 64 GiB: the host's RAM);
    # System V segments and queues stay in the host's IPC namespace after the worker dies.
    calls = {
        "memfd_create": "libc.syscall(319, b'm', 0)",
        "memfd_secret": "libc.syscall(447, 0)",
        "shmget": "libc.shmget(0, 2**20, 0o1600)",
        "msgget": "libc.msgget(0, 0o1600)",
        "semget": "libc.semget(0, 1, 0o1600)",
        "mq_open": "libc.syscall(240, b'q', 0o100 | 2, 0o600, None)",
    }
    cell = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = {}\n" + "".join(
        f"out[{name!r}] = ({code}, ctypes.get_errno())\n" for name, code in calls.items()
    )
    result, before = attack(hostile, cell + "print(sorted(set(out.values())))")
    assert result.stdout == "[(-1, 1)]\n", result.stdout  # every call: EPERM
    assert_host_unharmed(hostile, before)


def test_hard_links_or_renames_across_the_scratch_boundary(hostile: Session) -> None:
    # A hard link to the log (or to the worker's own source) inside scratch would be a writable
    # name for a protected file; Landlock refuses to link or move anything across the boundary.
    worker_source = Path(__file__).resolve().parents[2] / "src/scrollctx/kernel/_worker.py"
    db = str(hostile.log.path)
    moves = {
        "link_log": f"os.link({db!r}, 'log.db')",
        "link_source": f"os.link({str(worker_source)!r}, 'worker.py')",
        "rename_log_in": f"os.rename({db!r}, 'moved.db')",
        "rename_out": f"os.rename('mine', {db + '-planted'!r})",
    }
    cell = "import os\nopen('mine', 'w').close()\nout = {}\n" + "".join(
        f"try:\n    {code}\n    out[{name!r}] = 'DONE'\nexcept OSError as e:\n"
        f"    out[{name!r}] = e.errno\n"
        for name, code in moves.items()
    )
    result, before = attack(hostile, cell + "print(sorted(out.items()))")
    outcome = dict(eval(result.stdout))  # noqa: S307 - a list of pairs printed by the cell
    assert "DONE" not in outcome.values(), outcome
    assert not Path(db + "-planted").exists()
    assert_host_unharmed(hostile, before)


def test_starve_the_host_with_real_time_or_raised_priority(hostile: Session) -> None:
    cell = (
        "import os\nout = []\n"
        "for call in [lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50)),"
        " lambda: os.setpriority(os.PRIO_PROCESS, 0, -20)]:\n"
        "    try:\n        call()\n        out.append('DONE')\n"
        "    except PermissionError:\n        out.append('denied')\nprint(out)"
    )
    result, before = attack(hostile, cell)
    assert result.stdout == "['denied', 'denied']\n", result.stdout
    assert_host_unharmed(hostile, before)


def test_io_uring_userfaultfd_bpf_and_perf_are_denied(hostile: Session) -> None:
    calls = {
        "io_uring_setup": "libc.syscall(425, 8, ctypes.create_string_buffer(120))",
        "userfaultfd": "libc.syscall(323, 0)",
        "bpf": "libc.syscall(321, 0, ctypes.create_string_buffer(128), 128)",
        "perf_event_open": "libc.syscall(298, ctypes.create_string_buffer(128), 0, -1, -1, 0)",
        "clone3": "libc.syscall(435, ctypes.create_string_buffer(88), 88)",
        "pidfd_open_host": f"libc.syscall(434, {os.getpid()}, 0)",
    }
    cell = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = {}\n" + "".join(
        f"out[{name!r}] = ({code}, ctypes.get_errno())\n" for name, code in calls.items()
    )
    result, before = attack(hostile, cell + "print(sorted(out.items()))")
    outcome = dict(eval(result.stdout))  # noqa: S307 - a list of pairs printed by the cell
    assert outcome.pop("clone3") == (-1, 38)  # ENOSYS, so glibc falls back to a checked clone
    assert set(outcome.values()) == {(-1, 1)}, outcome  # EPERM
    assert_host_unharmed(hostile, before)


def test_thread_bomb_stops_at_the_cap(tmp_path: Path) -> None:
    # RLIMIT_NPROC does not bind a uid-0 worker; the host's pids cgroup does. Without a cap a
    # cell could take every pid on the machine (pid_max is often 32,768).
    session = open_session(tmp_path, sandbox=SandboxPolicy(limits=Limits(threads=40)), timeout=20.0)
    try:
        detail = session.kernel.status.layer("rlimits").detail if session.kernel.status else ""
        if "threads not capped" in detail:
            missing(f"no writable pids cgroup here ({detail}); the doctor says so")
        assert "at most 40 threads (pids cgroup)" in detail
        cell = (
            "import threading\nthreading.stack_size(32768)\nhold = threading.Event()\n"
            "started = 0\ntry:\n    for _ in range(400):\n"
            "        threading.Thread(target=hold.wait, daemon=True).start()\n"
            "        started += 1\nexcept RuntimeError as exc:\n    print(exc)\n"
            "hold.set()\nprint(started)"
        )
        result, before = attack(session, cell)
        lines = result.stdout.splitlines()
        assert lines[0] == "can't start new thread" and int(lines[1]) < 40, result.stdout
        assert_host_unharmed(session, before)
        pid = session.kernel.pid
        groups = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        rel = next(g.split(":", 2)[2] for g in groups if f"scroll-worker-{pid}" in g)
        cgroup = next(
            p for p in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")) if p.exists()
        )
        assert (cgroup / rel.lstrip("/")).is_dir()
    finally:
        session.kernel.close()
        session.log.close()
    assert not (cgroup / rel.lstrip("/")).exists()  # removed with the worker


_FILL = (
    "import os\nchunk = b'x' * 2**20\nn = 0\nwhile True:  # many files, each small\n"
    "    with open(f'fill-{n}', 'wb') as f:\n"
    "        f.write(chunk)\n        f.flush()\n        os.fsync(f.fileno())\n"
    "    n += 1"
)
_RESERVE = (
    "import os\nn = 0\nwhile True:  # blocks reserved, not written\n"
    "    fd = os.open(f'reserved-{n}', os.O_RDWR | os.O_CREAT)\n"
    "    os.posix_fallocate(fd, 0, 8 * 2**20)\n    os.close(fd)\n    n += 1"
)


@pytest.mark.parametrize("cell", [_FILL, _RESERVE], ids=["write", "posix_fallocate"])
def test_scratch_cannot_hold_more_than_its_quota(tmp_path: Path, cell: str) -> None:
    # Attack 5: the kernel itself refuses bytes past the quota (a tmpfs in the worker's mount
    # namespace), however fast they come; a watch that polls was 1.6 GiB late. The namespace
    # survives, and what fitted is copied back to the real folder. (No Landlock ABI changes a
    # mount's size, so this runs once.)
    quota = 16 * 1024**2
    policy = SandboxPolicy(limits=Limits(scratch_size=quota))
    session = open_session(tmp_path, sandbox=policy, timeout=30.0)
    try:
        session.kernel.run_cell("survivor = 'kept'")
        result, before = attack(session, cell)
        assert result.error is not None, result.stdout
        assert result.error.splitlines()[-1].startswith("OSError: [Errno 28]"), result.error
        assert not result.namespace_lost
        kept = sum(p.stat().st_size for p in (tmp_path / "scratch").iterdir())
        assert 0 < kept <= quota
        assert session.kernel.run_cell("print(survivor)").stdout == "kept\n"
        assert_host_unharmed(session, before)
    finally:
        session.kernel.close()
        session.log.close()


@pytest.mark.parametrize("cell", [_FILL, _RESERVE], ids=["write", "posix_fallocate"])
def test_without_namespaces_the_host_watch_kills_a_worker_filling_the_disk(
    tmp_path: Path, cell: str
) -> None:
    # The backstop where the namespaces layer is unavailable: the host counts the bytes the
    # worker sends to storage, fallocate's fallback writes included, and kills it past the quota.
    if written_bytes(os.getpid()) is None:
        missing("no per-process I/O accounting here; only the free-space floor applies")
    quota = 16 * 1024**2
    policy = SandboxPolicy(
        "best-effort", unavailable=frozenset({"namespaces"}), limits=Limits(scratch_writes=quota)
    )
    session = open_session(tmp_path, sandbox=policy, timeout=30.0)
    try:
        result, before = attack(session, cell)
        assert result.namespace_lost and not result.timed_out, result.error
        assert result.error is not None and f"over the {quota:,}-byte quota" in result.error
        written = sum(p.stat().st_size for p in (tmp_path / "scratch").iterdir())
        # The watch polls every 50 ms; on a loaded machine a poll can come late, so the bound
        # is generous: the point is that writing stops, not how soon.
        assert quota <= written < quota * 32, written
        assert_only_restart_logged(session, before)
    finally:
        session.kernel.close()
        session.log.close()


def test_forged_tool_calls_are_bounded_per_cell(tmp_path: Path) -> None:
    # A flood of bridge frames (undeclared names, huge arguments) would make the host write
    # without end; past the cell's budget the host answers without running or logging.
    session = open_session(tmp_path, max_tool_calls=20)
    try:
        cell = WORKER + (
            "answers = []\nfor call in range(1, 61):\n"
            "    os.write(w.fd_out, frame({'op': 'tool_call', 'id': w.cell_id, 'call': call,"
            " 'name': 'system', 'args': ['rm -rf /'], 'kwargs': {}}))\n"
            "    answers.append(w.reader.read()['error'][:40])\n"
            "print(len(answers), sorted(set(answers)))"
        )
        result, before = attack(session, cell)
        assert result.stdout.startswith("60 ["), result.error
        assert "no tool named 'system' is declared" in result.stdout
        assert "this cell already made 20 tool calls" in result.stdout
        added = session.log.span(before.last_seq + 1, session.log.last_seq())
        assert len(added) == 40 and {e.name for e in added} == {"system"}
        assert {e.tool_state for e in added if e.kind == Kind.TOOL_RESULT} == {"error"}
        assert session.kernel.run_cell("print(lookup('x', 1))").stdout == "['x fact 0']\n"
    finally:
        session.kernel.close()
        session.log.close()


def test_oversized_tool_arguments_are_not_run_or_kept(shared: Session) -> None:
    before = shared.log.last_seq()
    result = shared.kernel.run_cell("lookup('t' * 2_000_000)")
    assert result.error is not None and "over the 262,144-byte limit" in result.error
    call, answer = shared.log.span(before + 1, shared.log.last_seq())
    assert call.tool_input == {"omitted": answer.content} and answer.tool_state == "error"
    assert (call.payload_size or 0) < 1000 and len(answer.content) < 1000
    assert shared.kernel.run_cell("print('host ok')").stdout == "host ok\n"


def test_hostile_tool_arguments_do_not_harm_the_host(shared: Session) -> None:
    # Forged frames skip the stub's signature check: the host still calls only declared tools,
    # with JSON values, and turns every failure into an error for the cell.
    cell = WORKER + (
        "out = []\nnested = []\nfor _ in range(400):\n    nested = [nested]\n"
        "for call, name, args, kwargs in ["
        "(1, 'lookup', [], {'__class__': 1, 'self': 2}),"
        "(2, 'lookup', [nested], {}),"
        "(3, 'lookup', [float('nan')], {'limit': 1}),"
        "(4, '__import__', ['os'], {}),"
        "(5, 'lookup.__globals__', [], {})]:\n"
        "    os.write(w.fd_out, frame({'op': 'tool_call', 'id': w.cell_id, 'call': call,"
        " 'name': name, 'args': args, 'kwargs': kwargs}))\n"
        "    reply = w.reader.read()\n"
        "    out.append(reply.get('ok') or reply['error'][:60])\n"
        "print(out)"
    )
    result = shared.kernel.run_cell(cell)
    out = eval(result.stdout)  # noqa: S307 - a list printed by the cell
    assert out[0].startswith("lookup: TypeError") and out[1:3] == [True, True]
    assert out[3].startswith("no tool named '__import__'")
    assert out[4].startswith("no tool named 'lookup.__globals__'")
    shared.log.check()
    assert shared.kernel.run_cell("print('host ok')").stdout == "host ok\n"


def test_a_cell_that_floods_frames_or_stops_reading_still_ends(own: Session) -> None:
    # The first frame for another request ends the flood (the worker is replaced); a cell that
    # asks for big results and never reads them cannot block the host either.
    flood = WORKER + (
        "while True:\n    os.write(w.fd_out, frame({'op': 'result', 'stdout': 'x'}, 7))"
    )
    result, before = attack(own, flood)
    assert result.namespace_lost and not result.timed_out
    assert result.error is not None and "a frame for request 7 arrived" in result.error
    stall = WORKER + (
        "for call in range(1, 30):\n"
        "    os.write(w.fd_out, frame({'op': 'tool_call', 'id': w.cell_id, 'call': call,"
        " 'name': 'big_blob', 'args': [200000], 'kwargs': {}}))\n"
        "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
        "time.sleep(60)"
    )
    result = own.kernel.run_cell(stall)
    assert result.namespace_lost and result.timed_out
    own.log.check()
    assert own.kernel.run_cell("print('host ok')").stdout == "host ok\n"


def test_host_secrets_do_not_cross_through_tool_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCROLL_TEST_SECRET", "hunter2-secret")

    def leaky(key: str) -> str:
        """Fail with a chained error whose cause and locals hold a secret."""
        secret = os.environ["SCROLL_TEST_SECRET"]
        try:
            raise KeyError(secret)
        except KeyError as exc:
            raise ValueError(f"no such key {key!r}") from exc

    def keyed(query: str, key: str = os.environ["SCROLL_TEST_SECRET"], limit: int = 3) -> str:
        """Take a secret as a default, as API clients often do."""
        return f"{query}:{len(key)}:{limit}"

    with Kernel(scratch=tmp_path / "scratch", tools=[leaky, keyed]) as kernel:
        result = kernel.run_cell("leaky('a')")
        seen = render_observation(result)
        assert "ToolCallError: leaky: ValueError: no such key 'a'" in seen
        assert "hunter2" not in seen and __file__ not in seen
        described = kernel.run_cell("help(keyed)\nimport inspect\nprint(inspect.signature(keyed))")
        assert "keyed(query: str, key: str = ..., limit: int = 3) -> str" in described.stdout
        assert "hunter2" not in render_observation(described)
        assert kernel.run_cell("keyed('q')").stdout == "'q:14:3'\n"  # the host's default applies


def test_store_secrets_and_other_sessions_are_unreadable(
    tmp_path: Path, sandbox_variant: SandboxVariant
) -> None:
    # The worker reads the log's own files and payloads, not the store folder around them:
    # config.toml may hold API keys, and other sessions keep their scratch there. Attack 10:
    # not even os.stat may tell they exist (nor /etc/shadow), their size or their time.
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.toml").write_text('[backends.openai]\napi_key = "sk-store-secret"\n')
    (store / "scratch" / "other").mkdir(parents=True)
    (store / "scratch" / "other" / "notes.txt").write_text("private to another session")
    session = open_session(tmp_path, sandbox=sandbox_variant.policy())
    try:
        big = "payload " * 4000  # over the log's inline threshold: externalized
        seq = session.log.append(NewEvent(session_id="late", kind=Kind.SYSTEM, content=big))
        secrets = [store / "config.toml", store / "scratch/other/notes.txt", Path("/etc/shadow")]
        paths = [str(p) for p in secrets]
        cell = _LOOK + (
            f"seen = {{p: look(p) for p in {[*paths, str(store)]!r}}}\n"
            f"stats = [attempt(lambda p=p: os.stat(p)) for p in {paths!r}]\n"
            f"rows = ms.expand({seq})\n"
            "print([seen, stats, len(rows[0]['content']), rows[0]['payload_missing']])"
        )
        result, before = attack(session, cell)
        seen, stats, size, payload_missing = outcomes(result)
        assert_unseen(session.kernel, seen)
        assert stats == ["ENOENT"] * len(paths)
        assert (size, payload_missing) == (len(big), False)
        assert "sk-store-secret" not in render_observation(result)
        assert_host_unharmed(session, before)
    finally:
        session.kernel.close()
        session.log.close()


def test_a_worker_that_stops_itself_is_killed_and_replaced(tmp_path: Path) -> None:
    # SIGSTOP cannot be caught or ignored, and a stopped worker answers nothing: the host's
    # deadline and the process-group SIGKILL still end it (without the namespaces layer; with
    # it, the worker is pid 1 of its namespace, and its own SIGSTOP does not stop it).
    policy = SandboxPolicy("best-effort", unavailable=frozenset({"namespaces"}))
    session = open_session(tmp_path, sandbox=policy, timeout=1.0, grace=0.5)
    try:
        result, before = attack(session, "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)")
        assert result.namespace_lost and result.timed_out
        assert result.error is not None and "the worker was killed" in result.error
        assert_only_restart_logged(session, before)
    finally:
        session.kernel.close()
        session.log.close()


def test_a_worker_in_its_namespace_cannot_stop_itself(hostile: Session) -> None:
    pid = hostile.kernel.pid
    result, before = attack(hostile, "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)")
    assert result.ok and not result.namespace_lost and hostile.kernel.pid == pid
    assert_host_unharmed(hostile, before)


def test_threads_left_spinning_between_cells_get_the_worker_killed(tmp_path: Path) -> None:
    # A cell's timeout ends with the cell; a thread it leaves busy would use CPU for as long as
    # the session lives. The host budgets CPU between cells and ends such a worker.
    session = open_session(tmp_path, sandbox=SandboxPolicy(limits=Limits(idle_cpu=0.5)))
    try:
        cell = (
            "import threading\ndef spin():\n    while True:\n        pass\n"
            "threading.Thread(target=spin, daemon=True).start()\nprint('returned')"
        )
        result, before = attack(session, cell)
        assert result.stdout == "returned\n"
        pid = session.kernel.pid or 0
        exited = os.pidfd_open(pid)  # readable once the process has ended
        select.select([exited], [], [], 60)
        os.close(exited)
        follow = session.kernel.run_cell("print('after')")
        assert follow.stdout == "after\n" and follow.namespace_lost
        assert follow.kernel_notice is not None
        assert "CPU while no cell was running" in follow.kernel_notice
        assert_only_restart_logged(session, before)
    finally:
        session.kernel.close()
        session.log.close()


# -- issue 9: signals through file ownership, death with the host, disk, inotify ---------------


_ERRNO = (
    "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "def rc(value):  # the errno of a failed libc call, 0 when it succeeded\n"
    "    return ctypes.get_errno() if value < 0 else 0\n"
)


def _errnos(result: CellResult) -> dict[str, object]:
    assert result.error is None, result.error
    return dict(eval(result.stdout))  # noqa: S307 - a list of (name, errno) pairs from the cell


def test_signal_any_process_through_sigio_ownership(hostile: Session) -> None:
    # Attack 2: a pipe whose owner is another pid, with F_SETSIG(SIGKILL) and O_ASYNC, makes
    # the kernel deliver SIGKILL there on the next write (the kill filter never sees a kill()).
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        cell = (
            "import fcntl, os, signal, socket, struct\nout = []\nr, w = os.pipe()\n"
            "a, b = socket.socketpair()  # FIOSETOWN and SIOCSPGRP are socket ioctls\n"
            f"for name, call in [('F_SETOWN', lambda: fcntl.fcntl(r, 8, {victim.pid})),"
            f" ('F_SETOWN_EX', lambda: fcntl.fcntl(r, 15, struct.pack('ii', 1, {victim.pid}))),"
            " ('F_SETSIG', lambda: fcntl.fcntl(r, 10, signal.SIGKILL)),"
            f" ('FIOSETOWN', lambda: fcntl.ioctl(a, 0x8901, struct.pack('i', {victim.pid}))),"
            f" ('SIOCSPGRP', lambda: fcntl.ioctl(a, 0x8902, struct.pack('i', -{victim.pid}))),"
            f" ('host', lambda: fcntl.fcntl(r, fcntl.F_SETOWN, {os.getpid()}))]:\n"
            "    try:\n        call()\n        out.append((name, 0))\n"
            "    except OSError as e:\n        out.append((name, e.errno))\n"
            "fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)\nos.write(w, b'x')\n"
            "print(out)"
        )
        result, before = attack(hostile, cell)
        assert set(_errnos(result).values()) == {errno.EPERM}, result.stdout
        assert victim.poll() is None  # still running
        assert_host_unharmed(hostile, before)
    finally:
        victim.kill()
        victim.wait()


def test_a_lease_on_a_store_file_cannot_stall_the_host(hostile: Session) -> None:
    # A read lease makes every other open for writing wait (lease-break-time, 45 s by default).
    db = str(hostile.log.path)
    cell = (
        "import fcntl, os\nout = []\n"
        f"for path in [{db!r}, 'mine']:\n"
        "    try:\n        fd = os.open(path, os.O_RDONLY | os.O_CREAT)\n"
        "        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)\n        out.append((path, 0))\n"
        "    except OSError as e:\n        out.append((path, e.errno))\nprint(out)"
    )
    result, before = attack(hostile, cell)
    assert set(_errnos(result).values()) <= {errno.EPERM, errno.EACCES, errno.ENOENT}
    assert _errnos(result)["mine"] == errno.EPERM
    assert_host_unharmed(hostile, before)


def test_inotify_cannot_exhaust_the_uid_or_watch_other_folders(hostile: Session) -> None:
    # Attack 6: inotify instances are counted per uid (128 by default): a loop of inotify_init1
    # in the worker left none for any other process of the host's user.
    cell = _ERRNO + (
        "out = [('init1', rc(libc.inotify_init1(0))) for _ in range(300)]\n"
        "out.append(('init', rc(libc.syscall(253))))\n"
        "out.append(('watch', rc(libc.inotify_add_watch(3, b'/tmp', 0xfff))))\n"
        "out.append(('fanotify', rc(libc.syscall(300, 0x200, 0))))  # FAN_REPORT_FID: no caps\n"
        "import fcntl, os\ntry:\n    fcntl.fcntl(os.open('.', os.O_RDONLY), fcntl.F_NOTIFY,"
        " fcntl.DN_CREATE)\n    out.append(('dnotify', 0))\n"
        "except OSError as e:\n    out.append(('dnotify', e.errno))\n"
        "print(sorted(set(out)))"
    )
    result, before = attack(hostile, cell)
    assert set(_errnos(result).values()) == {errno.EPERM}, result.stdout
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    assert fd >= 0, os.strerror(ctypes.get_errno())  # the host's uid still has instances
    os.close(fd)
    assert_host_unharmed(hostile, before)


def test_timers_queued_signals_and_aio_cannot_exhaust_the_uid_or_the_machine(
    hostile: Session,
) -> None:
    # Each POSIX timer holds a queued signal counted against the uid's RLIMIT_SIGPENDING (a loop
    # made 96,361 and left none for the host's user), as does a real-time signal a cell blocks
    # and sends to its own thread; io_setup takes AIO contexts from the machine's one
    # fs.aio-max-nr. seccomp refuses the timers and io_setup; the rlimits layer caps the
    # signals a cell may queue to itself (seccomp allows that: it is the worker's own pid).
    cell = _ERRNO + (
        "import signal, threading\ntimer = ctypes.c_void_p()\nctx = ctypes.c_ulong()\n"
        "out = [('timer_create', rc(libc.timer_create(1, None, ctypes.byref(timer)))),\n"
        "       ('io_setup', rc(libc.syscall(206, 65536, ctypes.byref(ctx))))]\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})\nqueued = 0\n"
        "try:\n    while queued < 1000:\n"
        "        signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)\n"
        "        queued += 1\n    out.append(('pthread_kill', 0))\n"
        "except OSError as exc:\n    out.append(('pthread_kill', exc.errno))\n"
        "signal.signal(signal.SIGRTMIN, signal.SIG_IGN)  # discards what is pending\n"
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGRTMIN})\n"
        "out.append(('queued', queued))\nprint(sorted(out))"
    )
    result, before = attack(hostile, cell)
    outcome = _errnos(result)
    assert 0 < outcome.pop("queued") <= 64, result.stdout  # the worker's RLIMIT_SIGPENDING
    assert outcome == {"timer_create": errno.EPERM, "io_setup": errno.EPERM,
                       "pthread_kill": errno.EAGAIN}, result.stdout  # fmt: skip
    assert_host_unharmed(hostile, before)


def test_fallocate_is_refused_as_unsupported(hostile: Session) -> None:
    # fallocate reserves blocks without writing them, so a watch that counts written bytes
    # never sees them: the syscall is refused as unsupported, and posix_fallocate falls back to
    # writing, which every quota counts (the tests above).
    cell = _ERRNO + (
        "import os\nfd = os.open('reserved', os.O_RDWR | os.O_CREAT | os.O_TRUNC)\nout = []\n"
        "size = ctypes.c_long(1 << 30)\n"
        "for mode in (0, 1, 3):  # plain, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE\n"
        "    out.append((mode, rc(libc.fallocate(fd, mode, ctypes.c_long(0), size))))\n"
        "os.posix_fallocate(fd, 0, 2**20)\nprint([out, os.fstat(fd).st_size])"
    )
    result, before = attack(hostile, cell)
    modes, size = outcomes(result)
    assert set(dict(modes).values()) == {errno.EOPNOTSUPP} and size == 2**20, result.stdout
    assert_host_unharmed(hostile, before)


def test_namespace_and_cross_process_memory_syscalls_are_denied(hostile: Session) -> None:
    # Each errno would differ without seccomp's entry: a new user namespace is otherwise
    # allowed to anyone (EINVAL here only because the worker has threads), setns(-1) would be
    # EBADF, and reading or writing the worker's own memory would succeed.
    cell = _ERRNO + (
        "import os\nbuf = ctypes.create_string_buffer(b'secret', 16)\n"
        "class IoVec(ctypes.Structure):\n"
        "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "src, dst = IoVec(ctypes.addressof(buf), 6), IoVec(ctypes.addressof(buf) + 8, 6)\n"
        "pid = os.getpid()\nout = []\n"
        "for name, call in [('unshare_user', lambda: libc.unshare(0x10000000)),"
        " ('unshare_user_net', lambda: libc.unshare(0x50000000)),"
        " ('setns', lambda: libc.setns(-1, 0)),"
        " ('process_vm_readv', lambda: libc.process_vm_readv(pid, ctypes.byref(dst), 1,"
        " ctypes.byref(src), 1, 0)),"
        " ('process_vm_writev', lambda: libc.process_vm_writev(pid, ctypes.byref(src), 1,"
        " ctypes.byref(dst), 1, 0))]:\n"
        "    out.append((name, rc(call())))\nprint(out)"
    )
    result, before = attack(hostile, cell)
    assert set(_errnos(result).values()) == {errno.EPERM}, result.stdout
    assert_host_unharmed(hostile, before)


def test_the_worker_cannot_clear_its_death_signal_or_hide_from_the_host(hostile: Session) -> None:
    # PR_SET_PDEATHSIG 0 would let the worker outlive its host; PR_SET_DUMPABLE 0 would close
    # its /proc entries (I/O and CPU counters, its root) to a host that is not root.
    cell = _ERRNO + "print([('pdeathsig', rc(libc.prctl(1, 0, 0, 0, 0))),"
    cell += " ('dumpable', rc(libc.prctl(4, 0, 0, 0, 0))), ('get', libc.prctl(3, 0, 0, 0, 0))])"
    result, before = attack(hostile, cell)
    assert _errnos(result) == {"pdeathsig": errno.EPERM, "dumpable": errno.EPERM, "get": 1}
    assert_host_unharmed(hostile, before)


_OUTLIVE_THE_HOST = (
    WORKER + "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0: refused by seccomp\n"
    "control = w.reader.fd\nw.reader.fd = os.dup(control)  # the bridge keeps working\n"
    "r, keep = os.pipe()\nos.dup2(r, control)  # the hang-up watch now waits on our own pipe\n"
    "announce()\nwhile True:\n    pass"
)


@pytest.mark.parametrize(
    "sandbox", [("strict",), ("best-effort", "namespaces")], ids=["strict", "no-namespaces"]
)
def test_a_worker_dies_with_its_killed_host_whatever_the_cell_did(
    tmp_path: Path, sandbox: tuple[str, ...]
) -> None:
    # Attack 4: a cell that dup2s a fresh pipe over its control-in fd defeats the worker's watch
    # on the host's pipe; after kill -9 of the host the worker ran on. In namespaces, bwrap's
    # --die-with-parent ends bwrap and then the worker (pid 1: everything it made with it);
    # without them, the worker's own PR_SET_PDEATHSIG does. The cell may clear neither.
    assert_worker_dies_with_killed_host(tmp_path / "scratch", _OUTLIVE_THE_HOST, *sandbox)
