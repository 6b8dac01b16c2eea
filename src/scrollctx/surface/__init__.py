"""The memory surface ``ms``: read-only, budgeted access to the Event Log for model code.

Standard library only (it runs inside the sandboxed kernel worker): it imports nothing of
scrollctx but ``log``, ``errors`` and ``config``.

In the kernel, ``ms`` is a :class:`RemoteSurface`: the same API, answered by a memory reader
process that alone opens the store (see ``_remote``).

How notes reach the model: every call returns :class:`ResultRows` whose ``notes`` say when a
result is partial, capped, degraded (LIKE) or missing a payload. The same notes collect on the
surface; after each cell the kernel calls ``ms.drain_notes()`` and prints each as a
``[note] …`` line (:func:`format_notes` renders them so).
"""

from typing import TYPE_CHECKING

from scrollctx._lazy import lazy_exports

__all__ = [
    "BM25_WEIGHTS",
    "Budgets",
    "EmbedProgress",
    "EmbedReport",
    "Encoder",
    "MemorySurface",
    "RemoteSurface",
    "ResultRows",
    "days_between",
    "embed_pending",
    "format_notes",
    "load_encoder",
    "open_surface",
    "or_terms",
    "pending_rows",
    "store_stats",
]

if TYPE_CHECKING:
    from scrollctx.surface._dates import days_between
    from scrollctx.surface._query import or_terms
    from scrollctx.surface._remote import RemoteSurface
    from scrollctx.surface._rows import Budgets, ResultRows, format_notes
    from scrollctx.surface._search import BM25_WEIGHTS
    from scrollctx.surface._semantic_embed import (
        EmbedProgress,
        EmbedReport,
        embed_pending,
        pending_rows,
    )
    from scrollctx.surface._semantic_model import Encoder, load_encoder
    from scrollctx.surface._stats import store_stats
    from scrollctx.surface._surface import MemorySurface, open_surface
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "BM25_WEIGHTS": "scrollctx.surface._search",
            "Budgets": "scrollctx.surface._rows",
            "EmbedProgress": "scrollctx.surface._semantic_embed",
            "EmbedReport": "scrollctx.surface._semantic_embed",
            "Encoder": "scrollctx.surface._semantic_model",
            "MemorySurface": "scrollctx.surface._surface",
            "RemoteSurface": "scrollctx.surface._remote",
            "ResultRows": "scrollctx.surface._rows",
            "days_between": "scrollctx.surface._dates",
            "embed_pending": "scrollctx.surface._semantic_embed",
            "format_notes": "scrollctx.surface._rows",
            "load_encoder": "scrollctx.surface._semantic_model",
            "open_surface": "scrollctx.surface._surface",
            "or_terms": "scrollctx.surface._query",
            "pending_rows": "scrollctx.surface._semantic_embed",
            "store_stats": "scrollctx.surface._stats",
        },
    )
