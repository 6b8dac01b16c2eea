"""Working-view size, build time and input tokens of a long session, against full-history replay.

Run: ``.venv/bin/python benchmarks/bench_view.py [--steps 2000] [--output-kb 8] [--budget 32000]
[--k 4] [--rho 0.8] [--store DIR] [--json FILE]``

It runs exactly what ``scroll simulate`` runs (a scripted session through a real Event Log,
the working view and Algorithm 1; no model), then, in the same process and against the same
log, measures the two baselines:

- **tokens**: full-history replay, i.e. every call sending the system prompt, the digest and
  every turn so far, counted with the same counter (``full_replay_input_tokens``);
- **index storage**: the index events as stored (each block once, then referenced) against
  the same events with every block written inline (what each event describes);
- **build time**: rebuilding the full-history request at the end of the session from the log
  (read every turn of the session, index events left out, and render it), timed like the
  view build. A replaying agent that kept its messages in memory would skip the read, so the
  build-time ratio is an upper bound; the token ratio is the number that matters.

Prints per-decile view sizes (flatness), the index, the build times and the ratios. Numbers
only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from scrollctx.log import Event, EventLog
from scrollctx.view import INDEX_KIND, VIEW_KEY, WorkingView, simulate
from scrollctx.view._render import to_openai
from scrollctx.view._stored import unpack
from scrollctx.view._turns import turn_from_event


def replay_build_ms(log: EventLog, session_id: str, repeats: int = 3) -> float:
    """Median time to rebuild the full-history request from the log (the replay baseline)."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        rows = log.execute(
            "SELECT * FROM conversation_history WHERE session_id = ? AND kind != ? ORDER BY seq",
            (session_id, INDEX_KIND),
        )
        events = [e for e in map(Event.from_row, rows) if VIEW_KEY in e.metadata]
        messages = [to_openai(turn_from_event(e, log.full_text(e))) for e in events]
        timings.append((time.perf_counter() - started) * 1000)
        if not messages:
            raise SystemExit(f"session {session_id} has no turns to replay")
    return statistics.median(timings)


def index_storage(log: EventLog, session_id: str) -> tuple[int, int]:
    """Bytes of index metadata as stored, and as they would be with every block inline."""
    rows = log.execute(
        "SELECT seq, metadata FROM conversation_history WHERE session_id = ? AND kind = ? "
        "ORDER BY seq",
        (session_id, INDEX_KIND),
    )
    loaded = {int(row["seq"]): json.loads(row["metadata"]) for row in rows}
    stored_bytes = inline_bytes = 0
    for seq, data in loaded.items():
        whole, _ = unpack(data, seq, loaded.get)
        stored_bytes += _size(data)
        inline_bytes += _size(whole)
    return stored_bytes, inline_bytes


def _size(data: dict[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def view_rebuild_ms(log: EventLog, session_id: str, budget: int, repeats: int = 50) -> float:
    """Median time of one view build after restoring the session from the log."""
    view = WorkingView.restore(log, session_id, budget_tokens=budget)
    timings = [view.build("openai").build_ms for _ in range(repeats)]
    return statistics.median(timings)


def deciles(values: list[int]) -> list[int]:
    """Return the max of each tenth of ``values``."""
    size = max(1, len(values) // 10)
    return [max(values[i : i + size]) for i in range(0, len(values), size)][:10]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--output-kb", type=float, default=8.0)
    parser.add_argument("--budget", type=int, default=32_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--rho", type=float, default=0.8)
    parser.add_argument("--store", type=Path, help="keep the store here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-view-") as scratch:
        folder = args.store or Path(scratch)
        with EventLog.open(folder / "history.db") as log:
            result = simulate(
                log,
                steps=args.steps,
                output_kb=args.output_kb,
                budget=args.budget,
                rho=args.rho,
                k=args.k,
            )
            replay_ms = replay_build_ms(log, result.session_id)
            restored_ms = view_rebuild_ms(log, result.session_id, args.budget)
            stored_bytes, inline_bytes = index_storage(log, result.session_id)
            db_bytes = log.path.stat().st_size
    report = result.to_dict()
    calls = report.pop("per_call_view_tokens")
    report.update(
        view_tokens_max_per_decile=deciles(calls),
        replay_build_ms=round(replay_ms, 2),
        restored_view_build_ms=round(restored_ms, 3),
        build_speedup_vs_replay=round(replay_ms / max(result.final_view_build_ms, 1e-6), 1),
        db_bytes=db_bytes,
        index_stored_bytes=stored_bytes,
        index_inline_bytes=inline_bytes,
    )
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def _print(r: dict[str, Any]) -> None:
    print(
        f"session: {r['steps']} steps, {r['calls']} model calls, "
        f"{r['history_tokens']:,} tokens of history, budget {r['budget']:,} (rho {r['rho']}, "
        f"k {r['k']}); wall {r['elapsed_s']} s"
    )
    print(
        f"view tokens per call: max {r['max_view_tokens']:,}, mean {r['mean_view_tokens']:,}; "
        f"max per decile {r['view_tokens_max_per_decile']}"
    )
    print(
        f"index: {r['index_tokens']:,} tokens, {r['index_blocks']} blocks, "
        f"{r['index_lines']} lines, {r['index_tiers']} tiers after {r['evictions']} evictions "
        f"({r['rollups']} roll-ups, {r['folds']} folds)"
    )
    print(
        f"view build at the end: {r['final_view_build_ms']} ms (median of the last 100 calls; "
        f"after restore {r['restored_view_build_ms']} ms); full-history rebuild "
        f"{r['replay_build_ms']} ms -> {r['build_speedup_vs_replay']}x"
    )
    print(
        f"index events: {r['index_stored_bytes']:,} bytes stored vs "
        f"{r['index_inline_bytes']:,} with every block inline -> "
        f"{r['index_inline_bytes'] / max(1, r['index_stored_bytes']):.1f}x smaller; "
        f"database {r['db_bytes']:,} bytes"
    )
    print(
        f"input tokens: {r['total_input_tokens']:,} vs full replay "
        f"{r['full_replay_input_tokens']:,} -> {r['input_token_saving_ratio']}x fewer"
    )


if __name__ == "__main__":
    main()
