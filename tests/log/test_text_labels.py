"""The write-time extractive label: deterministic, informative, never empty text."""

from __future__ import annotations

from scrollctx.log import extractive_label


def test_code_only_turns_get_their_first_line() -> None:
    content = "```python\n\nrows = ms.search('adoption')\nprint(rows)\n```"
    assert extractive_label(content) == "code: rows = ms.search('adoption')"
    assert extractive_label("```\n\n```") is None


def test_prose_still_wins_over_code() -> None:
    content = "Here is the query I ran.\n```sql\nSELECT 1\n```"
    assert extractive_label(content) == "Here is the query I ran."


def test_labels_are_bounded_and_deterministic() -> None:
    long_code = "```\n" + "x = " + "1 + " * 100 + "1\n```"
    label = extractive_label(long_code, max_chars=40)
    assert label is not None and len(label) == 40 and label.endswith("…")
    assert extractive_label(long_code, max_chars=40) == label
    assert extractive_label("") is None
