"""Choose how the semantic channel scores a row from its windows, on the development split only.

Run: ``.venv/bin/python benchmarks/tune_pooling.py --vectors-cache FILE [--beam-sizes 100K]``

A long row has several windows (254 word pieces each). Per development question of BEAM (LoCoMo
rows have one window, so every rule ranks them alike), every window's cosine to the question is
computed with the semantic channel's model, then rows are ranked by: ``max`` (the best window),
``first`` (window 0 only, what a truncating encoder sees), ``max-d`` (the best window, later
windows first lowered by d) and ``mean`` (the mean over the row's windows). Each ranking is
scored alone (top 10) and fused with ``ms.search``'s own BM25 list by the current ``FUSION``;
the number is the mean of the four headline turn metrics. Numbers only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from scrollctx.bench import (
    HEADLINE_METRICS,
    CachedEncoder,
    beam_conversations,
    first_occurrences,
    prepare_store,
    score_ranking,
)
from scrollctx.surface import load_encoder, open_surface
from scrollctx.surface._fusion import FUSION, fuse

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PENALTIES = (0.02, 0.05, 0.1, 0.15)


def row_scores(
    rule: str, cosines: np.ndarray, owner: np.ndarray, pos: np.ndarray, rows: int
) -> np.ndarray:
    """Score each row from its windows' cosines by ``rule``."""
    scores = np.full(rows, -np.inf)
    if rule == "first":
        scores[owner[pos == 0]] = cosines[pos == 0]
    elif rule == "mean":
        total, count = np.zeros(rows), np.zeros(rows)
        np.add.at(total, owner, cosines)
        np.add.at(count, owner, 1)
        scores = np.where(count > 0, total / np.maximum(count, 1), -np.inf)
    else:
        penalty = float(rule.split("-")[1]) if "-" in rule else 0.0
        np.maximum.at(scores, owner, cosines - penalty * (pos > 0))
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--vectors-cache", type=Path, required=True)
    parser.add_argument("--beam-sizes", default="100K")
    args = parser.parse_args(argv)
    encoder = CachedEncoder(load_encoder(), args.vectors_cache)
    rules = ["max", "first", *(f"max-{p}" for p in PENALTIES), "mean"]
    results: dict[str, dict[str, list[float]]] = {r: {"alone": [], "fused": []} for r in rules}
    sizes = [s for s in args.beam_sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="scroll-pooling-") as scratch:
        for conversation in beam_conversations(args.data / "beam" / "chats", sizes):
            if conversation.split != "dev":
                continue
            store = prepare_store(conversation, Path(scratch), encoder)
            seqs = np.array([t.seq for t in store.turns])
            windows = encoder.windows_many([t.text for t in store.turns])
            owner = np.array([i for i, ws in enumerate(windows) for _ in ws])
            pos = np.array([j for ws in windows for j in range(len(ws))])
            matrix = encoder.encode_windows([w for ws in windows for w in ws])
            turn_of = {t.seq: t.turn_id for t in store.turns}
            with open_surface(store.db_path, task_id=store.task_id) as ms:
                for probe in conversation.probes:
                    cosines = matrix @ encoder.encode_query(probe.question)
                    hits = ms.search(probe.question, k=FUSION.depth, scope="task", mode="bm25")
                    lexical = [int(h["seq"]) for h in hits]
                    for rule in rules:
                        scores = row_scores(rule, cosines, owner, pos, len(seqs))
                        order = [int(seqs[i]) for i in np.lexsort((seqs, -scores))[: FUSION.depth]]
                        fused = [f.seq for f in fuse(lexical, order, 10)]
                        for kind, ranked in (("alone", order[:10]), ("fused", fused)):
                            scored = score_ranking(
                                first_occurrences(turn_of[s] for s in ranked), probe.gold
                            )
                            results[rule][kind].append(
                                statistics.fmean(scored[m] for m in HEADLINE_METRICS)
                            )
    print(f"development questions: {len(results['max']['alone'])} (BEAM {', '.join(sizes)})")
    for rule in rules:
        alone, fused = (statistics.fmean(results[rule][k]) for k in ("alone", "fused"))
        print(f"  {rule:<9} semantic alone {alone:.4f}   fused with BM25 {fused:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
