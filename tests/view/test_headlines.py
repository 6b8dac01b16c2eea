"""The headline protocol: tolerant parsing, stripping for display, streaming."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollctx.view import (
    HEADLINE_PROMPT,
    Headline,
    HeadlineStripper,
    parse_headline,
    strip_headline,
)

ANSWER = "The flight is AA231 on 2026-07-02."


@pytest.mark.parametrize(
    "line",
    [
        "⟦ book flight | AA231 confirmed | send receipt | done ⟧",
        "〚 book flight | AA231 confirmed | send receipt | done 〛",
        "<!-- ⟦ book flight | AA231 confirmed | send receipt | done ⟧ -->",
        "`⟦ book flight | AA231 confirmed | send receipt | done ⟧`",
        "   ⟦book flight|AA231 confirmed|send receipt|DONE⟧   \t",
        "⟦ book flight | AA231 confirmed | send receipt | done 〛",
        "**⟦ book flight | AA231 confirmed | send receipt | done ⟧**",
        "> ⟦ book flight | AA231 confirmed | send receipt | done ⟧",
        "- ⟦ book flight | AA231 confirmed | send receipt | done ⟧.",
        "⟦ book flight | AA231 confirmed | send receipt | done ⟧<|im_end|>",
    ],
)
def test_parses_the_marker_and_its_look_alikes(line: str) -> None:
    headline = parse_headline(f"{ANSWER}\n{line}\n")
    assert headline == Headline("book flight", "AA231 confirmed", "send receipt", "done")
    assert headline.text == "book flight | AA231 confirmed | send receipt | done"
    assert headline.is_known_status
    assert strip_headline(f"{ANSWER}\n{line}\n") == ANSWER


def test_unclosed_marker_on_the_last_line_is_a_headline() -> None:
    text = f"{ANSWER}\n⟦ book flight | AA231 confirmed | send receipt | in progress"
    headline = parse_headline(text)
    assert headline is not None and not headline.is_closed
    assert headline.status == "in_progress"
    assert strip_headline(text) == ANSWER


def test_an_unclosed_marker_in_the_middle_is_prose() -> None:
    text = "Use the ⟦ bracket\n⟦ not a headline\nbecause more text follows."
    assert parse_headline(text) is None
    assert strip_headline(text) == text


def test_field_count_is_tolerated() -> None:
    assert parse_headline("⟦ only a task ⟧") == Headline("only a task", "", "", "")
    six = parse_headline("⟦ t | a | b | c | next | blocked ⟧")
    assert six == Headline("t", "a | b | c", "next", "blocked")
    odd = parse_headline("⟦ t | s | n | waiting on user ⟧")
    assert odd is not None and odd.status == "waiting_on_user" and not odd.is_known_status


def test_no_headline_and_empty_markers() -> None:
    assert parse_headline(ANSWER) is None
    assert parse_headline("⟦  ⟧") is None
    assert parse_headline("⟦ | | | ⟧") is None
    assert parse_headline("") is None


def test_the_last_marker_line_wins() -> None:
    text = "⟦ old | a | b | done ⟧\nmore work\n⟦ new | c | d | in_progress ⟧"
    headline = parse_headline(text)
    assert headline is not None and headline.task == "new"
    assert strip_headline(text) == "more work"


def test_prompt_snippet_teaches_a_parseable_example() -> None:
    example = HEADLINE_PROMPT.split("Example: ", 1)[1]
    headline = parse_headline(example)
    assert headline is not None and headline.is_known_status
    assert "⟦ task | verified state | next action | status ⟧" in HEADLINE_PROMPT


def _stream(text: str, sizes: list[int]) -> str:
    stripper = HeadlineStripper()
    out: list[str] = []
    position = 0
    for size in sizes:
        out.append(stripper.feed(text[position : position + size]))
        position += size
    out.append(stripper.feed(text[position:]))
    out.append(stripper.finish())
    return "".join(out)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=7), max_size=40))
def test_streaming_strip_matches_whole_text_strip(sizes: list[int]) -> None:
    for text in (
        f"{ANSWER}\nSecond line.\n<!-- 〚 t | s | n | done 〛 -->\n",
        f"{ANSWER}\n⟦ t | s | n | in_progress",
        "A ⟦ inline ⟧ mention stays.\nEnd.",
    ):
        assert _stream(text, sizes).rstrip() == strip_headline(text)


def test_streaming_never_shows_a_headline_fragment() -> None:
    stripper = HeadlineStripper()
    shown = stripper.feed("Done.\n⟦ t | s")
    shown += stripper.feed(" | n | done ⟧")
    shown += stripper.finish()
    assert shown == "Done.\n"


def test_a_headline_appended_to_the_last_line_of_prose_is_parsed_and_stripped() -> None:
    # #6240: models drift and append the line to their last sentence.
    text = f"{ANSWER} ⟦ book flight | AA231 confirmed | send receipt | done ⟧"
    assert parse_headline(text) == Headline(
        "book flight", "AA231 confirmed", "send receipt", "done"
    )
    assert strip_headline(text) == ANSWER
    # Not without the structure (two |), not when it is not the end of the response.
    for prose in ("The set ⟦x⟧ is closed.", "Write ⟦ a | b ⟧", f"{ANSWER} ⟦ a | b | c ⟧\nMore."):
        assert parse_headline(prose) is None and strip_headline(prose) == prose


def test_special_tokens_after_the_marker_do_not_hide_it() -> None:
    text = f"{ANSWER}\n⟦ book flight | AA231 | none | in_progress\n<|im_end|>\n"
    headline = parse_headline(text)
    assert headline is not None and not headline.is_closed
    assert "⟦" not in strip_headline(text)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=7), max_size=40))
def test_streaming_strips_decorated_marker_lines(sizes: list[int]) -> None:
    for text in (
        "- first item\n- second item\n**⟦ t | s | n | done ⟧**\n",
        f"> quoted line\n{ANSWER}\n> ⟦ t | s | n | done ⟧<|im_end|>",
        "__init__ stays\n`code` stays\n-- dashes stay\n",
    ):
        assert _stream(text, sizes).rstrip() == strip_headline(text)
