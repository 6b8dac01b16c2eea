"""JSON for the proxy's hot path: a client's whole history in, the answers out, each request.

A client resends its whole conversation on every call (600 KB at 2,400 turns), so decoding it
is a cost of every request; orjson (the ``serve`` extra) reads it about twice as fast as the
standard library and writes many times faster. orjson is stricter than the standard library,
and what the proxy refuses is only what no upstream could take: a body orjson refuses is read
again by :mod:`json`, which takes a lone surrogate escape (``"\\ud83d"``, from a client that
cut an emoji in half) and integers past 64 bits, and refuses, as orjson does, ``NaN``,
``Infinity`` and numbers past a double's range (the upstream request could not carry them). A
value orjson cannot write (a lone surrogate, a huge integer) is written by :mod:`json` as ASCII
with escapes.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["dumps", "loads"]


def loads(data: bytes) -> Any:
    """Decode a JSON document.

    Raises:
        ValueError: not JSON (:class:`json.JSONDecodeError`, or :class:`UnicodeDecodeError`
            for bytes that are not UTF-8).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # the standard library's verdict, and its message
        return json.loads(data, parse_constant=_not_a_number, parse_float=_finite)


def dumps(value: Any) -> bytes:
    """Encode ``value`` as UTF-8 JSON."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is past the range of a JSON number a server can read")
    return value
