"""Characters of logged text that could drive or deceive whoever shows it: one definition.

Cell output, imported transcripts and model text are untrusted. An escape sequence could retitle
a terminal or write its clipboard (OSC 52), a bidi control reorder what a reader sees, a
zero-width character hide text. Every character of Unicode category Cc (but newline and tab),
Cf (bidi controls and isolates, zero-width characters, the BOM, tag characters, invisible
operators), Zl, Zp or Cs is unsafe, and shown as ``\\x1b``, ``\\u202e`` or ``\\U000e0041``.
The terminal (``cli``) and the web inspector (``serve.ui``) both escape through this module.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["UNSAFE_CATEGORIES", "escape_character", "escape_unsafe", "unsafe_characters"]

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Controls, format characters, line and paragraph separators, and lone surrogates."""
_KEPT = frozenset("\n\t")
# Planes 4-13 are unassigned and planes 15-16 private use: every character of the categories
# above lies in planes 0-3 or 14.
_PLANES = (range(0x40000), range(0xE0000, 0xF0000))


@functools.cache
def unsafe_characters() -> re.Pattern[str]:
    """The character class of every unsafe character, built once from the Unicode database."""
    ranges: list[list[int]] = []
    for plane in _PLANES:
        for code in plane:
            char = chr(code)
            if char in _KEPT or unicodedata.category(char) not in UNSAFE_CATEGORIES:
                continue
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges) + "]")


def escape_character(char: str) -> str:
    """Return the visible escape of one character: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_unsafe(text: str) -> str:
    """Return ``text`` with every unsafe character replaced by its visible escape."""
    return unsafe_characters().sub(lambda m: escape_character(m.group()), text)
