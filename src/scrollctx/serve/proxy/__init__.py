"""``scroll serve``: an OpenAI- and Anthropic-compatible proxy that manages its clients' context.

A client (an SDK, ``llm``, Claude Code, Codex, a benchmark runner) points its base URL here and
keeps resending its whole history; the proxy logs every message losslessly, sends upstream only
the bounded working view (Algorithm 1, the eviction index, headlines), and answers the model's
``recall_history_python`` calls itself in a sandboxed kernel, so the client never sees a tool it
does not know. Pieces: :mod:`._conversations` (which session a request continues),
:mod:`._recall` (the recall loop), :mod:`._windows` (the window per model), the two wires
and their streams, :mod:`._door`, :mod:`._app` (HTTP), :mod:`._server` (running it). Needs
the ``serve`` extra.
"""

from scrollctx.serve.proxy._app import build_app
from scrollctx.serve.proxy._conversations import Conversations, ViewSettings
from scrollctx.serve.proxy._proxy import Proxy, proxy_rules, sandbox_label
from scrollctx.serve.proxy._recall import RECALL_TOOL, RecallLimits
from scrollctx.serve.proxy._server import ServeOptions, serve_proxy
from scrollctx.serve.proxy._windows import ModelWindows

__all__ = [
    "RECALL_TOOL",
    "Conversations",
    "ModelWindows",
    "Proxy",
    "RecallLimits",
    "ServeOptions",
    "ViewSettings",
    "build_app",
    "proxy_rules",
    "sandbox_label",
    "serve_proxy",
]
