"""Benchmarks: retrieval metrics, gold labels, the BM25 baseline and the side-by-side evaluation.

``evaluate_retrieval`` ingests each benchmark conversation into its own store and ranks the same
turns with ``ms.search`` and with BM25, scoring both against the gold evidence ids.
"""

from scrollctx.bench._bm25 import TOKENIZERS, BM25Baseline, tokenize, word_tokens
from scrollctx.bench._labels import (
    BEAM_SIZES,
    BeamChat,
    LabelCounts,
    LocomoConversation,
    Probe,
    beam_chats,
    flatten_source_ids,
    load_locomo,
    normalize_dia_id,
    resolve_evidence,
)
from scrollctx.bench._metrics import (
    DEFAULT_KS,
    first_occurrences,
    mean_scores,
    metric_names,
    ndcg,
    recall_all,
    recall_any,
    reciprocal_rank,
    score_ranking,
    session_ranking,
)
from scrollctx.bench._report import comparison_rows, render_markdown, render_text
from scrollctx.bench._retrieval import (
    LEVELS,
    PAIRED_METRICS,
    SYSTEMS,
    Conversation,
    RetrievalReport,
    SectionResult,
    Turn,
    beam_conversations,
    evaluate_retrieval,
    locomo_conversations,
    read_turns,
)

__all__ = [
    "BEAM_SIZES",
    "BM25Baseline",
    "BeamChat",
    "Conversation",
    "DEFAULT_KS",
    "LEVELS",
    "LabelCounts",
    "LocomoConversation",
    "PAIRED_METRICS",
    "Probe",
    "RetrievalReport",
    "SYSTEMS",
    "SectionResult",
    "TOKENIZERS",
    "Turn",
    "beam_chats",
    "beam_conversations",
    "comparison_rows",
    "evaluate_retrieval",
    "first_occurrences",
    "flatten_source_ids",
    "load_locomo",
    "locomo_conversations",
    "mean_scores",
    "metric_names",
    "ndcg",
    "normalize_dia_id",
    "read_turns",
    "recall_all",
    "recall_any",
    "reciprocal_rank",
    "render_markdown",
    "render_text",
    "resolve_evidence",
    "score_ranking",
    "session_ranking",
    "tokenize",
    "word_tokens",
]
