"""Embedding throughput of ``embed_pending`` against the bare model call on the same windows.

Run: ``.venv/bin/python benchmarks/bench_embed.py [--repeats 3] [--beam-rows 100] [--data DIR]``

Two corpora, each ingested into a fresh store: LoCoMo ``conv-26`` (419 short turns, about 25
word pieces each) and the first ``--beam-rows`` messages of BEAM 100K chat 1 (long turns,
about 600 word pieces, 2-3 windows each). Per corpus, alternating, ``--repeats`` times:

- ``embed_pending``: a fresh copy of the store embedded from scratch (read rows, tokenize,
  window, encode, write float16 BLOBs and the mark, one transaction per 64 rows);
- bare model: ``Encoder.encode_windows`` on the same windows (tokenized beforehand), no store.

Prints rows/s of both (min/median/max) and the ratio of medians. The target in issue 15 is
150 rows/s at ingestion on this machine. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog
from scrollctx.surface import embed_pending, load_encoder

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def corpora(data: Path, folder: Path, beam_rows: int) -> dict[str, Path]:
    """Write the two source files and ingest each into a store; return the store files."""
    locomo = json.loads((data / "locomo" / "locomo10.json").read_text(encoding="utf-8"))
    sources = {"LoCoMo conv-26": folder / "locomo.json"}
    sources["LoCoMo conv-26"].write_text(json.dumps(locomo[:1]), encoding="utf-8")
    chat = json.loads((data / "beam" / "chats" / "100K" / "1" / "chat.json").read_text())
    kept, taken = [], 0
    for batch in chat:
        groups = []
        for group in batch["turns"]:
            if taken >= beam_rows:
                break
            groups.append(group[: beam_rows - taken])
            taken += len(groups[-1])
        if groups:
            kept.append({**batch, "turns": groups})
    beam_dir = folder / "100K" / "1"
    beam_dir.mkdir(parents=True)
    (beam_dir / "chat.json").write_text(json.dumps(kept), encoding="utf-8")
    sources[f"BEAM 100K/1, first {taken} messages"] = beam_dir / "chat.json"
    stores = {}
    for name, source in sources.items():
        db = folder / name.split(",")[0].replace(" ", "-").replace("/", "-") / "history.db"
        with EventLog.open(db) as log:
            ingest_path(log, source)
        stores[name] = db
    return stores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beam-rows", type=int, default=100)
    args = parser.parse_args(argv)
    encoder = load_encoder()
    with tempfile.TemporaryDirectory(prefix="scroll-bench-embed-") as scratch:
        folder = Path(scratch)
        for name, db in corpora(args.data, folder, args.beam_rows).items():
            with EventLog.open(db) as log:
                texts = [str(r[0]) for r in log.execute("SELECT content FROM conversation_history")]
            windows = [w for wins in encoder.windows_many(texts) for w in wins]
            ours, bare = [], []
            for repeat in range(args.repeats):
                copy = folder / f"copy{repeat}" / "history.db"
                copy.parent.mkdir()
                shutil.copy(db, copy)
                with EventLog.open(copy) as log:
                    started = time.perf_counter()
                    embed_pending(log, encoder)
                    ours.append(len(texts) / (time.perf_counter() - started))
                started = time.perf_counter()
                encoder.encode_windows(windows)
                bare.append(len(texts) / (time.perf_counter() - started))
                shutil.rmtree(copy.parent)
            print(f"{name}: {len(texts)} rows, {len(windows)} windows")
            for label, values in (("embed_pending", ours), ("bare model", bare)):
                print(
                    f"  {label + ':':<15} rows/s min {min(values):7.1f}  median "
                    f"{statistics.median(values):7.1f}  max {max(values):7.1f}"
                )
            ratio = statistics.median(bare) / statistics.median(ours)
            print(f"  ratio bare / embed_pending (medians): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
