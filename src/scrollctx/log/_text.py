"""Text derived from an event at write time: the prose/code split for search and the label.

Both are deterministic functions of the content, computed once when the row is appended, so
search and the eviction index never need a model call to describe a row.
"""

from __future__ import annotations

import re

__all__ = ["LABEL_MAX_CHARS", "extractive_label", "split_prose_code"]

LABEL_MAX_CHARS = 120

_FENCES = ("```", "~~~")
_SESSION_TAG = re.compile(r"^\s*\[Session [^\]]*\]\s*(\w+:\s*)?")
_FILLER = re.compile(
    r"^(certainly|sure|of course|great|absolutely|okay|ok|yes|hi|hello|hey)( there)?[!.,]+\s*",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s")


def split_prose_code(content: str) -> tuple[str, str]:
    """Split fenced code blocks out of ``content``.

    Returns ``(prose, code)``: the prose keeps a ``‹code›`` marker where each block stood, the
    code column holds the blocks' bodies joined by blank lines. Text without fences is all prose;
    an unclosed fence runs to the end of the text.
    """
    if "```" not in content and "~~~" not in content:
        return content, ""
    prose: list[str] = []
    blocks: list[str] = []
    body: list[str] = []
    fence = ""
    for line in content.split("\n"):
        marker = line.lstrip()[:3]
        if not fence:
            if marker in _FENCES:
                fence, body = marker, []
                prose.append("‹code›")
            else:
                prose.append(line)
        elif line.rstrip().startswith(fence) and not line.rstrip().strip(fence[0]):
            blocks.append("\n".join(body))
            fence = ""
        else:
            body.append(line)
    if fence:
        blocks.append("\n".join(body))
    return "\n".join(prose), "\n\n".join(blocks)


def extractive_label(content: str, max_chars: int = LABEL_MAX_CHARS) -> str | None:
    """Return a one-line label taken from the content itself: its first informative sentence.

    The ``[Session N | date] role:`` tag and conversational filler ("Certainly!") are skipped so
    the label says what the turn is about. A turn that is only a code block is labelled
    ``code: <its first line>``. Returns ``None`` for empty content.
    """
    # Only the head can hold the first sentence; bounding it keeps long turns cheap to label.
    prose, code = split_prose_code(content[: max_chars * 4])
    text = _SESSION_TAG.sub("", prose.strip())
    text = _FILLER.sub("", text).strip()
    text = " ".join(text.replace("‹code›", " ").split())
    if not text:
        return _code_label(code, max_chars)
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(first) < 24 and len(text) > len(first):
        first = text
    if len(first) <= max_chars:
        return first
    cut = first[: max_chars - 1].rsplit(" ", 1)[0] or first[: max_chars - 1]
    return cut + "…"


def _code_label(code: str, max_chars: int) -> str | None:
    first = next((line.strip() for line in code.splitlines() if line.strip()), "")
    if not first:
        return None
    label = f"code: {first}"
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"
