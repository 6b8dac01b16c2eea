"""Embedding throughput of ``embed_pending`` against the bare model call and the previous setup.

Run: ``.venv/bin/python benchmarks/bench_embed.py [--repeats 3] [--beam-rows 100] [--data DIR]``

Two corpora, each ingested into a fresh store: LoCoMo ``conv-26`` (419 short turns, about 25
word pieces each) and the first ``--beam-rows`` messages of BEAM 100K chat 1 (long turns,
about 600 word pieces, 2-3 windows each). Per corpus, ``--repeats`` rounds, the order of the
three rotating from round to round:

- ``embed_pending``: a fresh copy of the store embedded from scratch (read rows, tokenize,
  window, encode, write float16 BLOBs and the mark, one transaction per ``BATCH_ROWS``);
- bare model: ``Encoder.encode_windows`` on the same windows (tokenized beforehand), no store;
- previous setup: ``embed_pending`` the same way with the encoder built as before (one ONNX
  Runtime session splitting every operator over two intra-op threads, batches one after
  another) and 64 rows per committed batch as before, the baseline of the speed-up.

Prints rows/s and word pieces/s (wall clock, min/median/max), word pieces per CPU second
(every thread of this process), the ratio of medians, and the load average. Then asserts that
the float16 vectors ``embed_pending`` stored equal, bit for bit, those the previous setup
stored, on every window of both corpora (so no retrieval result can move); exits 1 if not. The
target in issue 15 is 150 rows/s at ingestion on this machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _compare import load_average, rotated

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog
from scrollctx.surface import Encoder, embed_pending, load_encoder
from scrollctx.surface._semantic_embed import BATCH_ROWS
from scrollctx.surface._semantic_model import _WEIGHTS, _packaged_file

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


def previous_encoder(encoder: Encoder) -> Encoder:
    """The encoder as built before: two intra-op threads per call, batches one at a time."""
    import numpy
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(
        str(_packaged_file(*_WEIGHTS)), options, providers=["CPUExecutionProvider"]
    )
    return Encoder(session, encoder._tokenizer, numpy, parallel=1)  # noqa: SLF001


def measure(db: Path, encoders: dict[str, Encoder], repeats: int) -> tuple[dict, bool]:  # type: ignore[type-arg]
    """Time the three runs over ``repeats`` rotating rounds; compare the stored vectors."""
    ours = encoders["embed_pending"]
    with EventLog.open(db) as log:
        texts = [str(r[0]) for r in log.execute("SELECT content FROM conversation_history")]
    windows = [w for wins in ours.windows_many(texts) for w in wins]
    stored: dict[str, list[bytes]] = {}

    def timed(work: Callable[[], object]) -> tuple[float, float]:
        started, clock = time.perf_counter(), time.process_time()
        work()
        return time.perf_counter() - started, time.process_time() - clock

    def pending(name: str) -> tuple[float, float]:
        copy = db.parent / "copy" / "history.db"
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(db, copy)
        with EventLog.open(copy) as log:
            page = BATCH_ROWS if name == "embed_pending" else 64  # 64 before
            spent = timed(lambda: embed_pending(log, encoders[name], batch_rows=page))
            rows = log.execute("SELECT vector FROM conversation_embeddings ORDER BY seq, window")
        stored[name] = [bytes(r[0]) for r in rows]
        shutil.rmtree(copy.parent)
        return spent

    runs: dict[str, Callable[[], tuple[float, float]]] = {
        "embed_pending": lambda: pending("embed_pending"),
        "previous setup": lambda: pending("previous setup"),
        "bare model": lambda: timed(lambda: ours.encode_windows(windows)),
    }
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for turn in range(repeats):
        for name in rotated(list(runs), turn):
            seconds, cpu_seconds = runs[name]()
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    found = {"rows": len(texts), "windows": len(windows), "wall": wall, "cpu": cpu,
             "pieces": sum(len(w) for w in windows)}  # fmt: skip
    return found, stored["embed_pending"] == stored["previous setup"]


def report(name: str, found: dict) -> None:  # type: ignore[type-arg]
    """Print one corpus's rows/s, word pieces/s and ratios."""
    rows, pieces = found["rows"], found["pieces"]
    print(f"{name}: {rows} rows, {found['windows']} windows, {pieces} word pieces")
    for label, values in found["wall"].items():
        rates = [rows / v for v in values]
        cpu = statistics.median(found["cpu"][label])
        print(
            f"  {label + ':':<16} rows/s min {min(rates):7.1f}  median "
            f"{statistics.median(rates):7.1f}  max {max(rates):7.1f}   word pieces/s median "
            f"{pieces / statistics.median(values):7.0f}   per CPU second {pieces / cpu:6.0f}"
        )
    medians = {label: statistics.median(v) for label, v in found["wall"].items()}
    print(
        f"  ratio previous setup / embed_pending (time, medians): "
        f"{medians['previous setup'] / medians['embed_pending']:.2f}x; "
        f"bare model / embed_pending: {medians['bare model'] / medians['embed_pending']:.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beam-rows", type=int, default=100)
    args = parser.parse_args(argv)
    encoder = load_encoder()
    encoders = {"embed_pending": encoder, "previous setup": previous_encoder(encoder)}
    print(f"start: {load_average()}", flush=True)
    identical = True
    with tempfile.TemporaryDirectory(prefix="scroll-bench-embed-") as scratch:
        for name, db in corpora(args.data, Path(scratch), args.beam_rows).items():
            found, same = measure(db, encoders, args.repeats)
            report(name, found)
            print(f"  stored float16 vectors identical to the previous setup's: {same}", flush=True)
            identical = identical and same
    print(f"end: {load_average()}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
