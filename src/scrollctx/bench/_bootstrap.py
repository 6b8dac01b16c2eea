"""Paired bootstrap intervals on a difference of mean scores, clustered by conversation.

Questions of one conversation share a corpus, so they are not independent draws: resampling
questions one by one would make intervals too narrow. Each replicate draws whole conversations
with replacement (as many as there are) and takes the mean over their questions of the
per-question difference ``a - b`` (paired: both systems answered the same questions). The
interval is the 2.5th and 97.5th percentile of 2,000 replicates, from a fixed seed, so a
report reproduces exactly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Interval", "paired_interval"]

REPLICATES = 2000
SEED = 15


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean difference and its 95% bootstrap interval."""

    mean: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the whole interval lies on one side of zero."""
        return self.low > 0 or self.high < 0


def paired_interval(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[str], *, replicates: int = REPLICATES
) -> Interval:
    """Return the mean of ``a - b`` and its clustered 95% interval (``clusters`` per question)."""
    if not (len(a) == len(b) == len(clusters)) or not a:
        raise ValueError("paired_interval needs equally long, non-empty score lists")
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for x, y, cluster in zip(a, b, clusters, strict=True):
        sums[cluster] = sums.get(cluster, 0.0) + (x - y)
        counts[cluster] = counts.get(cluster, 0) + 1
    names = sorted(sums)
    rng = random.Random(SEED)
    means = []
    for _ in range(replicates):
        drawn = rng.choices(names, k=len(names))
        means.append(sum(sums[n] for n in drawn) / sum(counts[n] for n in drawn))
    means.sort()
    low = means[int(0.025 * (replicates - 1))]
    high = means[int(0.975 * (replicates - 1))]
    return Interval(sum(sums.values()) / len(a), low, high)
