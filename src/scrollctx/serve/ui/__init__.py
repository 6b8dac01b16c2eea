"""The web inspector (``scroll ui``): read-only pages over the Event Log, the working view of
every model call and the eviction index, served on loopback (a token for anything else).

The pages are thin: what the model received on call N comes from
:func:`scrollctx.agent.rebuild_call` (the view's own restore and render code), the index
over time from :func:`scrollctx.view.load_index`, search from ``ms.search``, plots from
:meth:`WorkingView.replay`, bench reports from :func:`scrollctx.bench.write_report`.
Starlette, Jinja2 and uvicorn come with the ``ui`` extra; this package imports them only in
``_app`` (:func:`create_app`), which :meth:`UIServer.run` loads.
"""

from scrollctx.serve.ui._server import UIServer

__all__ = ["UIServer"]
