"""Benchmarks: retrieval metrics, gold labels, the BM25 baseline and the side-by-side evaluation;
QA runs of Scroll, its ablations and baselines, with the benchmarks' own scoring and reports.

``evaluate_retrieval`` ingests (and embeds) each benchmark conversation of one split into its own
store and ranks the same turns with ``ms.search`` and with the baselines (``rank_bm25``,
``bm25s``, dense, their fusion), scoring each against the gold evidence ids.

``run_questions`` answers benchmark questions (``longmemeval_questions``, ``beam_questions``,
``locomo_questions``) with one system (``get_system``: see ``SYSTEMS``) under the paper's
protocol, scores each answer (``score_answer``: LLM judges via :class:`Judge`, LoCoMo token F1)
and appends it to a resumable :class:`ResultFile`; ``write_report`` renders result files as
Markdown tables, PNG plots and JSON.
"""

from scrollctx.bench._bm25 import TOKENIZERS, BM25Baseline, StemmedBM25, tokenize, word_tokens
from scrollctx.bench._bootstrap import Interval, paired_interval
from scrollctx.bench._f1 import choose_option, locomo_score, normalize_answer, token_f1
from scrollctx.bench._judge import ORDERING_MATCHES, ORDERING_RANKS, Judge, Verdict
from scrollctx.bench._judge_prompts import JUDGE_PROMPTS, JudgePrompts
from scrollctx.bench._kendall import (
    OrderingScore,
    beam_ordering_score,
    normalized_tau,
    ordering_score,
    tau_b,
)
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
from scrollctx.bench._qareport import ReportFiles, write_report
from scrollctx.bench._questions import (
    BEAM_ABILITIES,
    BEAM_TIERS,
    BENCHMARKS,
    History,
    Question,
    beam_questions,
    categories_of,
    locomo_options,
    locomo_questions,
    longmemeval_questions,
)
from scrollctx.bench._rankers import BASELINES, OURS, rrf
from scrollctx.bench._report import HEADLINE_METRICS, render_markdown, render_text, target_verdict
from scrollctx.bench._results import ResultFile, read_records
from scrollctx.bench._retrieval import (
    LEVELS,
    Conversation,
    RetrievalReport,
    SectionResult,
    Turn,
    beam_conversations,
    evaluate_retrieval,
    locomo_conversations,
    prepare_store,
    read_turns,
)
from scrollctx.bench._runner import RunSummary, run_questions
from scrollctx.bench._scoring import PRIMARY, Scored, score_answer, zero_scores
from scrollctx.bench._split import SPLITS, split_of
from scrollctx.bench._systems import SYSTEMS as QA_SYSTEMS
from scrollctx.bench._systems import Attempt, RunSettings, System, get_system, task_text
from scrollctx.bench._vectors import CachedEncoder

__all__ = [
    "Attempt",
    "BASELINES",
    "BEAM_ABILITIES",
    "BEAM_SIZES",
    "BEAM_TIERS",
    "BENCHMARKS",
    "BM25Baseline",
    "BeamChat",
    "CachedEncoder",
    "Conversation",
    "DEFAULT_KS",
    "HEADLINE_METRICS",
    "History",
    "Interval",
    "JUDGE_PROMPTS",
    "Judge",
    "JudgePrompts",
    "LEVELS",
    "LabelCounts",
    "LocomoConversation",
    "ORDERING_MATCHES",
    "ORDERING_RANKS",
    "OURS",
    "OrderingScore",
    "PRIMARY",
    "Probe",
    "QA_SYSTEMS",
    "Question",
    "ReportFiles",
    "ResultFile",
    "RetrievalReport",
    "RunSettings",
    "RunSummary",
    "SPLITS",
    "Scored",
    "SectionResult",
    "StemmedBM25",
    "System",
    "TOKENIZERS",
    "Turn",
    "Verdict",
    "beam_chats",
    "beam_conversations",
    "beam_ordering_score",
    "beam_questions",
    "categories_of",
    "choose_option",
    "evaluate_retrieval",
    "first_occurrences",
    "flatten_source_ids",
    "get_system",
    "load_locomo",
    "locomo_conversations",
    "locomo_options",
    "locomo_questions",
    "locomo_score",
    "longmemeval_questions",
    "mean_scores",
    "metric_names",
    "ndcg",
    "normalize_answer",
    "normalize_dia_id",
    "normalized_tau",
    "ordering_score",
    "paired_interval",
    "prepare_store",
    "read_records",
    "read_turns",
    "recall_all",
    "recall_any",
    "reciprocal_rank",
    "render_markdown",
    "render_text",
    "resolve_evidence",
    "rrf",
    "run_questions",
    "score_answer",
    "score_ranking",
    "session_ranking",
    "split_of",
    "target_verdict",
    "task_text",
    "tau_b",
    "token_f1",
    "tokenize",
    "word_tokens",
    "write_report",
    "zero_scores",
]
