"""scrollctx: programmatic context management for long-horizon LLM agents.

The agent's whole history lives losslessly in an append-only Event Log; the model's code searches
and computes over it through the memory surface ``ms`` in a sandboxed persistent kernel; only
what that code prints enters the next model call.
"""

from typing import TYPE_CHECKING

from scrollctx._lazy import lazy_exports

__all__ = [
    "Config",
    "Event",
    "EventLog",
    "Kind",
    "NewEvent",
    "ScrollError",
    "resolve_config",
]

__version__ = "0.1.0"

if TYPE_CHECKING:
    from scrollctx.config import Config, resolve_config
    from scrollctx.errors import ScrollError
    from scrollctx.log import Event, EventLog, Kind, NewEvent
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Config": "scrollctx.config",
            "Event": "scrollctx.log",
            "EventLog": "scrollctx.log",
            "Kind": "scrollctx.log",
            "NewEvent": "scrollctx.log",
            "ScrollError": "scrollctx.errors",
            "resolve_config": "scrollctx.config",
        },
    )
