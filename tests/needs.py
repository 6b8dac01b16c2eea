"""Prerequisites of a test: skipped with a reason locally, a failure in CI.

CI (``.ci/run``) sets ``SCROLL_CI=1``: there every package, service and data folder the suite
uses is installed on purpose, so a missing one is a broken CI, not a reason to skip. The
variable is read once at import, before the autouse fixture clears ``SCROLL_*`` for each test.
In CI any other skip (a bare ``pytest.skip``, a skipping fixture) fails too, through
:func:`pytest_runtest_makereport`, which ``tests/conftest.py`` registers.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Generator
from types import ModuleType
from typing import NoReturn

import pytest

IN_CI = os.environ.get("SCROLL_CI") == "1"


def missing(reason: str) -> NoReturn:
    """Skip the test (locally) or fail it (in CI) because ``reason`` is missing."""
    if IN_CI:
        pytest.fail(f"CI must provide this, but: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)  # also at a module's top (a missing package)


def import_or_missing(name: str) -> ModuleType:
    """Import ``name`` or report it :func:`missing`."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"could not import {name!r}: {exc}")


def extra_missing(extra: str, *modules: str) -> bool:
    """Whether a test folder's extra is absent: then its ``conftest.py`` collects nothing there
    (locally); in CI it stops the run, since CI installs every extra on purpose."""
    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    if absent and IN_CI:
        raise RuntimeError(f"CI must install the {extra} extra ({', '.join(absent)} missing)")
    return bool(absent)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, None]:
    """In CI, turn a skipped test into a failure that gives the skip's reason."""
    report = yield
    result: pytest.TestReport = report.get_result()  # type: ignore[attr-defined]
    if IN_CI and result.skipped and not hasattr(result, "wasxfail"):
        reason = result.longrepr[2] if isinstance(result.longrepr, tuple) else result.longrepr
        result.outcome = "failed"
        result.longrepr = f"CI must not skip {item.nodeid}: {str(reason).removeprefix('Skipped: ')}"
