"""A missing prerequisite skips locally and fails in CI (``SCROLL_CI=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
from needs import import_or_missing

def test_probe():
    import_or_missing("scrollctx_no_such_module")
"""


@pytest.mark.parametrize("ci,outcome", [("0", "1 skipped"), ("1", "1 failed")])
def test_missing_prerequisite_skips_or_fails(tmp_path: Path, ci: str, outcome: str) -> None:
    (tmp_path / "test_probe.py").write_text(_PROBE)
    env = {**os.environ, "SCROLL_CI": ci, "PYTHONPATH": str(Path(__file__).parent)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert outcome in done.stdout, done.stdout
    if ci == "1":
        assert "CI must provide this" in done.stdout
