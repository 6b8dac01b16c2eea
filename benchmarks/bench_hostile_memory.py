"""The host's memory through the whole hostile suite: its peak against its size before the suite.

Run: ``.venv/bin/python benchmarks/bench_hostile_memory.py [extra pytest arguments]``

The suite runs in this process (``pytest.main``), so this process is the host of every kernel,
memory reader and JSON memory tool the attacks start: forged frames, query bombs,
``randomblob(400000000)``, ``ms_expand(lo=1, hi=10**30)``, 16 MiB frame floods, output bombs.
Workers and readers are other processes; their memory is theirs (and bounded by their own
limits). One test that is no attack is left out (:data:`NOT_ATTACKS`).

Printed: the host's peak resident size (``ru_maxrss``) after the suite; the same figure once the
suite is collected, i.e. pytest, scrollctx and every test module imported and no test run (the
baseline: what the host weighs before any attack); the difference; and the issue's target (the
host under 200 MB throughout). Numbers only; nothing is asserted here (the suite's own tests
assert that their attacks fail).
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = [
    "tests/kernel/test_hostile.py",
    "tests/kernel/test_store_attacks.py",
    "tests/kernel/test_frames_hostile.py",
    "tests/kernel/test_reader.py",
    "tests/kernel/test_channel.py",
    "tests/kernel/test_bounds.py",
    "tests/agent/test_json_memory_tools.py",
    "tests/agent/test_agent_store_errors.py",
]
NOT_ATTACKS = [
    # Loads the embedding model into this process for its in-process side of the comparison
    # (about 260 MiB): the test's own baseline, not something an attack made the host do.
    "tests/kernel/test_reader.py::test_every_search_mode_answers_in_a_cell_as_in_process",
]
_MIB = 1024**2
_TARGET = 200 * 1000**2


def peak() -> int:
    """This process's peak resident size so far, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Baseline:
    """A pytest plugin that records the peak once collection is done, before any test runs."""

    def __init__(self) -> None:
        self.peak = 0

    def pytest_collection_finish(self) -> None:
        self.peak = peak()


def main() -> int:
    recorder = Baseline()
    started = time.monotonic()
    deselected = [f"--deselect={test}" for test in NOT_ATTACKS]  # node ids, as pytest names them
    arguments = ["-q", "-p", "no:cacheprovider", *(str(ROOT / t) for t in SUITE), *deselected]
    arguments += sys.argv[1:]
    code = pytest.main(arguments, plugins=[recorder])
    high, baseline = peak(), recorder.peak
    print(f"hostile suite ({len(SUITE)} files, exit code {int(code)}, "
          f"{time.monotonic() - started:.0f} s): host peak {high / _MIB:.1f} MiB "
          f"({high / 1000**2:.0f} MB); before the suite {baseline / _MIB:.1f} MiB; the suite "
          f"added {(high - baseline) / _MIB:.1f} MiB; target: under {_TARGET / 1000**2:.0f} MB "
          f"({'met' if high < _TARGET else 'MISSED'})")  # fmt: skip
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
