"""Landlock through raw syscalls (x86_64 and aarch64 share the numbers 444-446).

Used only inside the worker. :func:`restrict` builds one ruleset that handles every file-system
right the running kernel knows, grants read-only rights beneath ``read_paths``, read-write rights
beneath ``write_paths`` (never ``EXECUTE`` and never the right to make device nodes), denies TCP
bind/connect (ABI >= 4) and scopes signals and abstract unix sockets to the worker (ABI >= 6),
then restricts the calling thread. It must run while the worker is still single-threaded, so
every later thread inherits the domain. Every failing step raises :class:`OSError`; nothing is
half-applied silently. ``max_abi`` caps the ABI used below the kernel's (a test-only weakening:
it shows what holds on older kernels such as Debian 12's, ABI 2).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

__all__ = ["abi_version", "restrict"]

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_MAKE_CHAR = 1 << 6
_MAKE_BLOCK = 1 << 11
_REFER = 1 << 13
_TRUNCATE = 1 << 14
_IOCTL_DEV = 1 << 15
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ_ONLY = _READ_FILE | _READ_DIR
_NET_TCP = 0b11  # BIND_TCP | CONNECT_TCP; with no port rule every port is denied
_SCOPES = 0b11  # ABSTRACT_UNIX_SOCKET | SIGNAL


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi_version() -> int:
    """Return the Landlock ABI version, or a value below 1 when Landlock is unavailable."""
    return int(
        _libc.syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
    )


def _handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM, ABI 1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock {what} failed: {os.strerror(err)}")
    return result


def _add_rule(ruleset_fd: int, path: str, rights: int, handled: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            rights &= _FILE_ONLY
        rule = _PathBeneath(rights & handled, fd)
        _check(
            _libc.syscall(
                ctypes.c_long(_SYS_ADD_RULE),
                ctypes.c_int(ruleset_fd),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            ),
            f"add_rule({path})",
        )
    finally:
        os.close(fd)


def restrict(
    read_paths: Iterable[str],
    write_paths: Iterable[str],
    *,
    read_write_files: Iterable[str] = (),
    max_abi: int | None = None,
) -> str:
    """Restrict this process to the given paths; return a one-line description of what holds."""
    kernel_abi = abi_version()
    if kernel_abi < 1:
        err = ctypes.get_errno()
        raise OSError(err, f"Landlock is not available here ({os.strerror(err)})")
    abi = min(kernel_abi, max_abi) if max_abi else kernel_abi
    handled = _handled_fs(abi)
    net = _NET_TCP if abi >= 4 else 0
    scoped = _SCOPES if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr = _RulesetAttr(handled, net, scoped)
    ruleset_fd = _check(
        _libc.syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            ctypes.byref(attr),
            ctypes.c_size_t(size),
            ctypes.c_uint32(0),
        ),
        "create_ruleset",
    )
    try:
        for path in read_paths:
            _add_rule(ruleset_fd, path, _READ_ONLY, handled)
        for path in read_write_files:
            _add_rule(ruleset_fd, path, _READ_FILE | _WRITE_FILE, handled)
        writable = handled & ~(_EXECUTE | _MAKE_CHAR | _MAKE_BLOCK | _IOCTL_DEV)
        for path in write_paths:
            _add_rule(ruleset_fd, path, writable, handled)
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(
            _libc.syscall(
                ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)
            ),
            "restrict_self",
        )
    finally:
        os.close(ruleset_fd)
    extras = []
    if net:
        extras.append("tcp denied")
    if scoped:
        extras.append("signals and abstract sockets scoped")
    if not abi >= 3:
        extras.append("truncate not controlled (ABI < 3)")
    capped = f" (capped from {kernel_abi} for testing)" if abi < kernel_abi else ""
    return f"ABI {abi}{capped}; " + "; ".join(["fs read-only except scratch", *extras])
