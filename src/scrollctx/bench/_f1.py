"""LoCoMo's answer scoring: normalization, stemmed token F1 and the per-category rules.

Normalization follows the official scorer: lower-case, drop commas and every ASCII punctuation
character, drop the words ``a``, ``an``, ``the`` and ``and``, collapse whitespace, then
Porter-stem each token (:mod:`scrollctx.bench._stem`). F1 is the token-multiset overlap F1.

Category rules (``category`` is LoCoMo's numeric code):

- 1 (multi-hop): prediction and gold are split on commas; each gold part takes its best F1 over
  the prediction parts; the score is the mean over the gold parts;
- 2 (temporal) and 4 (single-hop): plain F1;
- 3 (open-domain): the gold answer is cut at its first ``;`` before plain F1;
- 5 (adversarial): 1.0 when the prediction contains "no information available" or
  "not mentioned" (any case), else 0.0.

Invariants: pure functions; every score is in [0, 1]; an empty prediction scores 0 against a
non-empty gold (and two answers that normalize to nothing score 0, as in the official code).
"""

from __future__ import annotations

import re
import string
from collections import Counter

from scrollctx.bench._stem import stem
from scrollctx.errors import UsageError

__all__ = ["ABSTAIN_PHRASES", "locomo_score", "normalize_answer", "token_f1"]

ABSTAIN_PHRASES: tuple[str, ...] = ("no information available", "not mentioned")
"""Phrases that make a category-5 (adversarial) prediction correct."""

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_DROPPED = re.compile(r"\b(a|an|the|and)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and the words a/an/the/and, collapse whitespace."""
    lowered = str(text).lower().replace(",", "").translate(_PUNCTUATION)
    return " ".join(_DROPPED.sub(" ", lowered).split())


def _stemmed_tokens(text: str) -> list[str]:
    return [stem(token) for token in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Stemmed token-multiset F1 between ``prediction`` and ``gold``."""
    predicted, expected = _stemmed_tokens(prediction), _stemmed_tokens(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def _multi_hop_f1(prediction: str, gold: str) -> float:
    predictions = [part.strip() for part in prediction.split(",")]
    golds = [part.strip() for part in gold.split(",")]
    best = [max(token_f1(p, g) for p in predictions) for g in golds]
    return sum(best) / len(best)


def locomo_score(prediction: str, gold: object, category: int) -> float:
    """Score one LoCoMo answer with its category's rule (see the module docstring).

    ``gold`` may be a number (six LoCoMo answers are integers); it is compared as text.

    Raises:
        UsageError: ``category`` is not 1-5.
    """
    prediction, gold_text = str(prediction), str(gold)
    if category == 5:
        lowered = prediction.lower()
        return 1.0 if any(phrase in lowered for phrase in ABSTAIN_PHRASES) else 0.0
    if category == 1:
        return _multi_hop_f1(prediction, gold_text)
    if category == 3:
        return token_f1(prediction, gold_text.split(";")[0].strip())
    if category in (2, 4):
        return token_f1(prediction, gold_text)
    raise UsageError(f"unknown LoCoMo category {category!r}; the codes are 1-5")
