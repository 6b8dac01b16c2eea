"""Retrieval metrics: pure functions of one ranked list and one gold set.

Definitions follow the LongMemEval retrieval evaluation (see ``research/benchmarks.md`` §1):

- ``recall_any@k`` is 1 when at least one gold id is in the top k, else 0;
- ``recall_all@k`` is 1 when every gold id is in the top k, else 0;
- ``mrr`` is the reciprocal rank of the first gold id in the whole list (0 when none is there);
- ``ndcg@k`` uses binary relevance and the older DCG form: rank 1 is undiscounted, rank i >= 2
  adds ``rel / log2(i)``; the ideal DCG is that of ``min(k, #gold)`` leading ones.

With an empty gold set ``recall_all`` is vacuously 1 while ``recall_any``, ``mrr`` and ``ndcg``
are 0 (LongMemEval issue #7); evaluations exclude such questions before scoring. Gold is a set:
a repeated gold id counts once. The ranked list is scored as given; callers remove duplicates
first (:func:`first_occurrences`), as the session-level mapping does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

__all__ = [
    "DEFAULT_KS",
    "first_occurrences",
    "mean_scores",
    "metric_names",
    "ndcg",
    "recall_all",
    "recall_any",
    "reciprocal_rank",
    "score_ranking",
    "session_ranking",
]

DEFAULT_KS: tuple[int, ...] = (1, 5, 10)
NDCG_K = 10

H = TypeVar("H", bound=Hashable)


def recall_any(ranked: Sequence[H], gold: Collection[H], k: int) -> float:
    """Return 1.0 if any gold id is among the first ``k`` ranked ids, else 0.0."""
    wanted = set(gold)
    return 1.0 if any(item in wanted for item in ranked[:k]) else 0.0


def recall_all(ranked: Sequence[H], gold: Collection[H], k: int) -> float:
    """Return 1.0 if every gold id is among the first ``k`` ranked ids (vacuously 1 for none)."""
    return 1.0 if set(gold) <= set(ranked[:k]) else 0.0


def reciprocal_rank(ranked: Sequence[H], gold: Collection[H]) -> float:
    """Return ``1 / rank`` of the first gold id in ``ranked`` (1-based), or 0.0 if absent."""
    wanted = set(gold)
    for rank, item in enumerate(ranked, start=1):
        if item in wanted:
            return 1.0 / rank
    return 0.0


def ndcg(ranked: Sequence[H], gold: Collection[H], k: int) -> float:
    """Return NDCG@k with binary relevance in the LongMemEval form (0.0 when gold is empty)."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    gains = [1.0 if item in wanted else 0.0 for item in ranked[:k]]
    ideal = [1.0] * min(k, len(wanted))
    return _dcg(gains) / _dcg(ideal)


def _dcg(gains: Sequence[float]) -> float:
    return sum(gain if rank == 1 else gain / math.log2(rank) for rank, gain in enumerate(gains, 1))


def first_occurrences(items: Iterable[H]) -> list[H]:
    """Return ``items`` without repeats, each kept at its first position."""
    seen: set[H] = set()
    kept: list[H] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            kept.append(item)
    return kept


T = TypeVar("T", bound=Hashable)


def session_ranking(ranked_turns: Sequence[H], session_of: Callable[[H], T]) -> list[T]:
    """Map a ranked list of turns to their sessions, keeping each session's first occurrence."""
    return first_occurrences(session_of(turn) for turn in ranked_turns)


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """Return the metric keys :func:`score_ranking` produces, in display order."""
    names = [f"recall_any@{k}" for k in ks] + [f"recall_all@{k}" for k in ks]
    return names + ["mrr", f"ndcg@{NDCG_K}"]


def score_ranking(
    ranked: Sequence[H], gold: Collection[H], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """Score one ranked list against one gold set on every metric of :func:`metric_names`."""
    scores = {f"recall_any@{k}": recall_any(ranked, gold, k) for k in ks}
    scores |= {f"recall_all@{k}": recall_all(ranked, gold, k) for k in ks}
    scores["mrr"] = reciprocal_rank(ranked, gold)
    scores[f"ndcg@{NDCG_K}"] = ndcg(ranked, gold, NDCG_K)
    return scores


def mean_scores(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average per-question scores key by key (an empty input gives an empty dict)."""
    if not rows:
        return {}
    return {key: sum(row[key] for row in rows) / len(rows) for key in rows[0]}
