"""The persistent sandboxed Python kernel: the model's working memory, and the tool bridge.

:class:`Kernel` (host side) runs cells in a confined worker process whose namespace survives
across cells; :func:`render_observation` turns a :class:`CellResult` into exactly what the model
sees; :func:`doctor` reports which sandbox layers hold on this machine. :class:`MemoryReader` is
the process that alone opens the store and answers ``ms`` calls (the worker's and the JSON memory
tools'), within :class:`ReaderLimits`.
"""

from typing import TYPE_CHECKING

from scrollctx._lazy import lazy_exports

__all__ = [
    "CellResult",
    "DigestEntry",
    "DoctorReport",
    "Kernel",
    "LAYERS",
    "LayerStatus",
    "Limits",
    "MemoryReader",
    "NAMESPACE_LOST",
    "OPT_OUT",
    "PROFILES",
    "ReaderLimits",
    "SandboxPolicy",
    "SandboxStatus",
    "ToolCallError",
    "ToolSpec",
    "describe_tool",
    "doctor",
    "reader_opt_out",
    "render_digest",
    "render_observation",
    "resolve_policy",
]

if TYPE_CHECKING:
    from scrollctx.kernel._bridge import ToolCallError, ToolSpec, describe_tool
    from scrollctx.kernel._digest import DigestEntry, render_digest
    from scrollctx.kernel._doctor import DoctorReport, doctor
    from scrollctx.kernel._host import NAMESPACE_LOST, OPT_OUT, Kernel, reader_opt_out
    from scrollctx.kernel._policy import (
        LAYERS,
        PROFILES,
        LayerStatus,
        Limits,
        SandboxPolicy,
        SandboxStatus,
        resolve_policy,
    )
    from scrollctx.kernel._reader_host import MemoryReader, ReaderLimits
    from scrollctx.kernel._result import CellResult, render_observation
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "CellResult": "scrollctx.kernel._result",
            "DigestEntry": "scrollctx.kernel._digest",
            "DoctorReport": "scrollctx.kernel._doctor",
            "Kernel": "scrollctx.kernel._host",
            "LAYERS": "scrollctx.kernel._policy",
            "LayerStatus": "scrollctx.kernel._policy",
            "Limits": "scrollctx.kernel._policy",
            "MemoryReader": "scrollctx.kernel._reader_host",
            "NAMESPACE_LOST": "scrollctx.kernel._host",
            "OPT_OUT": "scrollctx.kernel._host",
            "PROFILES": "scrollctx.kernel._policy",
            "ReaderLimits": "scrollctx.kernel._reader_host",
            "SandboxPolicy": "scrollctx.kernel._policy",
            "SandboxStatus": "scrollctx.kernel._policy",
            "ToolCallError": "scrollctx.kernel._bridge",
            "ToolSpec": "scrollctx.kernel._bridge",
            "describe_tool": "scrollctx.kernel._bridge",
            "doctor": "scrollctx.kernel._doctor",
            "render_digest": "scrollctx.kernel._digest",
            "reader_opt_out": "scrollctx.kernel._host",
            "render_observation": "scrollctx.kernel._result",
            "resolve_policy": "scrollctx.kernel._policy",
        },
    )
