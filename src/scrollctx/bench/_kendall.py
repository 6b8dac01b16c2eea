"""Kendall's tau-b with ties, and BEAM's event-ordering score built on it.

``tau_b(x, y)`` compares two rankings of the same items: ``(P - Q) / sqrt((P + Q + Tx) *
(P + Q + Ty))`` where P and Q count concordant and discordant pairs, Tx the pairs tied in
``x`` only and Ty the pairs tied in ``y`` only (pairs tied in both count nowhere). It is
``None`` when undefined (fewer than two items, or every pair tied in one ranking).

BEAM reports event ordering as ``(tau + 1) / 2`` so that it lies in [0, 1] like the other
abilities. Two ways to turn a response into rankings:

- :func:`beam_ordering_score`, BEAM's own (the default of the judge): every line of the
  response is an item, a line matched to a reference event stands for that event, and the
  ranking covers the reference events *and* every unmatched line (an intro, a header, a blank,
  a closing remark). Items are distinct texts (identical unmatched lines are one item, ranked
  at their last position); an item absent from one of the two orders takes the rank after all
  items there. So an unmatched line before the events costs (it is ranked before events the
  reference ranks first), one after them does not, and an empty answer scores about 0.2, not 0.
- :func:`ordering_score`, matched lines only (``--beam-ordering-rank matched-lines``): each
  rubric item gets the position of the first response line matched to it; items no line
  matched share the rank after the last line; unmatched lines are ignored, so a response that
  lists only some events in the right order still scores above 0.5 and one that lists none
  scores 0.

An undefined tau is scored 0.0 (BEAM's code yields NaN there: a one-event rubric answered by
that one event alone). Invariants: pure functions; scores in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scrollctx.errors import UsageError

__all__ = ["OrderingScore", "beam_ordering_score", "normalized_tau", "ordering_score", "tau_b"]


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
    f1: float


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


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
    return OrderingScore(
        normalized_tau(tau), tau, positions, precision, recall, _f1(precision, recall)
    )


def beam_ordering_score(
    reference: Sequence[str], lines: Sequence[str], matches: Sequence[int | None]
) -> OrderingScore:
    """Score a response the way BEAM's evaluator does (see the module docstring).

    Args:
        reference: the rubric's events, in their true order.
        lines: every line of the response (``response.split("\\n")``: blanks included).
        matches: for each line, the 0-based event it was matched to, or ``None``.
    """
    if len(lines) != len(matches):
        raise UsageError(f"{len(matches)} matches for {len(lines)} response lines")
    for item in matches:
        if item is not None and not 0 <= item < len(reference):
            raise UsageError(f"rubric item {item} out of range for {len(reference)} items")
    system = [
        line if item is None else reference[item] for line, item in zip(lines, matches, strict=True)
    ]
    union = list(dict.fromkeys([*reference, *system]))
    tie = len(union) + 1

    def ranks(order: Sequence[str]) -> list[float]:
        at = {text: position for position, text in enumerate(order, 1)}
        return [float(at.get(text, tie)) for text in union]

    tau = tau_b(ranks(reference), ranks(system))
    found = set(reference) & set(system)
    false = sum(1 for text in system if text not in reference)
    missed = sum(1 for text in reference if text not in system)
    precision = len(found) / (len(found) + false) if found or false else 0.0
    recall = len(found) / (len(found) + missed) if found or missed else 0.0
    first: dict[int, int] = {}
    for line, item in enumerate(matches):
        if item is not None:
            first.setdefault(item, line)
    positions = tuple(first.get(item) for item in range(len(reference)))
    return OrderingScore(
        normalized_tau(tau), tau, positions, precision, recall, _f1(precision, recall)
    )
