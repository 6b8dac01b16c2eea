"""What every benchmark script here measures with: CPU clocks, alternating repeats, spreads.

The machine these numbers come from is shared, so the scripts measure CPU time where the claim
is about CPU (load stretches wall time much more than CPU time), run each comparison several
times in an order that alternates between repeats, and print the min / median / max of every
ratio next to the load average: one repeat on a busy moment cannot mislead.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def load_average() -> str:
    """The 1/5/15-minute load average and the core count, for the printed report."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def cpu_seconds(func: Callable[[], object]) -> float:
    """Run ``func`` and return the CPU time it took (this process, every thread)."""
    started = time.process_time()
    func()
    return time.process_time() - started


def child_cpu_seconds(command: Sequence[str], **options: Any) -> float:
    """Run ``command`` to completion and return its user + system CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, **options)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def rotated(items: Sequence[T], turn: int) -> list[T]:
    """``items`` rotated left by ``turn``: each repeat starts with a different one."""
    shift = turn % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


def p95(values: Sequence[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, int(round(0.95 * len(ordered))) - 1)]


def spread(values: Sequence[float], scale: float = 1000.0, unit: str = "ms") -> str:
    """``min / median / max`` of ``values`` times ``scale``, e.g. seconds shown in ms."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"min {low * scale:.2f} / median {mid * scale:.2f} / max {high * scale:.2f} {unit}"


def ratio_spread(ratios: Sequence[float]) -> str:
    """``min / median / max`` of ratios, e.g. ``min 1.10x / median 1.20x / max 1.31x``."""
    return (
        f"min {min(ratios):.2f}x / median {statistics.median(ratios):.2f}x / max {max(ratios):.2f}x"
    )
