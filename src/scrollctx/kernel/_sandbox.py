"""Apply the sandbox layers inside the worker, in order, and self-test each one.

Runs in the worker before any model code, while it is still single-threaded and after every
native library it needs is loaded (``ctypes.util.find_library`` shells out, which fails once
seccomp holds). Order: the namespaces' self-test (the host made them, through bubblewrap),
rlimits, network namespace, capabilities, Landlock, seccomp, then the self-tests that need every
layer in place. Each layer ends ``ok`` (applied and its self-test
passed), ``unavailable`` (this machine or the policy does not offer it), ``failed`` (applied, but
the self-test showed it does not hold) or ``skipped`` (the profile does not apply it).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import resource
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scrollctx.kernel import _caps, _landlock, _seccomp
from scrollctx.kernel._namespace import NAMESPACES, READ_ROOTS, readable_paths, store_files

__all__ = ["SandboxPlan", "apply_sandbox", "die_with_host"]

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_GET_SECCOMP = 21
_SYS_FORK = 57
_LINUX_ONLY = frozenset({"namespaces", "netns", "caps", "landlock", "seccomp"})
_ROOT_MOUNTS = frozenset({"dev", "proc"})
_DEVICE_READS = ("/dev/urandom", "/dev/random", "/dev/zero")
_QUEUED_SIGNALS = 64  # RLIMIT_SIGPENDING: Python queues none; a cell needs none


@dataclass(slots=True)
class SandboxPlan:
    """What the worker was asked to apply, decoded from the boot frame."""

    apply: tuple[str, ...]
    unavailable: tuple[str, ...]
    limits: dict[str, int]
    scratch: str
    db_path: str | None
    landlock_abi: int | None = None
    namespaces: dict[str, Any] | None = None
    """The host's own namespace ids, when it started the worker in namespaces of its own."""
    report: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, policy: dict[str, Any], scratch: str, db_path: str | None) -> SandboxPlan:
        return cls(
            apply=tuple(policy.get("apply", ())),
            unavailable=tuple(policy.get("unavailable", ())),
            limits=dict(policy.get("limits", {})),
            scratch=scratch,
            db_path=db_path,
            landlock_abi=policy.get("landlock_abi"),
            namespaces=policy.get("namespaces"),
        )

    def mark(self, layer: str, state: str, detail: str) -> None:
        self.report[layer] = {"state": state, "detail": detail}


def die_with_host() -> None:
    """Have the kernel SIGKILL this worker as soon as the thread that started it is gone.

    Called first in the worker, before it reads its boot frame, so before any model code; seccomp
    later denies changing it. Unlike the worker's watch on its control pipe, no file descriptor
    trick of a cell can defeat it. If the host died before this call, the boot frame never comes
    (end of file) and the worker exits anyway. The host starts workers from one long-lived
    thread (:mod:`scrollctx.kernel._process`), since the signal follows the parent *thread*.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")


def apply_sandbox(plan: SandboxPlan) -> dict[str, dict[str, str]]:
    """Apply every layer the plan names, self-test them, and return the status per layer."""
    steps: dict[str, Callable[[SandboxPlan], str]] = {
        "namespaces": _check_namespaces,
        "rlimits": _apply_rlimits,
        "netns": _apply_netns,
        "caps": _apply_caps,
        "landlock": _apply_landlock,
        "seccomp": _apply_seccomp,
    }
    for layer, step in steps.items():
        if layer in plan.unavailable:
            plan.mark(layer, "unavailable", "forced unavailable by the sandbox policy")
        elif layer in _LINUX_ONLY and not sys.platform.startswith("linux"):
            plan.mark(layer, "unavailable", f"needs Linux (this is {sys.platform})")
        elif layer not in plan.apply:
            plan.mark(layer, "skipped", "not applied by this profile")
        else:
            try:
                plan.mark(layer, "ok", step(plan))
            except _SelfTestFailed as exc:
                plan.mark(layer, "failed", str(exc))
            except OSError as exc:
                plan.mark(layer, "unavailable", str(exc))
    _self_test(plan)
    return plan.report


def _check_namespaces(plan: SandboxPlan) -> str:
    host = plan.namespaces
    if not isinstance(host, dict):
        raise OSError(errno.ENOTSUP, "the host did not start the worker in namespaces of its own")
    shared = [
        name for name in NAMESPACES if os.stat(f"/proc/self/ns/{name}").st_ino == host.get(name)
    ]
    if shared:
        raise _SelfTestFailed(
            f"self-test: the worker shares the host's {', '.join(shared)} namespace"
        )
    if os.getpid() != 1:
        raise _SelfTestFailed(
            f"self-test: the worker is pid {os.getpid()}, not 1, in its namespace"
        )
    root = set(os.listdir("/"))
    unexpected = sorted(root - _root_entries(plan))
    if unexpected:
        raise _SelfTestFailed(f"self-test: the root also holds {unexpected}")
    if not _expect_denied(lambda: os.mkdir("/.scroll-sandbox-probe"), errno.EROFS):
        os.rmdir("/.scroll-sandbox-probe")
        raise _SelfTestFailed("self-test: the root is writable")
    return (
        "private mount, PID, IPC and UTS namespaces: the worker is pid 1; its root is "
        f"read-only and holds only {', '.join(sorted(root))}"
    )


def _root_entries(plan: SandboxPlan) -> set[str]:
    # The top-level names the host's binds create: interpreter, system, store and scratch paths.
    interpreter = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]
    paths = [*readable_paths(interpreter, store_files(plan.db_path)), plan.scratch]
    paths += [os.path.dirname(sys.executable), *READ_ROOTS]
    return {path.split("/")[1] for path in paths if path.startswith("/")} | _ROOT_MOUNTS


def _apply_rlimits(plan: SandboxPlan) -> str:
    wanted = {
        resource.RLIMIT_AS: plan.limits.get("address_space", 2 * 1024**3),
        resource.RLIMIT_FSIZE: plan.limits.get("file_size", 256 * 1024**2),
        resource.RLIMIT_NOFILE: plan.limits.get("open_files", 256),
        resource.RLIMIT_CORE: 0,
        # Queued signals are counted per uid, against the receiver's limit: a worker blocking a
        # real-time signal and queuing it to itself in a loop would use up the allowance of
        # every process of the host's user. The host's interrupts (kill) are never counted.
        resource.RLIMIT_SIGPENDING: _QUEUED_SIGNALS,
    }
    # Without this, writing past RLIMIT_FSIZE kills the worker instead of raising EFBIG.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for limit, value in wanted.items():
        resource.setrlimit(limit, (value, value))
    for limit, value in wanted.items():
        if resource.getrlimit(limit) != (value, value):
            raise OSError(errno.EINVAL, f"rlimit {limit} did not take")
    return (
        f"address space {wanted[resource.RLIMIT_AS] // 1024**2} MiB, "
        f"file size {wanted[resource.RLIMIT_FSIZE] // 1024**2} MiB, "
        f"{wanted[resource.RLIMIT_NOFILE]} open files, no core dumps, "
        f"{_QUEUED_SIGNALS} queued signals"
    )


def _unshare_network() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}")


def _apply_netns(plan: SandboxPlan) -> str:
    _unshare_network()
    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        raise _SelfTestFailed(f"self-test: interfaces after unshare are {names}")
    return "private network namespace (only lo, down)"


def _apply_caps(plan: SandboxPlan) -> str:
    return _caps.drop_capabilities()


def _landlock_paths(plan: SandboxPlan) -> tuple[list[str], list[str]]:
    interpreter = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]
    reads = readable_paths(interpreter, store_files(plan.db_path))
    reads += [path for path in _DEVICE_READS if os.path.exists(path)]
    return reads, [plan.scratch]


def _apply_landlock(plan: SandboxPlan) -> str:
    reads, writes = _landlock_paths(plan)
    return _landlock.restrict(
        reads, writes, read_write_files=["/dev/null"], max_abi=plan.landlock_abi
    )


def _apply_seccomp(plan: SandboxPlan) -> str:
    return _seccomp.install_filter()


class _SelfTestFailed(Exception):
    """A layer was applied but its self-test shows it does not hold."""


def _self_test(plan: SandboxPlan) -> None:
    tests: dict[str, Callable[[SandboxPlan], str | None]] = {
        "landlock": _probe_landlock,
        "seccomp": _probe_seccomp,
    }
    for layer, probe in tests.items():
        if plan.report.get(layer, {}).get("state") != "ok":
            continue
        problem = probe(plan)
        if problem:
            plan.mark(layer, "failed", f"self-test: {problem}")


def _expect_denied(action: Callable[[], object], *also: int) -> bool:
    try:
        action()
    except PermissionError:
        return True
    except OSError as exc:
        return exc.errno in (errno.EPERM, errno.EACCES, *also)
    return False


def _probe_landlock(plan: SandboxPlan) -> str | None:
    # /dev/zero is readable and, as a device, writable on any mount: only Landlock refuses the
    # write, so the probe tests Landlock itself, with or without the mount namespace.
    def write_device() -> None:
        os.close(os.open("/dev/zero", os.O_WRONLY))

    if not _expect_denied(write_device):
        return "could open /dev/zero for writing"
    if not _expect_denied(lambda: os.open("/", os.O_RDONLY | os.O_DIRECTORY)):
        return "could list /"
    probe = os.path.join(plan.scratch, ".scroll-sandbox-probe")
    fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.close(fd)
    os.unlink(probe)
    return None


def _probe_seccomp(plan: SandboxPlan) -> str | None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_GET_SECCOMP, 0, 0, 0, 0) != 2:
        return "prctl(GET_SECCOMP) is not 2 (filter mode)"
    if not _expect_denied(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)):
        return "socket(AF_INET) was allowed"
    pid = libc.syscall(_SYS_FORK)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
        return "fork was allowed"
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, limit)
        return "setrlimit was allowed"
    except (ValueError, OSError):
        pass  # CPython reports EPERM from setrlimit as ValueError
    if not _expect_denied(lambda: os.kill(os.getppid(), 0)):
        return "kill(parent, 0) was allowed"
    if not _expect_denied(lambda: os.chmod(plan.scratch, 0o700)):
        return "chmod was allowed"
    if libc.prctl(_PR_SET_PDEATHSIG, 0, 0, 0, 0) != -1:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the probe must not weaken
        return "prctl(PR_SET_PDEATHSIG) was allowed"
    read_end, write_end = os.pipe()
    try:
        if not _expect_denied(lambda: fcntl.fcntl(write_end, fcntl.F_SETOWN, os.getpid())):
            return "fcntl(F_SETOWN) was allowed"
    finally:
        os.close(read_end)
        os.close(write_end)
    return None
