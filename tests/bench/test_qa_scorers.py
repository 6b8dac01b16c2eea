"""Pure scorers: the Porter stemmer, LoCoMo F1 with its category rules, Kendall tau-b."""

from __future__ import annotations

import math

import pytest

from scrollctx.bench._f1 import locomo_score, normalize_answer, token_f1
from scrollctx.bench._kendall import normalized_tau, ordering_score, tau_b
from scrollctx.bench._stem import stem
from scrollctx.errors import UsageError

# The examples given step by step in Porter (1980), "An algorithm for suffix stripping".
PORTER_EXAMPLES = {
    "caresses": "caress",
    "ponies": "poni",
    "ties": "ti",
    "caress": "caress",
    "cats": "cat",
    "feed": "feed",
    "agreed": "agre",
    "plastered": "plaster",
    "bled": "bled",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "troubled": "troubl",
    "sized": "size",
    "hopping": "hop",
    "tanned": "tan",
    "falling": "fall",
    "hissing": "hiss",
    "fizzed": "fizz",
    "failing": "fail",
    "filing": "file",
    "happy": "happi",
    "sky": "sky",
    "relational": "relat",
    "conditional": "condit",
    "rational": "ration",
    "valenci": "valenc",
    "hesitanci": "hesit",
    "digitizer": "digit",
    "conformabli": "conform",
    "radicalli": "radic",
    "differentli": "differ",
    "vileli": "vile",
    "analogousli": "analog",
    "vietnamization": "vietnam",
    "predication": "predic",
    "operator": "oper",
    "feudalism": "feudal",
    "decisiveness": "decis",
    "hopefulness": "hope",
    "callousness": "callous",
    "formaliti": "formal",
    "sensitiviti": "sensit",
    "sensibiliti": "sensibl",
    "triplicate": "triplic",
    "formative": "form",
    "formalize": "formal",
    "electriciti": "electr",
    "electrical": "electr",
    "hopeful": "hope",
    "goodness": "good",
    "revival": "reviv",
    "allowance": "allow",
    "inference": "infer",
    "airliner": "airlin",
    "gyroscopic": "gyroscop",
    "adjustable": "adjust",
    "defensible": "defens",
    "irritant": "irrit",
    "replacement": "replac",
    "adjustment": "adjust",
    "dependent": "depend",
    "adoption": "adopt",
    "homologou": "homolog",
    "communism": "commun",
    "activate": "activ",
    "angulariti": "angular",
    "homologous": "homolog",
    "effective": "effect",
    "bowdlerize": "bowdler",
    "probate": "probat",
    "rate": "rate",
    "cease": "ceas",
    "controll": "control",
    "roll": "roll",
    "generalizations": "gener",
    "oscillators": "oscil",
}


@pytest.mark.parametrize(("word", "expected"), sorted(PORTER_EXAMPLES.items()))
def test_porter_stemmer_matches_the_papers_examples(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_stemmer_leaves_short_words_alone() -> None:
    assert [stem(w) for w in ("a", "is", "as")] == ["a", "is", "as"]


def test_normalization_drops_punctuation_articles_and_and() -> None:
    assert normalize_answer("The cat, AND a dog!  ran.") == "cat dog ran"


def test_token_f1_on_hand_checked_pairs() -> None:
    # tokens after stemming: {went, hike} vs {she, went, hike, yesterday}: 2 shared
    # precision 2/2, recall 2/4 -> F1 = 2 * 1 * 0.5 / 1.5 = 2/3
    assert token_f1("went hiking", "She went hiking yesterday") == pytest.approx(2 / 3)
    assert token_f1("Paris", "paris.") == 1.0
    assert token_f1("London", "Paris") == 0.0
    assert token_f1("", "Paris") == 0.0
    # stemming makes "running" and "runs" the same token: run
    assert token_f1("running", "runs") == 1.0


def test_locomo_category_1_averages_best_match_per_gold_part() -> None:
    # gold parts: "pottery" (best F1 1.0 against "pottery"), "camping" (best 0.0)
    assert locomo_score("pottery, painting", "pottery, camping", 1) == pytest.approx(0.5)


def test_locomo_category_3_cuts_the_gold_at_the_first_semicolon() -> None:
    assert locomo_score("likely yes", "Likely yes; because she loves it", 3) == 1.0


def test_locomo_category_5_accepts_the_abstention_phrases_only() -> None:
    assert locomo_score("This is Not Mentioned in the conversation.", "x", 5) == 1.0
    assert locomo_score("No information available", "x", 5) == 1.0
    assert locomo_score("She adopted a dog.", "x", 5) == 0.0


def test_locomo_integer_gold_and_bad_category() -> None:
    assert locomo_score("3", 3, 4) == 1.0
    with pytest.raises(UsageError, match="category"):
        locomo_score("x", "y", 7)


def test_tau_b_without_ties() -> None:
    assert tau_b([0, 1, 2, 3], [0, 1, 2, 3]) == 1.0
    assert tau_b([0, 1, 2, 3], [3, 2, 1, 0]) == -1.0
    # one swapped pair of six: (5 - 1) / 6
    assert tau_b([0, 1, 2, 3], [0, 2, 1, 3]) == pytest.approx(4 / 6)


def test_tau_b_with_ties_by_hand() -> None:
    # x = [1, 2, 3], y = [1, 2, 2]: pairs (0,1) C, (0,2) C, (1,2) tied in y only.
    # tau_b = (2 - 0) / sqrt((2 + 0 + 0) * (2 + 0 + 1)) = 2 / sqrt(6)
    assert tau_b([1, 2, 3], [1, 2, 2]) == pytest.approx(2 / math.sqrt(6))
    # ties in both rankings on the same pair count in neither: x=[1,1,2], y=[1,1,2] -> 1.0
    assert tau_b([1, 1, 2], [1, 1, 2]) == 1.0


def test_tau_b_undefined_cases() -> None:
    assert tau_b([1], [1]) is None
    assert tau_b([1, 2, 3], [5, 5, 5]) is None
    assert normalized_tau(None) == 0.0
    assert normalized_tau(1.0) == 1.0
    assert normalized_tau(-1.0) == 0.0
    with pytest.raises(UsageError):
        tau_b([1, 2], [1])


def test_ordering_score_from_matched_lines() -> None:
    right = ordering_score([0, 1, 2], 3)
    assert right.score == 1.0 and right.positions == (0, 1, 2)
    reversed_ = ordering_score([2, 1, 0], 3)
    assert reversed_.score == 0.0
    # only the first event found, at line 0; the others tie at the end (rank 2 = len(lines)):
    # x = [0, 1, 2], y = [0, 2, 2] -> tau_b = 2 / sqrt(2 * 3); score = (tau + 1) / 2
    partial = ordering_score([0, None], 3)
    assert partial.tau == pytest.approx(2 / math.sqrt(6))
    assert partial.score == pytest.approx((2 / math.sqrt(6) + 1) / 2)
    assert partial.precision == 0.5 and partial.recall == pytest.approx(1 / 3)
    assert ordering_score([None, None], 3).score == 0.0
    with pytest.raises(UsageError):
        ordering_score([5], 3)
