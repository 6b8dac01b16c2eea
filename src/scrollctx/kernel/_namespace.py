"""The ``namespaces`` layer: the worker runs in its own mount, PID, IPC and UTS namespaces.

The host starts the worker through bubblewrap (``bwrap``, Debian's ``bubblewrap``: what Flatpak
builds on), as root or as any user the kernel lets create user namespaces. Inside, the root is an
empty read-only tmpfs holding only:

- read-only binds of what Python needs: the interpreter's prefixes and every ``sys.path`` entry of
  ``python -I`` (an editable install's ``src`` included), ``/usr`` and the top-level ``/lib``,
  ``/lib64``, ``/bin`` (symlinks where the machine has merged ``/usr``);
- for the memory reader only (never the worker), the Event Log's own files, read-only (never
  the store folder around them);
- a read-only minimal ``/dev`` (``null``, ``zero``, ``full``, ``random``, ``urandom``, ``tty``) and
  a read-only ``/proc`` of the new PID namespace;
- the scratch folder, read-write.

Nothing else exists there: ``os.stat`` finds no ``/etc/shadow``, no ``config.toml`` beside the log,
no other session's scratch folder and no ``/tmp``. The worker is pid 1 of its PID namespace, so no
process outside it can be named (no ``kill``, ``F_SETOWN`` or ``ptrace`` target exists), and when
it ends the kernel kills everything it started. ``--die-with-parent`` kills bwrap and the worker
when the host's spawner thread is gone. The host learns the worker's pid as the host sees it from
bwrap's ``--info-fd`` before the worker runs, and signals, watches and caps that pid; it checks
from outside that the worker's namespaces are not its own, and the worker self-tests from inside
(:func:`scrollctx.kernel._sandbox.apply_sandbox`).

Where ``bwrap`` is missing, or cannot create the namespaces (user namespaces disabled or
restricted, e.g. Ubuntu's AppArmor rule, or a container without ``unshare``), the layer is
unavailable and its detail says why; ``strict`` then refuses, ``best-effort`` runs without it.
Whether bwrap works is found once per interpreter, by starting it for real.
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scrollctx.errors import WorkerCrashed
from scrollctx.kernel._policy import SandboxPolicy

__all__ = [
    "NAMESPACES",
    "READ_ROOTS",
    "NamespaceRequest",
    "foreign_namespaces",
    "host_namespaces",
    "bwrap_path",
    "interpreter_paths",
    "launch_problem",
    "namespace_request",
    "read_child_pid",
    "readable_paths",
    "sandbox_command",
    "store_files",
    "worker_reads",
]

NAMESPACES = ("mnt", "pid", "ipc", "uts")
"""The namespaces the worker must not share with the host."""

READ_ROOTS = ("/usr", "/lib", "/lib64", "/bin")
"""System folders every worker reads (``/lib`` and the rest may be symlinks into ``/usr``)."""
# Also imports what a worker imports, outside any sandbox: a sandboxed worker cannot write
# bytecode caches, so without this one run each start would compile stale modules anew.
_PROBE = (
    "import json, sys\n"
    "try:\n    import scrollctx.kernel._worker, scrollctx.surface\nexcept ImportError:\n    pass\n"
    "print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix] + sys.path))"
)
_INSTALL_HINT = "bwrap not found: apt install bubblewrap"


@dataclass(frozen=True, slots=True)
class NamespaceRequest:
    """What the host asks of the namespaces layer for one worker."""

    store_files: tuple[str, ...] = ()
    """The Event Log's files and payload folder, bound read-only."""
    scratch_size: int = 512 * 1024**2
    """The size of the scratch tmpfs, in bytes."""
    disk_floor: int = 1024**3
    """Free bytes the host keeps on the real scratch folder's disk when it copies back."""


def namespace_request(policy: SandboxPolicy, db_path: Path | None) -> NamespaceRequest | None:
    """What to ask of the namespaces layer for a worker under ``policy`` (``None``: skip it)."""
    if "namespaces" not in policy.applied:
        return None
    return NamespaceRequest(
        store_files(str(db_path) if db_path else None),
        scratch_size=policy.limits.scratch_size,
        disk_floor=policy.limits.disk_floor,
    )


def readable_paths(interpreter: Iterable[str], store_files: Iterable[str] = ()) -> list[str]:
    """Every real path beneath which the worker may read: the interpreter's prefixes and
    ``sys.path``, ``/usr``, ``/lib*``, ``/bin`` and the store files (existing ones, deduplicated).

    One allow-list for two enforcers: the mount namespace binds these, Landlock grants them.
    """
    reads: list[str] = []
    for path in [*interpreter, *READ_ROOTS, *store_files]:
        real = os.path.realpath(path) if path else ""
        if real and real != "/" and os.path.exists(real) and real not in reads:
            reads.append(real)
    return reads


def worker_reads(python: str, store: Iterable[str] = ()) -> list[str]:
    """What the mount namespace of a worker run by ``python`` binds read-only."""
    here = os.path.dirname(os.path.abspath(python))
    return readable_paths([*interpreter_paths(python), here], store)


@functools.cache
def interpreter_paths(python: str) -> tuple[str, ...]:
    """The prefixes and ``sys.path`` of ``python -I`` (asked once per interpreter)."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", _PROBE],
            capture_output=True,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
            timeout=30,
            check=True,
        )
        paths = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise WorkerCrashed(
            f"the kernel worker failed to start: {python} -I could not report its paths ({exc})"
        ) from exc
    return tuple(str(path) for path in paths)


def _binds(reads: Sequence[str]) -> list[str]:
    # Bind each path once (a path beneath one already bound comes with it); a top-level root
    # that is a symlink (/lib -> usr/lib on merged /usr) is made as the same symlink.
    args: list[str] = []
    for root in READ_ROOTS:
        if os.path.islink(root):
            args += ["--symlink", os.readlink(root), root]
    bound: list[str] = []
    for path in sorted(reads, key=len):
        if not any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound):
            bound.append(path)
            args += ["--ro-bind", path, path]
    return args


def sandbox_command(
    bwrap: str,
    argv: Sequence[str],
    *,
    reads: Sequence[str],
    scratch: str,
    scratch_size: int,
    info_fd: int,
) -> list[str]:
    """The bwrap command line that runs ``argv`` in the worker's namespaces, with ``scratch`` an
    empty tmpfs of ``scratch_size`` bytes (:mod:`scrollctx.kernel._scratch` fills it)."""
    return [
        bwrap,
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--as-pid-1",
        "--die-with-parent",
        *_binds(reads),
        "--dev", "/dev", "--remount-ro", "/dev",
        "--proc", "/proc", "--remount-ro", "/proc",
        "--size", str(scratch_size), "--tmpfs", scratch, "--chdir", scratch,
        "--remount-ro", "/",
        "--info-fd", str(info_fd),
        "--", *argv,
    ]  # fmt: skip


@functools.cache
def launch_problem(python: str) -> str | None:
    """Why the namespaces layer cannot be had for ``python`` here, or ``None`` when it can.

    Starts bwrap once with the worker's namespaces and mounts and an empty interpreter run; the
    answer is kept for the life of the host process.
    """
    if not sys.platform.startswith("linux"):
        return f"needs Linux (this is {sys.platform})"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return _INSTALL_HINT
    read_end, write_end = os.pipe()
    try:
        with tempfile.TemporaryDirectory(prefix="scroll-bwrap-probe-") as scratch:
            command = sandbox_command(
                bwrap,
                [python, "-I", "-c", ""],
                reads=worker_reads(python),
                scratch=scratch,
                scratch_size=1024**2,
                info_fd=write_end,
            )
            done = subprocess.run(
                command, pass_fds=(write_end,), capture_output=True, timeout=30, check=False
            )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not be run: {exc}"
    finally:
        os.close(read_end)
        os.close(write_end)
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return (
        f"bwrap could not create the namespaces ({said[-1][:200] if said else done.returncode}); "
        "user namespaces may be disabled or restricted here (e.g. Ubuntu's AppArmor rule, or a "
        "container without unshare)"
    )


def bwrap_path() -> str:
    """The bwrap executable (only called once :func:`launch_problem` said it works)."""
    found = shutil.which("bwrap")
    if found is None:
        raise WorkerCrashed(f"the kernel worker failed to start: {_INSTALL_HINT}")
    return found


def read_child_pid(fd: int, deadline: float) -> int | None:
    """Read bwrap's ``--info-fd`` report to its end and return the sandboxed child's pid."""
    data = b""
    while len(data) < 65536:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        pid = json.loads(data).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def host_namespaces() -> dict[str, int]:
    """The host's own namespace ids (the worker checks that its own differ)."""
    return {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in NAMESPACES}


def foreign_namespaces(pid: int) -> str | None:
    """Check, from the host, that process ``pid`` shares none of its namespaces; say what not."""
    try:
        shared = [
            name
            for name in NAMESPACES
            if os.readlink(f"/proc/{pid}/ns/{name}") == os.readlink(f"/proc/self/ns/{name}")
        ]
    except OSError as exc:
        return f"the host could not read the worker's namespaces: {exc}"
    if shared:
        return f"the host sees the worker in its own {', '.join(shared)} namespace(s)"
    return None


def store_files(db_path: str | None) -> tuple[str, ...]:
    """The Event Log files the worker reads: the database, its WAL files and its payloads.

    Only these, never the store folder around them: a store also holds ``config.toml`` (which
    may carry API keys), other sessions' scratch folders and the agent's files.
    """
    if not db_path:
        return ()
    payloads = os.path.join(os.path.dirname(db_path), "payloads")
    return (*(db_path + suffix for suffix in ("", "-wal", "-shm")), payloads)
