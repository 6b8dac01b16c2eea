"""Kendall's tau-b with ties, and BEAM's event-ordering score built on it.

``tau_b(x, y)`` compares two rankings of the same items: ``(P - Q) / sqrt((P + Q + Tx) *
(P + Q + Ty))`` where P and Q count concordant and discordant pairs, Tx the pairs tied in
``x`` only and Ty the pairs tied in ``y`` only (pairs tied in both count nowhere). It is
``None`` when undefined (fewer than two items, or every pair tied in one ranking).

BEAM reports event ordering as ``(tau + 1) / 2`` so that it lies in [0, 1] like the other
abilities. :func:`ordering_score` turns a response into a ranking: each rubric item (in its
reference order) gets the position of the first response line matched to it; items no line
matched share the rank after the last line (a tie at the end), so a response that lists only
some events in the right order still scores above 0.5 and one that lists none scores 0.
An undefined tau is scored 0.0. Invariants: pure functions; scores in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scrollctx.errors import UsageError

__all__ = ["OrderingScore", "normalized_tau", "ordering_score", "tau_b"]


def tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b between two rankings of the same items; ``None`` when undefined."""
    if len(x) != len(y):
        raise UsageError(f"tau_b needs two rankings of equal length, got {len(x)} and {len(y)}")
    concordant = discordant = tied_x = tied_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + tied_x) * (concordant + discordant + tied_y))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


def normalized_tau(tau: float | None) -> float:
    """BEAM's normalization ``(tau + 1) / 2``; an undefined tau scores 0.0."""
    return 0.0 if tau is None else (tau + 1.0) / 2.0


@dataclass(frozen=True, slots=True)
class OrderingScore:
    """The event-ordering result: the normalized score and what it was computed from."""

    score: float
    tau: float | None
    positions: tuple[int | None, ...]
    """For each rubric item, the index of the first response line matched to it."""
    precision: float
    recall: float


def ordering_score(matches: Sequence[int | None], items: int) -> OrderingScore:
    """Score a response whose line ``i`` was matched to rubric item ``matches[i]`` (or none).

    Args:
        matches: one entry per response line: the 0-based rubric item it states, or ``None``.
        items: how many rubric items (events) the reference order has.
    """
    first: dict[int, int] = {}
    for line, item in enumerate(matches):
        if item is not None:
            if not 0 <= item < items:
                raise UsageError(f"rubric item {item} out of range for {items} items")
            first.setdefault(item, line)
    positions = tuple(first.get(item) for item in range(items))
    missing_rank = len(matches)
    system = [float(missing_rank if p is None else p) for p in positions]
    tau = tau_b([float(i) for i in range(items)], system) if first else None
    matched_lines = sum(1 for item in matches if item is not None)
    precision = matched_lines / len(matches) if matches else 0.0
    recall = len(first) / items if items else 0.0
    return OrderingScore(normalized_tau(tau), tau, positions, precision, recall)
