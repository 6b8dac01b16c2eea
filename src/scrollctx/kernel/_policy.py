"""Sandbox policy: which layers exist, which a profile requires, and how their status reads.

Six layers confine the worker; each is applied before any model code runs and self-tested:

- ``namespaces``: private mount, PID, IPC and UTS namespaces made by bubblewrap: the root holds
  only what Python needs (read-only) and the scratch folder; no process outside is addressable,
  and everything the worker starts dies with it (:mod:`scrollctx.kernel._namespace`);
- ``rlimits``: address space, file size, open files, no core dumps; and, from the host, a thread
  cap (a ``pids`` cgroup, where writable) and a watch on scratch writing, free disk and CPU
  used between cells;
- ``netns``: a private network namespace (only a downed ``lo``);
- ``caps``: every Linux capability dropped (a root worker cannot override permissions, change
  owners, set immutable flags, do raw I/O or administer anything);
- ``landlock``: the file system is read-only except the scratch folder, and the store is not
  readable at all (``ms`` is answered by the memory reader); TCP bind/connect and
  signals/abstract sockets towards other domains are denied;
- ``seccomp``: no fork/exec, no new sockets, no setrlimit/prlimit, no ptrace, no signals to other
  processes, no chmod/chown/xattr changes, no mount/namespace/bpf/io_uring/module syscalls.

Profiles (``strict`` is the default and the only one that is not an opt-out):

- ``strict``: every layer is required; if one does not hold, cells are refused.
- ``best-effort``: every available layer is applied, none is required (an opt-out: logged and shown
  in every observation).
- ``off``: no layer is applied (an opt-out: logged and shown in every observation).

``unavailable`` names layers to treat as missing on this machine: the worker does not apply them
and reports them unavailable. It exists to check fail-closed behaviour and the doctor on a machine
that has every layer; it only ever weakens the sandbox, so it cannot be used to claim protection.
``landlock_abi`` is test-only in the same way: it caps the Landlock ABI the worker uses below the
kernel's, so the hostile-cell suite shows that what ``strict`` claims holds on older kernels too
(Ubuntu 22.04 has ABI 1, Debian 12 ABI 2: neither controls truncation; signal scoping needs 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from scrollctx.errors import UsageError

__all__ = [
    "LAYERS",
    "LayerState",
    "LayerStatus",
    "Limits",
    "PROFILES",
    "SandboxPolicy",
    "SandboxStatus",
    "parse_layers",
    "resolve_policy",
]

LAYERS: tuple[str, ...] = ("namespaces", "rlimits", "netns", "caps", "landlock", "seccomp")
"""Every sandbox layer, in the order the worker applies them."""

PROFILES: tuple[str, ...] = ("strict", "best-effort", "off")
"""The named profiles; only ``strict`` is not an opt-out."""

LayerState = Literal["ok", "unavailable", "failed", "skipped"]
_STATES: frozenset[str] = frozenset({"ok", "unavailable", "failed", "skipped"})


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits applied by the ``rlimits`` layer (bytes and file descriptors)."""

    address_space: int = 2 * 1024**3
    file_size: int = 256 * 1024**2
    open_files: int = 256
    threads: int = 512
    """Tasks (threads) the worker may have, through a pids cgroup where the machine offers one."""
    scratch_size: int = 512 * 1024**2
    """Bytes the scratch folder may hold while a kernel runs: the size of its tmpfs in the
    worker's mount namespace (its pages are RAM, hence the modest default)."""
    scratch_writes: int = 4 * 1024**3
    """Without the namespaces layer: bytes one worker may write to scratch over its life before
    the host kills it."""
    disk_floor: int = 1024**3
    """Free bytes the host keeps on the scratch file system (at most half of what was free)."""
    idle_cpu: float = 10.0
    """CPU seconds the worker may use between two cells (threads a cell left running)."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What the worker applies and what the host requires before it runs a cell.

    Example: ``SandboxPolicy()`` is strict; ``SandboxPolicy("off")`` opts out (logged).
    """

    profile: str = "strict"
    unavailable: frozenset[str] = field(default_factory=frozenset)
    limits: Limits = field(default_factory=Limits)
    landlock_abi: int | None = None
    """Test-only: the highest Landlock ABI the worker may use (``None``: the kernel's)."""

    def __post_init__(self) -> None:
        if self.landlock_abi is not None and not (
            isinstance(self.landlock_abi, int) and self.landlock_abi >= 1
        ):
            raise UsageError(f"landlock_abi must be an ABI version >= 1, not {self.landlock_abi!r}")
        if self.profile not in PROFILES:
            raise UsageError(
                f"unknown sandbox profile {self.profile!r}; choose one of {', '.join(PROFILES)}"
            )
        unknown = sorted(set(self.unavailable) - set(LAYERS))
        if unknown:
            raise UsageError(
                f"unknown sandbox layer(s) {', '.join(unknown)}; layers are {', '.join(LAYERS)}"
            )
        object.__setattr__(self, "unavailable", frozenset(self.unavailable))

    @property
    def is_opt_out(self) -> bool:
        """Whether this policy weakens the default (anything but ``strict``)."""
        return self.profile != "strict"

    @property
    def required(self) -> frozenset[str]:
        """The layers that must hold before a cell may run."""
        return frozenset(LAYERS) if self.profile == "strict" else frozenset()

    @property
    def applied(self) -> tuple[str, ...]:
        """The layers the worker tries to apply."""
        if self.profile == "off":
            return ()
        return tuple(layer for layer in LAYERS if layer not in self.unavailable)

    def to_wire(self) -> dict[str, Any]:
        """Return the JSON shape sent to the worker at boot."""
        return {
            "profile": self.profile,
            "apply": list(self.applied),
            "unavailable": sorted(self.unavailable),
            "landlock_abi": self.landlock_abi,
            "limits": {
                "address_space": self.limits.address_space,
                "file_size": self.limits.file_size,
                "open_files": self.limits.open_files,
                "threads": self.limits.threads,
            },
        }


def resolve_policy(
    sandbox: str | SandboxPolicy | None, *, unavailable: Iterable[str] = ()
) -> SandboxPolicy:
    """Turn a profile name (or a ready policy) into a :class:`SandboxPolicy`."""
    if isinstance(sandbox, SandboxPolicy):
        return sandbox
    return SandboxPolicy(sandbox or "strict", unavailable=frozenset(unavailable))


@dataclass(frozen=True, slots=True)
class LayerStatus:
    """One layer as the worker reported it after its self-test."""

    name: str
    state: LayerState
    detail: str = ""

    @property
    def holds(self) -> bool:
        """Whether the layer is applied and passed its self-test."""
        return self.state == "ok"


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """The sandbox of one worker: the policy's profile and each layer's status."""

    profile: str
    layers: tuple[LayerStatus, ...]
    required: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_opt_out(self) -> bool:
        """Whether the caller opted out of the strict profile."""
        return self.profile != "strict"

    @property
    def missing(self) -> tuple[LayerStatus, ...]:
        """Required layers that do not hold."""
        return tuple(s for s in self.layers if s.name in self.required and not s.holds)

    @property
    def holds(self) -> bool:
        """Whether every required layer holds (cells may run)."""
        return not self.missing

    def layer(self, name: str) -> LayerStatus:
        """Return the status of one layer."""
        for status in self.layers:
            if status.name == name:
                return status
        raise UsageError(f"unknown sandbox layer {name!r}; layers are {', '.join(LAYERS)}")

    def summary(self) -> str:
        """Return one line such as ``rlimits ok, netns ok, landlock unavailable, seccomp ok``."""
        return ", ".join(f"{s.name} {s.state}" for s in self.layers)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able description (for events and ``--json``)."""
        return {
            "profile": self.profile,
            "holds": self.holds,
            "required": sorted(self.required),
            "layers": {s.name: {"state": s.state, "detail": s.detail} for s in self.layers},
        }


def parse_layers(raw: Any) -> tuple[LayerStatus, ...]:
    """Validate the worker's (untrusted) layer report; unknown or malformed parts are dropped."""
    if not isinstance(raw, Mapping):
        return tuple(LayerStatus(name, "failed", "no report from the worker") for name in LAYERS)
    statuses = []
    for name in LAYERS:
        item = raw.get(name)
        state = item.get("state") if isinstance(item, Mapping) else None
        detail = item.get("detail") if isinstance(item, Mapping) else None
        if state not in _STATES:
            statuses.append(LayerStatus(name, "failed", "the worker sent no valid status"))
            continue
        text = detail[:300] if isinstance(detail, str) else ""
        statuses.append(LayerStatus(name, state, text))
    return tuple(statuses)
