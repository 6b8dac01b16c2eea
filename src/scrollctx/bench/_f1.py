"""LoCoMo's answer scoring: normalization, stemmed token F1 and the per-category rules.

Normalization follows the official scorer: lower-case, drop commas and every ASCII punctuation
character, drop the words ``a``, ``an``, ``the`` and ``and``, collapse whitespace, then stem
each token with NLTK's ``PorterStemmer()`` in its default mode, the stemmer the official
scorer uses (the ``bench`` extra installs NLTK; it is imported on first use). F1 is the
token-multiset overlap F1.

Category rules (``category`` is LoCoMo's numeric code):

- 1 (multi-hop): prediction and gold are split on commas; each gold part takes its best F1 over
  the prediction parts; the score is the mean over the gold parts;
- 2 (temporal) and 4 (single-hop): plain F1;
- 3 (open-domain): the gold answer is cut at its first ``;`` before plain F1;
- 5 (adversarial): 1.0 when the prediction contains "no information available" or
  "not mentioned" (any case), else 0.0. The official run poses these questions as a choice
  between two options, (a) and (b), and replaces a bare letter answer by that option's text
  before scoring: :func:`choose_option` does the same.

Invariants: pure functions; every score is in [0, 1]; an empty prediction scores 0 against a
non-empty gold (and two answers that normalize to nothing score 0, as in the official code).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable
from functools import cache

from scrollctx.errors import MissingDependency, UsageError

__all__ = ["ABSTAIN_PHRASES", "choose_option", "locomo_score", "normalize_answer", "token_f1"]

ABSTAIN_PHRASES: tuple[str, ...] = ("no information available", "not mentioned")
"""Phrases that make a category-5 (adversarial) prediction correct."""

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_DROPPED = re.compile(r"\b(a|an|the|and)\b")


@cache
def _stemmer() -> Callable[[str], str]:
    try:
        from nltk.stem import PorterStemmer  # type: ignore[import-untyped]
    except ImportError as exc:
        raise MissingDependency("nltk", "bench") from exc
    stem: Callable[[str], str] = PorterStemmer().stem
    return stem


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and the words a/an/the/and, collapse whitespace."""
    lowered = str(text).lower().replace(",", "").translate(_PUNCTUATION)
    return " ".join(_DROPPED.sub(" ", lowered).split())


def _stemmed_tokens(text: str) -> list[str]:
    stem = _stemmer()
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


def choose_option(prediction: str, option_a: str, option_b: str) -> str:
    """Map a category-5 letter answer to its option's text, as the official run does.

    The official rule, after stripping and lower-casing: a one-character answer is option (a)
    if it is ``a`` and option (b) otherwise; a three-character answer is option (a) if it is
    ``(a)`` and option (b) otherwise; any other answer is kept (lower-cased, which scoring
    ignores). So ``b``, ``(b)`` and ``B`` select (b), and so do ``x`` and ``yes``.
    """
    text = str(prediction).strip().lower()
    if len(text) == 1:
        return option_a if text == "a" else option_b
    if len(text) == 3:
        return option_a if text == "(a)" else option_b
    return text


def locomo_score(prediction: str, gold: object, category: int) -> float:
    """Score one LoCoMo answer with its category's rule (see the module docstring).

    ``gold`` may be a number (six LoCoMo answers are integers); it is compared as text.

    Raises:
        UsageError: ``category`` is not 1-5.
        MissingDependency: NLTK is not installed (the ``bench`` extra).
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
