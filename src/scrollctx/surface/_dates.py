"""Calendar arithmetic the model needs for temporal questions, without trusting its own math."""

from __future__ import annotations

import re
from datetime import date, datetime

from scrollctx.errors import QueryError

__all__ = ["days_between", "parse_day"]

_DAY = re.compile(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})")


def parse_day(value: object) -> date:
    """Return the calendar day of a date, datetime, or the first YYYY-MM-DD / YYYY/MM/DD in text.

    Raises:
        QueryError: no valid date could be found.
    """
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if not isinstance(value, str):
        raise QueryError(
            f"days_between needs dates like '2024-03-15', got {type(value).__name__} {value!r}"
        )
    match = _DAY.search(value)
    if match is None:
        raise QueryError(
            f"no YYYY-MM-DD or YYYY/MM/DD date found in {value!r}; "
            "pass e.g. '2024-03-15' or a row's created_at"
        )
    try:
        return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError as exc:
        raise QueryError(f"{match.group(0)!r} in {value!r} is not a real date: {exc}") from exc


def days_between(d1: object, d2: object, inclusive: bool = False) -> int:
    """Return the number of calendar days between two dates (never negative; order-free).

    Accepts dates, datetimes, or text containing YYYY-MM-DD / YYYY/MM/DD (ISO datetimes such as
    a row's ``created_at`` work). ``inclusive=True`` counts both end days.

    Example: ``days_between("2024-03-15", "2024-04-01")`` -> 17; with ``inclusive=True`` -> 18.
    """
    days = abs((parse_day(d2) - parse_day(d1)).days)
    return days + 1 if inclusive else days
