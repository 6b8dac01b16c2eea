"""The fidelity table of docs/evaluation.md names tests that exist, and every row is pinned.

The table is the issue's acceptance record: each scorer and protocol step, the official
behaviour, ours, and the test that pins it. A renamed or deleted test would leave a row pinned
by nothing while the page still says it is, so every test the table names must be defined.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "evaluation.md"
# Steps whose official behaviour produces no reported number, so there is nothing to pin.
UNPINNED = {"BEAM event ordering: extra judge calls"}


def _rows() -> list[list[str]]:
    section = PAGE.read_text(encoding="utf-8").split("\n## Fidelity\n", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5 and cells[0] != "step":
            rows.append(cells)
    return rows


def _defined_tests() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.update(re.findall(r"^def (test_\w+)\(", path.read_text(encoding="utf-8"), re.M))
    return names


def test_every_row_is_pinned_by_tests_that_exist() -> None:
    rows = _rows()
    assert len(rows) >= 35, "the fidelity table was not found whole"
    defined = _defined_tests()
    for step, _official, _ours, option, pinned in rows:
        named = re.findall(r"\b(test_\w+)(?![\w.])", pinned)  # not file names
        if step in UNPINNED:
            continue
        assert named, f"row {step!r} is pinned by no test"
        missing = [name for name in named if name not in defined]
        assert not missing, f"row {step!r} names tests that do not exist: {missing}"
        if "differs" in option:
            assert ":" in option, f"row {step!r} differs without saying why"
