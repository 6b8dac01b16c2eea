"""A seccomp-bpf filter built by hand (no libseccomp) and installed with ``prctl``.

Used only inside the worker, x86_64 only (any other architecture is reported unavailable, and a
filter meeting a foreign architecture at run time kills the process). The filter:

- returns ``EPERM`` for process creation and execution (``fork``, ``vfork``, ``clone`` without
  ``CLONE_THREAD``, ``execve``, ``execveat``), every socket syscall except ``socketpair``
  (so no TCP, UDP, netlink, packet or unix-path sockets), ``ptrace`` and ``process_vm_*``,
  ``setrlimit`` and ``prlimit64`` with a new limit, namespaces, mounts, ``bpf``,
  ``perf_event_open``, ``io_uring``, keyrings, kernel modules, device nodes (``mknod``), pidfds,
  Landlock itself, mode/owner/xattr changes (``chmod``, ``chown``, ``setxattr`` families), the
  inode-flag ioctls (``FS_IOC_SETFLAGS``, ``FS_IOC_FSSETXATTR``), ``memfd_create`` and
  ``memfd_secret`` (memory outside ``RLIMIT_AS``) and System V / POSIX IPC (objects that outlive
  the worker in the host's IPC namespace);
- returns ``EPERM`` for the ways to make the kernel signal another process or to watch files:
  ``fcntl`` with ``F_SETOWN``, ``F_SETOWN_EX``, ``F_SETSIG``, ``F_SETLEASE`` or ``F_NOTIFY``,
  ``ioctl`` ``FIOSETOWN``/``SIOCSPGRP`` (``O_ASYNC`` plus an owner delivers any signal to any
  pid, past the kill filter), ``inotify_*`` and ``fanotify_*`` (instances are counted per uid,
  so a loop exhausts them for every process of the host's user; watches see names in folders
  Landlock denies), ``timer_create`` (each POSIX timer holds a queued signal counted against
  the uid's ``RLIMIT_SIGPENDING``; the rlimits layer also caps the worker's own) and
  ``io_setup`` (AIO contexts come from one machine-wide pool, ``fs.aio-max-nr``);
- returns ``EPERM`` for ``truncate`` by path and for an ``open``/``openat`` that asks for
  ``O_TRUNC`` without asking to write (``O_RDONLY``, or the access mode 3, which asks for
  neither reading nor writing, so Landlock checks no right at all): Landlock controls
  truncation only from ABI 3, and below it a file granted for reading, or any file by the
  access mode 3, could be emptied that way; ``ftruncate`` of a file opened for writing stays
  allowed; ``openat2``, whose flags sit behind a pointer the filter cannot read,
  returns ``ENOSYS`` (glibc and Python never call it);
- returns ``EPERM`` for ``prctl(PR_SET_PDEATHSIG)`` and ``prctl(PR_SET_DUMPABLE)``: the worker
  dies with its host, and the host keeps reading its ``/proc`` entries;
- returns ``EOPNOTSUPP`` for ``fallocate``: blocks it reserves are not counted as written, so it
  would fill a disk past the host's write watch; ``posix_fallocate`` then falls back to writes;
- allows ``kill``/``tgkill``/``rt_(tg)sigqueueinfo`` only towards the worker's own pid;
- returns ``ENOSYS`` for ``clone3`` so glibc falls back to ``clone`` (whose flags can be checked);
- returns ``EPERM`` for x32 syscall numbers; allows everything else (file I/O is Landlock's job).

Threads stay possible on purpose (a cell may use them; they die with the worker).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

__all__ = ["install_filter"]

_AUDIT_ARCH_X86_64 = 0xC000003E
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_AND_K = 0x54
_RET_K = 0x06

_DENIED: dict[str, int] = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "accept4": 288,
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "process_madvise": 440, "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "tkill": 200, "setrlimit": 160,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
    "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
    "request_key": 249, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168,
    "acct": 163, "settimeofday": 164, "clock_settime": 227, "sethostname": 170,
    "setdomainname": 171, "iopl": 172, "ioperm": 173, "syslog": 103, "quotactl": 179,
    "mknod": 133, "mknodat": 259, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "fanotify_init": 300, "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
    # Still uid 0, the worker owns root's files: no mode, owner or xattr changes anywhere.
    "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93,
    "lchown": 94, "fchownat": 260, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
    "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "setxattrat": 463,
    "removexattrat": 466,
    # Memory that RLIMIT_AS does not count, or that outlives the worker: memfds (256 of 256 MiB
    # each would be 64 GiB), secret memory, and System V / POSIX IPC objects, which stay in the
    # host's IPC namespace after the worker is gone.
    "memfd_create": 319, "memfd_secret": 447,
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
    "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
    "mq_notify": 244, "mq_getsetattr": 245,
    # Truncation by path: Landlock governs it only from ABI 3, and it needs no descriptor, so
    # below that a guessed path would do (the whole Event Log cut to 0 bytes). ftruncate stays:
    # it needs a descriptor opened for writing, which Landlock governs from ABI 1.
    "truncate": 76,
    # Kernel objects counted per uid or per machine, which one loop would take from the host:
    # POSIX timers (a queued signal each, against the uid's RLIMIT_SIGPENDING) and AIO
    # contexts (fs.aio-max-nr is shared by every process). Python uses neither.
    "timer_create": 222, "io_setup": 206,
}  # fmt: skip
_SELF_ONLY_ARG0 = {"kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297}
_CLONE = 56
_CLONE3 = 435
_IOCTL = 16
_DENIED_IOCTLS = (
    0x40086602, 0x40046602, 0x401C5820,  # FS_IOC(32)_SETFLAGS, FS_IOC_FSSETXATTR: inode flags
    0x8901, 0x8902,  # FIOSETOWN, SIOCSPGRP: who gets the file's SIGIO
)  # fmt: skip
_FCNTL = 72
_DENIED_FCNTLS = (8, 15, 10, 1024, 1026)  # F_SETOWN, F_SETOWN_EX, F_SETSIG, F_SETLEASE, F_NOTIFY
_PRCTL = 157
_DENIED_PRCTLS = (1, 4)  # PR_SET_PDEATHSIG, PR_SET_DUMPABLE
_FALLOCATE = 285
_PRLIMIT64 = 302  # allowed only as a read (new_limit == NULL), so getrlimit keeps working
_OPEN, _OPENAT, _OPENAT2 = 2, 257, 437
# An open that truncates without asking to write: the flags masked with _TRUNCATING_MASK are one
# of these (access mode O_RDONLY, or 3: neither read nor write, which Landlock checks no right
# for).
_TRUNCATING_MASK = os.O_TRUNC | os.O_ACCMODE
_TRUNCATING_OPENS = (os.O_TRUNC | os.O_RDONLY, os.O_TRUNC | os.O_ACCMODE)


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


# Before label resolution: an instruction (code, k, jump-if-true label, jump-if-false label),
# or a bare string, which names the position of the next instruction.
_Insn = tuple[int, int, str | None, str | None] | str


def _program(own_pid: int) -> list[_Insn]:
    prog: list[_Insn] = [
        (_LD_W_ABS, 4, None, None),  # seccomp_data.arch
        (_JEQ_K, _AUDIT_ARCH_X86_64, None, "kill"),
        (_LD_W_ABS, 0, None, None),  # seccomp_data.nr
        (_JGE_K, _X32_BIT, "eperm", None),
        (_JEQ_K, _CLONE3, "enosys", None),
        (_JEQ_K, _OPENAT2, "enosys", None),
        (_JEQ_K, _OPEN, "open", None),
        (_JEQ_K, _OPENAT, "openat", None),
        (_JEQ_K, _CLONE, "clone", None),
        (_JEQ_K, _PRLIMIT64, "prlimit", None),
        (_JEQ_K, _IOCTL, "ioctl", None),
        (_JEQ_K, _FCNTL, "fcntl", None),
        (_JEQ_K, _PRCTL, "prctl", None),
        (_JEQ_K, _FALLOCATE, "eopnotsupp", None),
    ]
    prog += [(_JEQ_K, nr, "self_pid", None) for nr in _SELF_ONLY_ARG0.values()]
    prog += [(_JEQ_K, nr, "eperm", None) for nr in _DENIED.values()]
    prog += [
        (_RET_K, _RET_ALLOW, None, None),
        "clone",
        (_LD_W_ABS, 16, None, None),  # low 32 bits of args[0]
        (_JSET_K, _CLONE_THREAD, "allow", "eperm"),
        "ioctl",
        (_LD_W_ABS, 24, None, None),  # low 32 bits of args[1] (the request)
        *((_JEQ_K, request, "eperm", None) for request in _DENIED_IOCTLS),
        (_RET_K, _RET_ALLOW, None, None),
        "fcntl",
        (_LD_W_ABS, 24, None, None),  # low 32 bits of args[1] (the command)
        *((_JEQ_K, command, "eperm", None) for command in _DENIED_FCNTLS),
        (_RET_K, _RET_ALLOW, None, None),
        "open",
        (_LD_W_ABS, 24, None, None),  # low 32 bits of args[1] (the flags)
        *_refuse_truncating_opens(),
        "openat",
        (_LD_W_ABS, 32, None, None),  # low 32 bits of args[2] (the flags)
        *_refuse_truncating_opens(),
        "prctl",
        (_LD_W_ABS, 16, None, None),  # low 32 bits of args[0] (the option)
        *((_JEQ_K, option, "eperm", None) for option in _DENIED_PRCTLS),
        (_RET_K, _RET_ALLOW, None, None),
        "prlimit",
        (_LD_W_ABS, 32, None, None),  # low 32 bits of args[2] (new_limit)
        (_JEQ_K, 0, None, "eperm"),
        (_LD_W_ABS, 36, None, None),  # high 32 bits of args[2]
        (_JEQ_K, 0, "allow", "eperm"),
        "self_pid",
        (_LD_W_ABS, 16, None, None),
        (_JEQ_K, own_pid, "allow", "eperm"),
        "allow",
        (_RET_K, _RET_ALLOW, None, None),
        "eperm",
        (_RET_K, _RET_ERRNO | errno.EPERM, None, None),
        "enosys",
        (_RET_K, _RET_ERRNO | errno.ENOSYS, None, None),
        "eopnotsupp",
        (_RET_K, _RET_ERRNO | errno.EOPNOTSUPP, None, None),
        "kill",
        (_RET_K, _RET_KILL_PROCESS, None, None),
    ]
    return prog


def _refuse_truncating_opens() -> list[_Insn]:
    # The open's flags are loaded: EPERM if they truncate without asking to write.
    return [
        (_AND_K, _TRUNCATING_MASK, None, None),
        *((_JEQ_K, flags, "eperm", None) for flags in _TRUNCATING_OPENS),
        (_RET_K, _RET_ALLOW, None, None),
    ]


def _assemble(prog: list[_Insn]) -> list[_SockFilter]:
    labels: dict[str, int] = {}
    body: list[tuple[int, int, str | None, str | None]] = []
    for insn in prog:
        if isinstance(insn, str):
            labels[insn] = len(body)
        else:
            body.append(insn)

    def offset(here: int, label: str | None) -> int:
        if label is None:
            return 0
        jump = labels[label] - here - 1
        if not 0 <= jump < 256:
            raise OSError(errno.EINVAL, f"seccomp jump to {label} out of range ({jump})")
        return jump

    return [
        _SockFilter(code, offset(i, jt), offset(i, jf), k & 0xFFFFFFFF)
        for i, (code, k, jt, jf) in enumerate(body)
    ]


def install_filter() -> str:
    """Install the filter on this process (and its future threads); return what holds."""
    if platform.machine() != "x86_64":
        raise OSError(errno.ENOTSUP, f"the seccomp filter is x86_64-only ({platform.machine()})")
    insns = _assemble(_program(os.getpid()))
    array = (_SockFilter * len(insns))(*insns)
    fprog = _SockFprog(len(insns), ctypes.cast(array, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(SET_SECCOMP) failed: {os.strerror(err)}")
    return (
        f"{len(insns)} instructions; fork/exec/sockets/ptrace/setrlimit, signal owners, "
        "inotify, timers, AIO, truncation by path or by an open that does not write, and "
        "fallocate denied"
    )
