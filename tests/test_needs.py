"""A missing prerequisite skips locally and fails in CI (``SCROLL_CI=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_MISSING = """
from needs import import_or_missing

def test_probe():
    import_or_missing("scrollctx_no_such_module")
"""

# The same at a module's top, as test modules of an optional extra do it.
_MISSING_AT_IMPORT = """
from needs import import_or_missing

import_or_missing("scrollctx_no_such_module")

def test_probe():
    pass
"""

# A skip that does not go through needs: a bare call, and one from a fixture.
_BARE_SKIPS = """
import pytest

@pytest.fixture
def absent():
    pytest.skip("no such service")

def test_bare():
    pytest.skip("not here")

def test_from_a_fixture(absent):
    pass

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    raise AssertionError
"""


def _run_probe(tmp_path: Path, source: str, ci: str) -> str:
    (tmp_path / "test_probe.py").write_text(source)
    env = {**os.environ, "SCROLL_CI": ci, "PYTHONPATH": str(Path(__file__).parent)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "needs", "-rA",
         str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    return done.stdout


@pytest.mark.parametrize("ci,outcome", [("0", "1 skipped"), ("1", "1 failed")])
def test_missing_prerequisite_skips_or_fails(tmp_path: Path, ci: str, outcome: str) -> None:
    out = _run_probe(tmp_path, _MISSING, ci)
    assert outcome in out, out
    if ci == "1":
        assert "CI must provide this" in out


@pytest.mark.parametrize("ci,outcome", [("0", "1 skipped"), ("1", "1 error")])
def test_missing_package_at_a_modules_top_skips_or_fails(
    tmp_path: Path, ci: str, outcome: str
) -> None:
    out = _run_probe(tmp_path, _MISSING_AT_IMPORT, ci)
    assert outcome in out, out
    assert ("CI must provide this" in out) == (ci == "1"), out


def test_any_other_skip_fails_in_ci_with_its_reason(tmp_path: Path) -> None:
    out = _run_probe(tmp_path, _BARE_SKIPS, "1")
    # A skip in a fixture fails the test's setup: pytest counts it as an error.
    assert "1 failed, 1 xfailed, 1 error" in out, out
    assert "CI must not skip test_probe.py::test_bare: not here" in out
    assert "CI must not skip test_probe.py::test_from_a_fixture: no such service" in out


def test_other_skips_still_skip_locally(tmp_path: Path) -> None:
    out = _run_probe(tmp_path, _BARE_SKIPS, "0")
    assert "1 xfailed, 2 skipped" in out or "2 skipped, 1 xfailed" in out, out


def test_an_absent_extra_is_skipped_locally_and_stops_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import needs

    assert needs.extra_missing("test", "pytest") is False
    monkeypatch.setattr(needs, "IN_CI", False)
    assert needs.extra_missing("test", "pytest", "scrollctx_no_such_module") is True
    monkeypatch.setattr(needs, "IN_CI", True)
    with pytest.raises(RuntimeError, match=r"CI must install the test extra \(scrollctx_no_such"):
        needs.extra_missing("test", "pytest", "scrollctx_no_such_module")
