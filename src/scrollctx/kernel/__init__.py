"""The persistent sandboxed Python kernel: the model's working memory, and the tool bridge.

:class:`Kernel` (host side) runs cells in a confined worker process whose namespace survives
across cells; :func:`render_observation` turns a :class:`CellResult` into exactly what the model
sees; :func:`doctor` reports which sandbox layers hold on this machine.
"""

from scrollctx.kernel._bridge import ToolCallError, ToolSpec, describe_tool
from scrollctx.kernel._digest import DigestEntry, render_digest
from scrollctx.kernel._doctor import DoctorReport, doctor
from scrollctx.kernel._host import NAMESPACE_LOST, Kernel
from scrollctx.kernel._policy import (
    LAYERS,
    PROFILES,
    LayerStatus,
    Limits,
    SandboxPolicy,
    SandboxStatus,
)
from scrollctx.kernel._result import CellResult, render_observation

__all__ = [
    "CellResult",
    "DigestEntry",
    "DoctorReport",
    "Kernel",
    "LAYERS",
    "LayerStatus",
    "Limits",
    "NAMESPACE_LOST",
    "PROFILES",
    "SandboxPolicy",
    "SandboxStatus",
    "ToolCallError",
    "ToolSpec",
    "describe_tool",
    "doctor",
    "render_digest",
    "render_observation",
]
