"""``doctor``: start a probe worker and report which sandbox layers hold on this machine.

The probe applies every layer it can (profile ``best-effort``, no Event Log, no tools), runs its
self-tests, reports and exits; no cell runs. The verdict is whether the ``strict`` profile would
run cells here. Layers named in ``unavailable`` are treated as missing, exactly as a machine
without them would be (that is how the report is checked on machines that have every layer).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scrollctx.kernel._host import Kernel
from scrollctx.kernel._policy import LAYERS, SandboxPolicy, SandboxStatus

__all__ = ["DoctorReport", "doctor"]


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Which layers hold here, and whether the strict profile can run cells."""

    status: SandboxStatus
    python: str
    system: str

    @property
    def strict_holds(self) -> bool:
        """Whether every layer holds, so ``strict`` (the default) runs cells."""
        return all(self.status.layer(name).holds for name in LAYERS)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able report (for ``scroll kernel doctor --json``)."""
        layers = self.status.to_dict()["layers"]
        return {
            "strict_holds": self.strict_holds,
            "layers": layers,
            "python": self.python,
            "system": self.system,
        }

    def render(self) -> str:
        """Return the human-readable report."""
        lines = [f"{s.name:<10} {s.state:<12} {s.detail}" for s in self.status.layers]
        verdict = (
            "strict profile: all layers hold; cells run sandboxed"
            if self.strict_holds
            else "strict profile: cells would be REFUSED here (missing: "
            + ", ".join(s.name for s in self.status.layers if not s.holds)
            + "); opt out explicitly with --sandbox best-effort or off"
        )
        return "\n".join([*lines, verdict, f"python {self.python}; {self.system}"])


def doctor(*, unavailable: Iterable[str] = (), python: str | None = None) -> DoctorReport:
    """Start a probe worker, read its layer report, stop it, and return the report."""
    policy = SandboxPolicy("best-effort", unavailable=frozenset(unavailable))
    with Kernel(sandbox=policy, python=python) as kernel:
        status = kernel.start()
    return DoctorReport(
        status=status,
        python=sys.version.split()[0],
        system=f"{platform.system()} {platform.release()} {platform.machine()}",
    )
