"""Templates and the one rule for showing logged text: escaped for HTML and made visible.

Everything the log holds is untrusted (model text, cell output, imported transcripts). Every
value a template prints goes through :func:`_finalize`: HTML-escaped by Jinja's autoescape and,
on top, every character that could deceive a reader (bidi controls, zero-width characters,
terminal escapes: the set of :mod:`scrollctx.log._unsafe`, the same one the CLI escapes) shown
as a visible ``\\u202e``-style escape. A template cannot forget to apply it: it is the
environment's ``finalize``, not a filter. Only :class:`markupsafe.Markup` built here passes
through unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from scrollctx.log import escape_character, unsafe_characters

__all__ = ["highlighted", "make_environment", "visible"]

_MARKED = re.compile("«(.*?)»", re.DOTALL)


def visible(text: str) -> Markup:
    """Return ``text`` as safe HTML: escaped, each unsafe character a visible escape."""
    escaped = str(escape(text))
    return Markup(
        unsafe_characters().sub(
            lambda m: (
                f'<span class="esc" title="hidden character">{escape_character(m.group())}</span>'
            ),
            escaped,
        )
    )


def highlighted(snippet: str) -> Markup:
    """Return a search snippet as safe HTML with its «matches» as ``<mark>``."""
    return Markup(_MARKED.sub(lambda m: f"<mark>{m.group(1)}</mark>", str(visible(snippet))))


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup) or not isinstance(value, str):
        return "" if value is None else value
    return visible(value)


def _number(value: Any) -> str:
    """``12,345``; a dash for a number the log does not hold (missing, None, not a number)."""
    return f"{value:,}" if isinstance(value, int | float) and not isinstance(value, bool) else "–"


def make_environment() -> Environment:
    """The Jinja environment of the inspector's templates (package data)."""
    env = Environment(
        loader=PackageLoader("scrollctx.serve.ui", "templates"),
        autoescape=select_autoescape(default=True),
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["highlighted"] = highlighted
    env.filters["number"] = _number
    return env
