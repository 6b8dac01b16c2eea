"""Token accounting for the working view: exact with a local tokenizer, else a calibrated estimate.

Two sources of counts, one interface (:class:`TokenCounter`):

- **exact**: a tokenizer that is already on this machine, passed in as an ``encode`` callable
  (for example a local llama.cpp model's ``tokenize``) or loaded from a local
  ``tokenizer.json`` with :meth:`TokenCounter.from_tokenizer_file`. Nothing is ever downloaded.
- **estimate**: a character-class aware count. Latin words cost about one token per seven
  letters (at least one), digits one per three, punctuation one per two characters, a line
  break or an indentation run one; CJK ideographs, kana and hangul one token each; other
  scripts one per two letters. Dividing characters by four instead (the classic shortcut)
  under-counts Chinese by about 4x and code by about 2x, which lets a view overflow the real
  window without ever triggering eviction.

Either way, counts are then scaled by a **calibration ratio** learned from the
``usage.prompt_tokens`` the endpoint reports for a request whose raw count we know
(:meth:`TokenCounter.observe`): an exponential moving average of reported/raw, each sample
clamped to [0.25, 4] and the ratio to [0.5, 3] (exact tokenizers: [0.8, 1.5], since only
the chat template's overhead is left to learn). Raw counts are cached by callers and scaled
on the total, so a ratio change never forces a recount.

The calibration is state worth keeping: :meth:`TokenCounter.state` and
:meth:`TokenCounter.restore` carry it across a restart (the working view stores it on the
events it writes), so the first call after a restart counts like the last one before it.

Invariants: counting is deterministic for a given ratio; ``raw("") == 0``; raw counts are
additive over concatenation up to one token per boundary; a restored ratio is clamped to this
counter's range like a learned one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from scrollctx.errors import MissingDependency, UsageError

__all__ = ["MESSAGE_OVERHEAD", "TokenCounter", "estimate_tokens"]

MESSAGE_OVERHEAD = 4
"""Raw tokens charged per chat message for its role and framing."""

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
_PIECE = re.compile(
    rf"(?P<cjk>[{_CJK}])"
    r"|(?P<latin>[A-Za-z]+)"
    r"|(?P<digits>[0-9]+)"
    rf"|(?P<word>[^\W\d_{_CJK}]+)"
    r"|(?P<space>\s+)"
    r"|(?P<punct>[^\w\s]+|_+)"
)

# The ASCII shortcut: letters in chunks of 7, digits of 3, punctuation and underscores of 2;
# and whitespace runs without a line break that are not one single space (a token each).
_ASCII_CHUNK = re.compile(r"[A-Za-z]{1,7}|[0-9]{1,3}|[^\w\s]{1,2}|_{1,2}")
_ASCII_BARE_SPACE = re.compile(r"(?<!\s)(?:[^\S\n]{2,}|[^\S\n ])(?!\s)")
# Non-ASCII characters that are punctuation to every class of _PIECE (not word, not space,
# not CJK: ⟦ ⟧ · … →): each behaves exactly like "!", so a line whose only non-ASCII
# characters are these is counted by the ASCII shortcut once they are replaced.
_PLAIN_PUNCTUATION = re.compile(rf"[^\x00-\x7f\w\s{_CJK}]")
_LINE_CACHE = 8192
_LINE_CACHE_CHARS = 4096

_EMA_ALPHA = 0.3
_SAMPLE_CLAMP = (0.25, 4.0)
_ESTIMATE_CLAMP = (0.5, 3.0)
_EXACT_CLAMP = (0.8, 1.5)


def estimate_tokens(text: str) -> int:
    """Return the uncalibrated character-class estimate of ``text``'s token count.

    Two exact shortcuts of :func:`_piece_estimate` (the definition), because a long session
    counts every tool output and every new index text: ASCII text is counted by two regex
    scans in C, and other text line by line with a cache, so an index that changed in a few
    lines is not recounted whole (a line whose only non-ASCII characters are punctuation
    such as ``⟦ ⟧ · …`` takes the ASCII scans too). Both give the same number as the
    definition.
    """
    if text.isascii():
        return _ascii_estimate(text)
    lines = text.split("\n")
    if len(lines) == 1:
        return _line_estimate(text)
    # Only a whitespace run crosses a line break, and a run holding line breaks costs one
    # token per break: count the breaks, then each line without the whitespace that joins it
    # to its neighbours (the first line keeps its leading run, the last its trailing one).
    inner = [line.strip() for line in lines[1:-1]]
    edges = [lines[0].rstrip(), *inner, lines[-1].lstrip()]
    return len(lines) - 1 + sum(map(_line_estimate, edges))


def _piece_estimate(text: str) -> int:
    """The estimate by definition: the cost of each character-class piece, summed."""
    total = 0
    for match in _PIECE.finditer(text):
        kind = match.lastgroup
        size = match.end() - match.start()
        if kind == "cjk":
            total += 1
        elif kind == "latin":
            total += 1 + (size - 1) // 7
        elif kind == "digits":
            total += math.ceil(size / 3)
        elif kind == "word":
            total += math.ceil(size / 2)
        elif kind == "space":
            total += _space_cost(match.group())
        else:
            total += math.ceil(size / 2)
    return total


def _space_cost(run: str) -> int:
    # A single space merges into the next word; a line break or an indentation run is a token.
    if run == " ":
        return 0
    return max(1, run.count("\n"))


def _ascii_estimate(text: str) -> int:
    # In ASCII the classes are disjoint runs, and a run of n costing ceil(n / w) is exactly
    # the number of chunks of at most w a greedy scan cuts it into (latin w=7: 1 + (n-1)//7).
    return len(_ASCII_CHUNK.findall(text)) + text.count("\n") + len(_ASCII_BARE_SPACE.findall(text))


@lru_cache(maxsize=_LINE_CACHE)
def _cached_line_estimate(line: str) -> int:
    return _line_cost(line)


def _line_estimate(line: str) -> int:
    if len(line) > _LINE_CACHE_CHARS:  # a huge line would pin its memory in the cache
        return _line_cost(line)
    return _cached_line_estimate(line)


def _line_cost(line: str) -> int:
    # Headlines (⟦ … ⟧) and index lines (·, …) are ASCII but for a few punctuation marks;
    # the definition's per-piece loop was the largest cost left in counting a long session.
    if line.isascii():
        return _ascii_estimate(line)
    plain = _PLAIN_PUNCTUATION.sub("!", line)
    return _ascii_estimate(plain) if plain.isascii() else _piece_estimate(line)


class TokenCounter:
    """Count tokens for one model: exact through ``encode`` if given, else estimated.

    Example::

        counter = TokenCounter()
        raw = counter.raw("def f(x):\\n    return x + 1")
        counter.observe(raw_tokens=raw, reported_tokens=14)   # from usage.prompt_tokens
        counter.scale(raw)                                     # calibrated count
    """

    def __init__(self, encode: Callable[[str], list[int]] | None = None) -> None:
        self._encode = encode
        self.ratio = 1.0
        self.samples = 0

    @classmethod
    def from_tokenizer_file(cls, path: str | Path) -> TokenCounter:
        """Build an exact counter from a local Hugging Face ``tokenizer.json`` (never downloads).

        Raises:
            MissingDependency: the ``tokenizers`` package is not installed.
            UsageError: the file does not exist.
        """
        file = Path(path)
        if not file.is_file():
            raise UsageError(f"tokenizer file {file} does not exist; pass a local tokenizer.json")
        try:
            from tokenizers import Tokenizer  # type: ignore[import-not-found]
        except ImportError as exc:
            raise MissingDependency("tokenizers", "semantic") from exc
        tokenizer = Tokenizer.from_file(str(file))

        def _encode(text: str) -> list[int]:
            return list(tokenizer.encode(text, add_special_tokens=False).ids)

        return cls(_encode)

    @property
    def is_exact(self) -> bool:
        """Whether counts come from the model's own tokenizer."""
        return self._encode is not None

    def raw(self, text: str) -> int:
        """Return the uncalibrated count of ``text`` (cache it; scale totals with :meth:`scale`)."""
        if not text:
            return 0
        if self._encode is not None:
            return len(self._encode(text))
        return estimate_tokens(text)

    def scale(self, raw_tokens: int) -> int:
        """Return the calibrated count for a raw total."""
        return math.ceil(raw_tokens * self.ratio)

    def fitting(self, tokens: int) -> int:
        """Return the largest raw total that :meth:`scale` keeps within ``tokens``.

        ``floor(tokens / ratio)`` is one off at floating-point edges (170 * 1.1 scales to 188,
        yet 187 / 1.1 floors to 170): the view would think it fits and stay a token over.
        """
        raw = max(0, math.floor(tokens / self.ratio))
        while raw > 0 and self.scale(raw) > tokens:
            raw -= 1
        while self.scale(raw + 1) <= tokens:
            raw += 1
        return raw

    def count(self, text: str) -> int:
        """Return the calibrated count of ``text``."""
        return self.scale(self.raw(text))

    def state(self) -> dict[str, float | int]:
        """The learned calibration (``{"ratio", "samples"}``), for :meth:`restore`."""
        return {"ratio": self.ratio, "samples": self.samples}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back a calibration :meth:`state` returned (ignored when it is not one)."""
        ratio, samples = state.get("ratio"), state.get("samples")
        if not isinstance(ratio, int | float) or not isinstance(samples, int) or samples < 1:
            return
        if math.isnan(ratio):
            return
        low, high = _EXACT_CLAMP if self.is_exact else _ESTIMATE_CLAMP
        self.ratio = min(max(float(ratio), low), high)
        self.samples = samples

    def observe(self, *, raw_tokens: int, reported_tokens: int) -> float:
        """Learn from an endpoint's ``usage.prompt_tokens`` for a request of ``raw_tokens``.

        Returns the new ratio. Non-positive inputs are ignored (some endpoints report 0), and
        so is a NaN one (a ratio of NaN would make every later count fail).
        """
        if not (raw_tokens > 0 and reported_tokens > 0):
            return self.ratio
        sample = min(max(reported_tokens / raw_tokens, _SAMPLE_CLAMP[0]), _SAMPLE_CLAMP[1])
        ratio = sample if self.samples == 0 else self.ratio + _EMA_ALPHA * (sample - self.ratio)
        low, high = _EXACT_CLAMP if self.is_exact else _ESTIMATE_CLAMP
        self.ratio = min(max(ratio, low), high)
        self.samples += 1
        return self.ratio
