"""The headline protocol: one line the model ends each response with, parsed and stripped.

Format (exactly one line, the last of the response)::

    ⟦ task | verified state | next action | status ⟧

``status`` is one of :data:`STATUSES`. The agent parses the line when it appends the response
and stores :attr:`Headline.text` as the event's ``headline``, binding it to that response's
``seq``; the eviction index shows it when the span is evicted. No model call is ever made to
produce or repair a headline.

Parsing is tolerant, because models drift: the look-alike brackets ``〚 〛`` count as the
marker, so do an HTML comment around it (``<!-- ⟦ … ⟧ -->``), Markdown around it (quote, list,
bold, backticks), trailing punctuation and whitespace, special tokens after it
(``<|im_end|>``, also on lines of their own), a missing closing bracket on the last line (an
unclosed fence), a headline appended to the last line of prose (closed, with at least two
``|``), fewer than four fields (the rest are empty) or more (the extras join the state), and
an unknown status (kept verbatim). :func:`strip_headline` removes every marker line, including
a malformed trailing one, so the protocol never leaks into user-facing text;
:class:`HeadlineStripper` does the same for a stream of deltas, line by line (a headline
appended to prose is removed by :func:`strip_headline` only, once the text is complete). The
stored event content keeps the line: it is part of the model's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "HEADLINE_CLOSE",
    "HEADLINE_OPEN",
    "HEADLINE_PROMPT",
    "STATUSES",
    "Headline",
    "HeadlineStripper",
    "parse_headline",
    "strip_headline",
]

HEADLINE_OPEN = "⟦"
HEADLINE_CLOSE = "⟧"
STATUSES = ("in_progress", "blocked", "done", "failed")
_MAX_FIELD_CHARS = 200

HEADLINE_PROMPT = """\
End every response with one headline line, exactly in this form and as the very last line:
⟦ task | verified state | next action | status ⟧
- task: what you are working on, in a few words.
- verified state: the single most important fact you have established (values, names, seq \
numbers), or "nothing verified yet".
- next action: what you will do next, or "none".
- status: one of in_progress, blocked, done, failed.
Use the brackets ⟦ ⟧, separate the four fields with |, keep it under 30 words, and never put ⟧ \
or | inside a field. Headlines are your landmarks: when old turns leave your context, their \
headlines stay in the eviction index with the seq span that recovers them.
Example: ⟦ find Caroline's adoption date | seq 812 says the agency approved her in June 2023 | \
check seq 900-950 for the final date | in_progress ⟧"""
"""Prompt text that teaches the protocol; the agent puts it in its system prompt."""

_OPENERS = "⟦〚"
_CLOSERS = "⟧〛"
# Around the marker a model may put Markdown (quote, list, bold, code), an HTML comment,
# trailing punctuation, or a provider's special tokens such as <|im_end|>.
_TOKEN = r"<\|[^|>\n]*\|>"
_PREFIX = r"(?:\s|<!--|[>*_`~\-])*"
_SUFFIX = r"(?:\s|-->|[*_`~.,;]|" + _TOKEN + r")*"
_MARKER = r"[" + _OPENERS + r"](?P<body>[^" + _CLOSERS + r"\n]*)(?P<close>[" + _CLOSERS + r"])?"
_LINE = re.compile(r"^" + _PREFIX + _MARKER + _SUFFIX + r"$")
_TRAILING = re.compile(
    r"(?P<prose>.*\S)\s+["
    + _OPENERS
    + r"](?P<body>[^"
    + _CLOSERS
    + r"\n]*\|[^"
    + _CLOSERS
    + r"\n]*\|[^"
    + _CLOSERS
    + r"\n]*)(?P<close>["
    + _CLOSERS
    + r"])"
    + _SUFFIX
    + r"$"
)
_NOISE = re.compile(r"^(?:\s|" + _TOKEN + r")*$")


@dataclass(frozen=True, slots=True)
class Headline:
    """A parsed headline. ``text`` is the canonical one-line form stored in the Event Log."""

    task: str
    state: str
    next_action: str
    status: str
    is_closed: bool = True
    """False when the closing bracket was missing (an unclosed fence on the last line)."""

    @property
    def text(self) -> str:
        """Return ``task | state | next action | status``, the form the index shows."""
        return " | ".join([self.task, self.state, self.next_action, self.status])

    @property
    def is_known_status(self) -> bool:
        """Whether ``status`` is one of :data:`STATUSES`."""
        return self.status in STATUSES


def parse_headline(text: str) -> Headline | None:
    """Return the headline of a response, or ``None`` if it has none.

    The last marker line wins. An unclosed marker is accepted only on the last non-blank line,
    so a stray ``⟦`` in prose never becomes a headline.
    """
    lines = text.splitlines()
    last = _last_nonblank(lines)
    for index in range(len(lines) - 1, -1, -1):
        match = _LINE.match(lines[index]) or (
            _TRAILING.match(lines[index]) if index == last else None
        )
        if match is None or (match.group("close") is None and index != last):
            continue
        headline = _fields(match.group("body"), is_closed=match.group("close") is not None)
        if headline is not None:
            return headline
    return None


def strip_headline(text: str) -> str:
    """Return ``text`` without its headline line(s), for display to a user."""
    lines = text.splitlines()
    last = _last_nonblank(lines)
    kept: list[str] = []
    for index, line in enumerate(lines):
        if _is_marker_line(line, is_last=index == last):
            continue
        trailing = _TRAILING.match(line) if index == last else None
        kept.append(trailing.group("prose") if trailing else line)
    return "\n".join(kept).rstrip()


def _is_marker_line(line: str, *, is_last: bool) -> bool:
    match = _LINE.match(line)
    return match is not None and (match.group("close") is not None or is_last)


def _last_nonblank(lines: list[str]) -> int:
    # A line of only special tokens (<|im_end|>) does not count: the marker before it is last.
    for index in range(len(lines) - 1, -1, -1):
        if not _NOISE.match(lines[index]):
            return index
    return -1


def _fields(body: str, *, is_closed: bool) -> Headline | None:
    parts = [" ".join(part.split())[:_MAX_FIELD_CHARS] for part in body.split("|")]
    if not any(parts):
        return None
    if len(parts) > 4:
        parts = [parts[0], " | ".join(parts[1:-2]), parts[-2], parts[-1]]
    parts += [""] * (4 - len(parts))
    status = parts[3].lower().replace(" ", "_").replace("-", "_")
    return Headline(parts[0], parts[1], parts[2], status, is_closed=is_closed)


class HeadlineStripper:
    """Strip headline lines from a stream of text deltas (for live display).

    Complete lines pass through at once unless they are marker lines; a partial line is held
    back only while it could still become one (it starts with a marker, a comment opener, or
    Markdown that may precede one: ``>``, ``-``, ``*``, ``_``, ``~``, a backtick), so such a
    line shows once it is complete. A headline appended to a line of prose is not caught here
    (only :func:`strip_headline` sees it, on the complete text). Call :meth:`finish` at the end
    of the stream for the rest.
    """

    def __init__(self) -> None:
        self._pending = ""
        self._mid_line = False

    def feed(self, delta: str) -> str:
        """Take the next delta; return the text that is safe to show now."""
        self._pending += delta
        out: list[str] = []
        while self._pending:
            newline = self._pending.find("\n")
            if self._mid_line or newline >= 0:
                if newline < 0:
                    out.append(self._pending)
                    self._pending = ""
                    break
                line, self._pending = self._pending[:newline], self._pending[newline + 1 :]
                if self._mid_line or not _is_marker_line(line, is_last=False):
                    out.append(line + "\n")
                self._mid_line = False
                continue
            if not _could_be_marker(self._pending):
                out.append(self._pending)
                self._pending = ""
                self._mid_line = True
            break
        return "".join(out)

    def finish(self) -> str:
        """Return what is left once the stream ended (nothing if it was a headline)."""
        rest, self._pending = self._pending, ""
        was_mid_line, self._mid_line = self._mid_line, False
        return rest if was_mid_line or not _is_marker_line(rest, is_last=True) else ""


def _could_be_marker(partial: str) -> bool:
    head = partial.lstrip(" \t>*_`~-")
    if not head:
        return True
    if head[0] in _OPENERS:
        return True
    return "<!--".startswith(head[:4]) or head.startswith("<!--")
