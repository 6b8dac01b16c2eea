"""Take Python code out of a plain-text answer, for models that emit no tool calls.

Invariants:

- A block opens with a line of three or more backticks (up to three spaces of indent) whose info
  string is empty or names Python (``python``, ``py``, ``python3``, ``py3``, any case); blocks in
  other languages are skipped whole, so their closing fence never starts a new block.
- A block closes on a line of at least as many backticks as opened it and nothing else, so a
  four-backtick fence may contain three-backtick lines.
- An unclosed final fence (a reply cut off by ``max_tokens`` or a stop sequence) still yields
  its code. Blocks that hold only whitespace are dropped. Order is kept.
"""

from __future__ import annotations

import re

__all__ = ["extract_code_blocks"]

_OPEN = re.compile(r"^ {0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")
_PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})


def extract_code_blocks(text: str) -> list[str]:
    """Return the Python code of every fenced block in ``text``, in order.

    Example::

        extract_code_blocks("Let me look.\\n```python\\nprint(ms.search('jira'))\\n```")
        # ['print(ms.search(\\'jira\\'))']
    """
    blocks: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opened = _OPEN.match(lines[index])
        if opened is None:
            index += 1
            continue
        fence, tag = opened.group(1), opened.group(2).lower()
        body, index = _read_block(lines, index + 1, len(fence))
        if tag in _PYTHON_TAGS and "\n".join(body).strip():
            blocks.append(_strip_blank_edges(body))
    return blocks


def _read_block(lines: list[str], start: int, fence_length: int) -> tuple[list[str], int]:
    """Collect lines up to the closing fence; return them and the index after the fence."""
    closing = re.compile(rf"^ {{0,3}}`{{{fence_length},}}[ \t]*$")
    for index in range(start, len(lines)):
        if closing.match(lines[index]):
            return lines[start:index], index + 1
    return lines[start:], len(lines)


def _strip_blank_edges(body: list[str]) -> str:
    start, end = 0, len(body)
    while start < end and not body[start].strip():
        start += 1
    while end > start and not body[end - 1].strip():
        end -= 1
    return "\n".join(body[start:end])
