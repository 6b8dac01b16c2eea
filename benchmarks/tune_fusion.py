"""Choose ``ms.search``'s fusion parameters and default mode on the development split only.

Run: ``.venv/bin/python benchmarks/tune_fusion.py --vectors-cache FILE [--beam-sizes 100K,500K]``

1. The development conversations (``scrollctx.bench._split``: LoCoMo conv-26/30/41/42, BEAM
   100K chats 1-7, 500K chats 1-12) are ingested and embedded into fresh stores, exactly as
   ``scroll bench retrieval`` does (vectors come from the cache file where present).
2. Per question, ``ms.search`` runs in mode ``bm25`` and ``semantic`` at every depth of the grid;
   the two lists are fused offline with ``surface._fusion.fuse`` for every grid point
   (semantic weight x offset K x depth; the BM25 weight is 1, only the ratio matters), and the
   fused top 10 is scored like the benchmark scores it (turn level).
3. The objective is the mean, over the development sections, of the mean of the four headline
   turn metrics (recall_any@5, recall_all@5, MRR, NDCG@10): each section counts once, whatever
   its size. The best grid point is printed, then the objective of each single channel and of
   the best fusion, which decides the default mode.

Numbers only; nothing here changes the code. The chosen values go into ``surface/_fusion.py``
and ``DEFAULT_MODE`` by hand, with the output quoted in docs/retrieval.md.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from pathlib import Path

from scrollctx.bench import (
    HEADLINE_METRICS,
    CachedEncoder,
    beam_conversations,
    first_occurrences,
    locomo_conversations,
    prepare_store,
    score_ranking,
)
from scrollctx.surface import load_encoder, open_surface
from scrollctx.surface._fusion import FusionWeights, fuse

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
WEIGHTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
OFFSETS = (1, 5, 10, 20, 40, 60)
DEPTHS = (10, 20, 30, 50, 100)
K = 10

Lists = dict[str, dict[int, list[int]]]  # mode -> depth -> seqs


def collect(
    args: argparse.Namespace,
) -> dict[str, list[tuple[Lists, dict[int, str], frozenset[str]]]]:
    """Return, per dev section, each question's channel lists, seq->turn map and gold."""
    encoder = CachedEncoder(load_encoder(), args.vectors_cache)
    sections: dict[str, list[tuple[Lists, dict[int, str], frozenset[str]]]] = {}
    with tempfile.TemporaryDirectory(prefix="scroll-tune-") as scratch:
        folder = Path(scratch)
        conversations = locomo_conversations(args.data / "locomo" / "locomo10.json", folder)
        conversations += beam_conversations(args.data / "beam" / "chats", args.beam_sizes)
        for conversation in (c for c in conversations if c.split == "dev"):
            print(f"{conversation.section}: {conversation.key}", file=sys.stderr, flush=True)
            store = prepare_store(conversation, folder / "stores", encoder)
            turn_of = {t.seq: t.turn_id for t in store.turns}
            with open_surface(store.db_path, task_id=store.task_id) as ms:
                for probe in conversation.probes:
                    lists: Lists = {
                        mode: {
                            d: [
                                int(h["seq"])
                                for h in ms.search(probe.question, k=d, scope="task", mode=mode)
                            ]
                            for d in DEPTHS
                        }
                        for mode in ("bm25", "semantic")
                    }
                    sections.setdefault(conversation.section, []).append(
                        (lists, turn_of, probe.gold)
                    )
    return sections


def headline(seqs: list[int], turn_of: dict[int, str], gold: frozenset[str]) -> float:
    """Mean of the headline turn metrics of one ranked list."""
    scores = score_ranking(first_occurrences(turn_of.get(s, f"seq:{s}") for s in seqs), gold)
    return statistics.fmean(scores[m] for m in HEADLINE_METRICS)


def objective(
    sections: dict[str, list[tuple[Lists, dict[int, str], frozenset[str]]]], rank
) -> float:  # type: ignore[no-untyped-def]
    """Mean over sections of the mean headline score of ``rank(lists)``."""
    return statistics.fmean(
        statistics.fmean(headline(rank(lists), turn_of, gold) for lists, turn_of, gold in questions)
        for questions in sections.values()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--vectors-cache", type=Path, required=True)
    parser.add_argument("--beam-sizes", default="100K,500K")
    args = parser.parse_args(argv)
    args.beam_sizes = [s for s in args.beam_sizes.split(",") if s]
    sections = collect(args)
    print("dev sections:", {name: len(q) for name, q in sections.items()})
    results = []
    for weight, offset, depth in itertools.product(WEIGHTS, OFFSETS, DEPTHS):
        params = FusionWeights(1.0, weight, offset, depth)
        value = objective(
            sections,
            lambda lists, p=params: [
                f.seq for f in fuse(lists["bm25"][p.depth], lists["semantic"][p.depth], K, p)
            ],
        )
        results.append((value, weight, offset, depth))
    results.sort(reverse=True)
    print("best fusion grid points (objective, semantic weight, K, depth):")
    for value, weight, offset, depth in results[:10]:
        print(f"  {value:.4f}  w={weight:<5} K={offset:<3} depth={depth}")
    for mode in ("bm25", "semantic"):
        value = objective(sections, lambda lists, m=mode: lists[m][K])
        print(f"single channel {mode}: {value:.4f}")
    print(f"best hybrid: {results[0][0]:.4f}")
    _, weight, offset, depth = results[0]
    best = FusionWeights(1.0, weight, offset, depth)

    def hybrid(lists: Lists) -> list[int]:
        return [f.seq for f in fuse(lists["bm25"][depth], lists["semantic"][depth], K, best)]

    for name, questions in sections.items():
        one = {name: questions}
        parts = {
            "bm25": objective(one, lambda lists: lists["bm25"][K]),
            "semantic": objective(one, lambda lists: lists["semantic"][K]),
            "hybrid": objective(one, hybrid),
        }
        shown = ", ".join(f"{k} {v:.4f}" for k, v in parts.items())
        print(f"  {name} (n={len(questions)}): {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
