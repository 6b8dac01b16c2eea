"""Drop every Linux capability of the worker: bounding, ambient, effective, permitted, inheritable.

Used only inside the worker, after the network namespace is made (that needs ``CAP_SYS_ADMIN``)
and before Landlock and seccomp (which need none once ``no_new_privs`` is set). Without
capabilities a worker running as root can no longer override file permissions, change owners
(``CAP_CHOWN``), set immutable flags (``CAP_LINUX_IMMUTABLE``), do raw I/O, administer the
network or load anything into the kernel. It stays uid 0, so it still owns root's files: the
seccomp layer denies chmod/chown/xattr changes for that reason.
"""

from __future__ import annotations

import ctypes
import errno
import os

__all__ = ["drop_capabilities"]

_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _fail(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what} failed: {os.strerror(err)}")


def drop_capabilities() -> str:
    """Drop all capabilities of this process; return a one-line description of what holds."""
    libc = ctypes.CDLL(None, use_errno=True)
    dropped = 0
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
            dropped += 1
        elif ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows
        else:
            raise _fail(f"prctl(CAPBSET_DROP, {cap})")
    if libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0:
        raise _fail("prctl(CAP_AMBIENT_CLEAR_ALL)")
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    empty = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), empty) != 0:
        raise _fail("capset")
    held = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), held) != 0:
        raise _fail("capget")
    if any(d.effective or d.permitted or d.inheritable for d in held):
        raise OSError(errno.EPERM, "capabilities are still held after capset")
    if libc.prctl(_PR_CAPBSET_READ, 0, 0, 0, 0) != 0:
        raise OSError(errno.EPERM, "the bounding set still holds CAP_CHOWN")
    return f"all {dropped} capabilities dropped (bounding, ambient, effective, permitted)"
