"""The front doors: ways into Scroll other than its own agent loop (MCP server, proxy, UI).

Every door is a thin module over the layers below (the surface, the kernel, the view, the
ingesters, the agent's rebuild of past calls); what the doors share lives here:
:class:`KernelRegistry`, one persistent sandboxed kernel per client session, with idle timeout
and closing that leaves no worker behind. The MCP server is :mod:`scrollctx.serve.mcp` (extra
``mcp``); the web inspector :mod:`scrollctx.serve.ui` (extra ``ui``).
"""

from scrollctx.serve._sessions import KernelRegistry, log_name

__all__ = ["KernelRegistry", "log_name"]
