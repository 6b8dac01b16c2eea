"""days_between, ms.help and the surface's public shape."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from scrollctx.errors import QueryError, UsageError
from scrollctx.surface import Budgets, MemorySurface, days_between
from scrollctx.surface._surface import _PUBLIC


@pytest.mark.parametrize(
    ("d1", "d2", "inclusive", "expected"),
    [
        ("2024-03-15", "2024-04-01", False, 17),
        ("2024-04-01", "2024-03-15", False, 17),
        ("2024-03-15", "2024-04-01", True, 18),
        ("2024-03-15", "2024-03-15", False, 0),
        ("2024-03-15", "2024-03-15", True, 1),
        ("2024/02/28", "2024/03/01", False, 2),  # leap year
        ("[Session 3 | 2024-04-05] user: hi", "2024-04-25T00:01:11.000000Z", False, 20),
        (dt.date(2024, 1, 1), dt.datetime(2024, 1, 31, 23, 59), False, 30),
    ],
)
def test_days_between(d1: object, d2: object, inclusive: bool, expected: int) -> None:
    assert days_between(d1, d2, inclusive) == expected
    assert MemorySurface.days_between(d1, d2, inclusive=inclusive) == expected


@pytest.mark.parametrize(
    "bad,message",
    [
        ("yesterday", "no YYYY-MM-DD or YYYY/MM/DD date found in 'yesterday'"),
        ("2024-13-01", "'2024-13-01' .* is not a real date: month must be in 1..12"),
        ("2024-02-30", "'2024-02-30' .* is not a real date: day is out of range for month"),
        (20240315, "days_between needs dates like '2024-03-15', got int 20240315"),
        (None, "days_between needs dates like '2024-03-15', got NoneType None"),
    ],
)
def test_days_between_rejects_non_dates(bad: object, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        days_between(bad, "2024-03-15")


def test_help_documents_every_public_call_with_an_example(ms: MemorySurface) -> None:
    text = ms.help()
    blocks = text.split("\n\nms.")
    assert len(blocks) == len(_PUBLIC)
    for name in _PUBLIC:
        match = re.search(rf"^ms\.{name}\((.*?)\)$(.*?)(?=^ms\.|\Z)", text, re.S | re.M)
        assert match, f"ms.{name} missing from help"
        assert "Example:" in match.group(2), f"ms.{name} has no example"
    assert "ms.search(query, k=10, *, kind=None" in text


def test_every_public_method_is_in_help(ms: MemorySurface) -> None:
    methods = {n for n in dir(ms) if not n.startswith("_") and callable(getattr(ms, n))}
    assert methods - {"close"} == set(_PUBLIC)


def test_budgets_must_be_positive() -> None:
    for bad in ({"seconds": 0}, {"rows": 0}, {"bytes": 0}, {"bytes": -1}):
        with pytest.raises(UsageError, match="budgets must be positive"):
            Budgets(**bad)  # type: ignore[arg-type]
    assert Budgets(seconds=0.001, rows=1, bytes=1).rows == 1  # the smallest valid budgets
