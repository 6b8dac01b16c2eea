"""The working view: token accounting, eviction (Algorithm 1), the tiered index, headlines.

Turns live in the view as provider-neutral records bound to Event Log ``seq`` numbers; the view
renders them for OpenAI or Anthropic, keeps itself under ``rho * C`` by folding tool payloads
and evicting whole exchanges into a tiered index, and can be rebuilt from the log after a
restart. Only the standard library and the log layer are used. The carried index
(:func:`write_carried_indexes`) is the eviction index of an imported conversation, one block
per session, written at ingestion and handed to every question about it.
"""

from scrollctx.view._branch import BRANCH_KEY, branch_view
from scrollctx.view._carried import (
    CARRIED_PREFIX,
    build_carried_index,
    carried_index,
    carried_session,
    carried_task_ids,
    write_carried_indexes,
)
from scrollctx.view._index import INDEX_HEADER, EvictionIndex, IndexBlock, IndexLine
from scrollctx.view._render import openai_layout
from scrollctx.view._reports import CallSnapshot, EvictionReport, RenderedView, ViewMetrics
from scrollctx.view._settings import VIEW_DEFAULTS, ViewSettings
from scrollctx.view._simulate import SimulationResult, scripted_session, simulate
from scrollctx.view._turns import VIEW_KEY, Turn, split_message
from scrollctx.view._working import (
    DIGEST_HEADER,
    INDEX_KIND,
    STATE_KIND,
    WorkingView,
    call_seqs,
    index_events,
    live_seqs,
    load_index,
)
from scrollctx.view.headlines import (
    HEADLINE_PROMPT,
    STATUSES,
    Headline,
    HeadlineStripper,
    parse_headline,
    strip_headline,
)
from scrollctx.view.tokens import TokenCounter, estimate_tokens

__all__ = [
    "BRANCH_KEY",
    "CARRIED_PREFIX",
    "CallSnapshot",
    "DIGEST_HEADER",
    "EvictionIndex",
    "EvictionReport",
    "HEADLINE_PROMPT",
    "Headline",
    "HeadlineStripper",
    "INDEX_HEADER",
    "INDEX_KIND",
    "IndexBlock",
    "IndexLine",
    "RenderedView",
    "STATE_KIND",
    "STATUSES",
    "SimulationResult",
    "TokenCounter",
    "Turn",
    "VIEW_DEFAULTS",
    "VIEW_KEY",
    "ViewMetrics",
    "ViewSettings",
    "WorkingView",
    "branch_view",
    "build_carried_index",
    "call_seqs",
    "carried_index",
    "carried_session",
    "carried_task_ids",
    "estimate_tokens",
    "index_events",
    "live_seqs",
    "load_index",
    "openai_layout",
    "parse_headline",
    "scripted_session",
    "simulate",
    "split_message",
    "strip_headline",
    "write_carried_indexes",
]
