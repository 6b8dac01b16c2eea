"""``scroll bench``: benchmark commands (``retrieval`` here; ``run``, ``report`` in _bench_qa).

The bench layer (and with it ``rank_bm25``) is imported inside each command, so ``scroll``
starts without the ``bench`` extra installed.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from scrollctx.cli._app import LazyGroup, emit, json_option, warn
from scrollctx.cli._data import data_root

__all__ = ["bench"]

_BENCHMARKS = ("locomo", "beam", "all")
_DEFAULT_SIZES = "100K,500K"


@click.group(
    cls=LazyGroup,
    lazy={"run": "scrollctx.cli._bench_qa:run", "report": "scrollctx.cli._bench_qa:report"},
)
def bench() -> None:
    """Measure retrieval quality and agent runs on public benchmarks.

    Example: scroll bench retrieval --benchmark locomo --limit 2
    """


@bench.command()
@click.option(
    "--benchmark",
    type=click.Choice(_BENCHMARKS),
    default="all",
    show_default=True,
    help="Which benchmark to evaluate.",
)
@click.option(
    "--beam-sizes",
    default=_DEFAULT_SIZES,
    show_default=True,
    metavar="LIST",
    help="Comma-separated BEAM tiers (100K, 500K, 1M where chats exist).",
)
@click.option("--limit", type=click.IntRange(min=1), help="At most N conversations per section.")
@click.option(
    "--depth",
    type=click.IntRange(min=10),
    default=10,
    show_default=True,
    help="Rows each system returns per question.",
)
@click.option(
    "--split",
    type=click.Choice(["dev", "test", "all"]),
    default="test",
    show_default=True,
    help="Conversations to evaluate: development (tuning), held-out test, or both.",
)
@click.option(
    "--lexical-only",
    is_flag=True,
    help="Skip the semantic systems (no embedding; no semantic extra needed).",
)
@click.option(
    "--vectors-cache",
    "vectors_cache",
    metavar="FILE",
    help="Reuse vectors of windows embedded by earlier runs (a SQLite file; created if absent).",
)
@click.option("--data", "data_dir", metavar="DIR", help="Benchmark data (default: shared/data).")
@click.option("--work", "work_dir", metavar="DIR", help="Keep the built stores here.")
@click.option("--write", "write_path", metavar="PATH", help="Also write the Markdown tables.")
@json_option
def retrieval(
    benchmark: str,
    beam_sizes: str,
    limit: int | None,
    depth: int,
    split: str,
    lexical_only: bool,
    vectors_cache: str | None,
    data_dir: str | None,
    work_dir: str | None,
    write_path: str | None,
    json_: bool,
) -> None:
    """Compare ms.search with rank_bm25, bm25s, dense and fused baselines on held-out labels.

    Each conversation is ingested (and embedded) into its own store; every system ranks the same
    turns for the raw question; recall_any/recall_all@1,5,10, MRR and NDCG@10 at turn and
    session level, with paired bootstrap intervals clustered by conversation.

    Example: scroll bench retrieval --benchmark all --split test --write docs/retrieval.md
    """
    from scrollctx.bench import CachedEncoder, evaluate_retrieval, render_markdown, render_text
    from scrollctx.surface import Encoder, load_encoder

    data = data_root(data_dir)
    sizes = [s.strip() for s in beam_sizes.split(",") if s.strip()]
    progress = _progress if sys.stderr.isatty() else None
    encoder: Encoder | None = None if lexical_only else load_encoder()
    if encoder is not None and vectors_cache:
        encoder = CachedEncoder(encoder, Path(vectors_cache))
    with tempfile.TemporaryDirectory(prefix="scroll-bench-split-") as scratch:
        conversations = _conversations(benchmark, data, sizes, Path(scratch))
        report = evaluate_retrieval(
            conversations,
            split=split,
            encoder=encoder,
            work_dir=Path(work_dir) if work_dir else None,
            limit=limit,
            depth=depth,
            progress=progress,
        )
    if write_path:
        options: dict[str, object] = {
            "--split": split,
            "--limit": limit,
            "--depth": depth if depth != 10 else None,
            "--lexical-only": "" if lexical_only else None,
        }
        command = _command_line(benchmark, beam_sizes, options, write_path)
        date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        target = Path(write_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        generated = render_markdown(report, command=command, date=date)
        target.write_text(_kept_preamble(target) + generated, encoding="utf-8")
    emit(report.to_dict(), as_json=json_, human=lambda _: render_text(report))


GENERATED = "<!-- generated below by scroll bench retrieval; edits there are overwritten -->"


def _kept_preamble(target: Path) -> str:
    """Return the hand-written part of an existing document (everything above the marker)."""
    if not target.is_file():
        return ""
    text = target.read_text(encoding="utf-8")
    head, found, _ = text.partition(GENERATED)
    return head + GENERATED + "\n\n" if found else ""


def _conversations(benchmark: str, data: Path, sizes: list[str], scratch: Path) -> list[Any]:
    from scrollctx.bench import beam_conversations, locomo_conversations

    found: list[Any] = []
    if benchmark in ("locomo", "all"):
        found += locomo_conversations(data / "locomo" / "locomo10.json", scratch)
    if benchmark in ("beam", "all"):
        found += beam_conversations(data / "beam" / "chats", sizes)
    return found


def _command_line(
    benchmark: str, beam_sizes: str, options: dict[str, object], write_path: str
) -> str:
    parts = ["scroll bench retrieval", f"--benchmark {benchmark}"]
    if benchmark != "locomo":
        parts.append(f"--beam-sizes {beam_sizes}")
    parts += [f"{flag} {value}".strip() for flag, value in options.items() if value is not None]
    parts.append(f"--write {write_path}")
    return " ".join(parts)


def _progress(message: str) -> None:
    warn(message)
