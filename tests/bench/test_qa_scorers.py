"""Pure scorers, pinned on hand-checked cases derived from the benchmarks' official code.

Each derivation is written out in the test's docstring: the official behaviour it follows, and
the arithmetic, so the expected value is not something read off our own implementation.
"""

from __future__ import annotations

import math

import pytest

from scrollctx.bench._f1 import choose_option, locomo_score, normalize_answer, token_f1
from scrollctx.bench._kendall import beam_ordering_score, normalized_tau, ordering_score, tau_b
from scrollctx.errors import UsageError


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


def test_the_stemmer_is_nltks_default_mode() -> None:
    """LoCoMo's scorer stems with NLTK's ``PorterStemmer()``, whose default mode keeps "one"
    whole (the original algorithm and Martin Porter's extensions strip it to "on") and turns
    "try" into "tri" like "tried" (the other two modes keep "try"). So against the gold "one":
    "on" shares no stem (F1 0), and "try" matches "tried" (F1 1). A scorer in Martin's mode
    gives 1 and 0 instead."""
    assert token_f1("on", "one") == 0.0
    assert token_f1("try", "tried") == 1.0
    # "dying" -> "die" only in NLTK's mode (an irregular form it lists)
    assert token_f1("dying", "die") == 1.0


def test_locomo_category_1_averages_best_match_per_gold_part() -> None:
    # gold parts: "pottery" (best F1 1.0 against "pottery"), "camping" (best 0.0)
    assert locomo_score("pottery, painting", "pottery, camping", 1) == pytest.approx(0.5)


def test_locomo_category_3_cuts_the_gold_at_the_first_semicolon() -> None:
    assert locomo_score("likely yes", "Likely yes; because she loves it", 3) == 1.0


def test_locomo_category_5_accepts_the_abstention_phrases_only() -> None:
    assert locomo_score("This is Not Mentioned in the conversation.", "x", 5) == 1.0
    assert locomo_score("No information available", "x", 5) == 1.0
    assert locomo_score("She adopted a dog.", "x", 5) == 0.0


def test_a_category_5_letter_answer_becomes_its_options_text() -> None:
    """LoCoMo's run (``get_cat_5_answer`` in ``task_eval/gpt_utils.py``) strips and lower-cases
    the answer; one character selects (a) when it is "a", else (b); three characters select
    (a) when they are "(a)", else (b); anything else is kept. The option's text is then scored:
    with (b) = "Not mentioned in the conversation", "(b)" scores 1 and "(a)" scores 0."""
    a, b = "She adopted a dog", "Not mentioned in the conversation"
    assert choose_option("(b)", a, b) == b
    assert choose_option(" B ", a, b) == b
    assert choose_option("a", a, b) == a
    assert choose_option("(A)", a, b) == a
    assert choose_option("yes", a, b) == b  # three characters, not "(a)": option (b)
    assert choose_option("No idea", a, b) == "no idea"
    assert locomo_score(choose_option("(b)", a, b), b, 5) == 1.0
    assert locomo_score(choose_option("(a)", a, b), b, 5) == 0.0


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


EVENTS = ["Core functionality", "Transaction error handling", "Security and deployment"]


def test_beam_ranks_every_line_of_a_perfect_markdown_answer() -> None:
    """BEAM's ``event_ordering_score``: the answer is ``split("\\n")``, matched lines are
    replaced by their event, and the ranking covers the union (events first, then the distinct
    unmatched lines); each text ranks at its last position, an absent one at len(union) + 1.

    Answer (7 lines): "Here is the order:", "", E1, E2, E3, "", "Hope this helps!".
    union = [E1, E2, E3, H, "", T], tie rank 7.
    reference ranks: E1..E3 = 1, 2, 3; H, "", T = 7, 7, 7.
    answer ranks:    E1..E3 = 3, 4, 5; H = 1, "" = 6 (its last line), T = 7.
    Pairs: E-E 3 concordant; E-H 3 discordant (H first in the answer); E-"" 3 and E-T 3
    concordant; H-"", H-T, ""-T tied in the reference only (3).
    tau_b = (9 - 3) / sqrt((12 + 3) * 12) = 6 / sqrt(180) = 0.4472; score (tau + 1) / 2.
    The matched-lines ranking scores the same answer 1.0.
    """
    lines = ["Here is the order:", "", *EVENTS, "", "Hope this helps!"]
    matches = [None, None, 0, 1, 2, None, None]
    official = beam_ordering_score(EVENTS, lines, matches)
    assert official.tau == pytest.approx(6 / math.sqrt(180))
    assert official.score == pytest.approx((1 + 6 / math.sqrt(180)) / 2)  # 0.7236
    assert official.positions == (2, 3, 4)
    # tp 3; fp: H, "", "", T = 4 (repeats count); fn 0
    assert official.precision == pytest.approx(3 / 7) and official.recall == 1.0
    assert (
        ordering_score([m for line, m in zip(lines, matches, strict=True) if line], 3).score == 1.0
    )


def test_beam_a_header_line_costs_and_a_closing_line_does_not() -> None:
    """A header before n in-order events: reference ranks 1..n, H = n + 2; answer ranks
    E_i = i + 1, H = 1. The n(n-1)/2 event pairs are concordant and the n (E_i, H) pairs
    discordant: tau = (n(n-1)/2 - n) / (n(n-1)/2 + n) = (n - 3) / (n + 1). For n = 7:
    4 / 8 = 0.5, score 0.75 (the header costs 0.25). The same line after the events is ranked
    after them in both orders (n + 1 < n + 2): every pair concordant, score 1.0."""
    events = [f"event {i}" for i in range(1, 8)]
    header = beam_ordering_score(events, ["Sure:", *events], [None, *range(7)])
    assert header.tau == pytest.approx(0.5)
    assert header.score == pytest.approx(0.75)
    closing = beam_ordering_score(events, [*events, "That is all."], [*range(7), None])
    assert closing.score == 1.0


def test_beam_an_empty_or_refusing_answer_scores_above_0() -> None:
    """``"".split("\\n") == [""]``: one unmatched line. union = n events + the line, tie
    n + 2; reference ranks 1..n, n + 2; answer ranks n + 2 for every event, 1 for the line.
    Event pairs are tied in the answer only (n(n-1)/2); the n (event, line) pairs discordant.
    tau = -n / sqrt(n * (n + n(n-1)/2)) = -1 / sqrt((n + 1) / 2). n = 3: -1/sqrt(2), score
    0.1464; n = 5: -1/sqrt(3), score 0.2113; "I don't recall" is the same single line."""
    assert beam_ordering_score(EVENTS, [""], [None]).score == pytest.approx(
        (1 - 1 / math.sqrt(2)) / 2
    )
    five = [f"e{i}" for i in range(5)]
    refusal = beam_ordering_score(five, ["I don't recall."], [None])
    assert refusal.score == pytest.approx((1 - 1 / math.sqrt(3)) / 2)
    assert refusal.precision == 0.0 and refusal.recall == 0.0 and refusal.f1 == 0.0
    assert ordering_score([], 5).score == 0.0  # the matched-lines option: 0


def test_beam_identical_unmatched_lines_are_one_item() -> None:
    """Blank lines between the events are one text, ranked at its last position. Answer:
    E1, "", E2, "", E3. union = [E1, E2, E3, ""], tie 5; reference E = 1, 2, 3, "" = 5;
    answer E = 1, 3, 5, "" = 4. Pairs: E-E 3 C; (E1,"") C, (E2,"") C, (E3,"") D (5 > 4).
    tau = (5 - 1) / 6 = 2/3, score 5/6."""
    lines = [EVENTS[0], "", EVENTS[1], "", EVENTS[2]]
    result = beam_ordering_score(EVENTS, lines, [0, None, 1, None, 2])
    assert result.tau == pytest.approx(2 / 3)
    assert result.score == pytest.approx(5 / 6)


def test_beam_reversed_and_partial_answers() -> None:
    """Reversed, nothing else: tau -1, score 0. One event only (E1 then an unmatched line U):
    union [E1, E2, E3, U], tie 5; reference 1, 2, 3, 5; answer E1 = 1, E2 = E3 = 5, U = 2.
    Pairs: (E1,E2) C, (E1,E3) C, (E1,U) C, (E2,E3) tied in the answer, (E2,U) D, (E3,U) D.
    tau = (3 - 2) / sqrt(5 * 6) = 1 / sqrt(30)."""
    assert beam_ordering_score(EVENTS, EVENTS[::-1], [2, 1, 0]).score == 0.0
    partial = beam_ordering_score(EVENTS, [EVENTS[0], "Something else"], [0, None])
    assert partial.tau == pytest.approx(1 / math.sqrt(30))
    with pytest.raises(UsageError):
        beam_ordering_score(EVENTS, ["a"], [7])


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
