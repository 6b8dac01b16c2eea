"""``scroll bench run`` and ``scroll bench report``: QA runs of Scroll and its baselines, and
the report that turns their result files into tables and plots.

Both are added to the ``bench`` group of :mod:`scrollctx.cli._bench`; the bench layer (and
matplotlib) is imported inside each command.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from scrollctx.cli._app import emit, json_option
from scrollctx.cli._data import data_root
from scrollctx.cli._judge_options import JudgeFlags, judge_options
from scrollctx.cli._models import ModelCall, model_options
from scrollctx.cli._progress import BenchView
from scrollctx.cli._view_options import ViewFlags, view_options
from scrollctx.config import Config, resolve_config
from scrollctx.errors import RunIncomplete, UsageError

__all__ = ["report", "run"]

# The names of scrollctx.bench.SYSTEMS, spelled out so that building the CLI (every `scroll`
# command) does not import the bench layer; tests/bench/test_qa_cli.py keeps the two equal.
_SYSTEM_NAMES = (
    "scroll",
    "scroll-norepl",
    "scroll-noindex",
    "lossy-summary",
    "summary",
    "summarizing",
    "retrieval",
    "codeact",
    "longcontext",
)
_LME_FILES = {
    "S": "longmemeval_s.json",
    "M": "longmemeval_m.json",
    "oracle": "longmemeval_oracle.json",
}


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@click.command()
@click.option(
    "--benchmark",
    type=click.Choice(["beam", "locomo", "longmemeval"]),
    required=True,
    help="Which benchmark's questions to answer.",
)
@click.option(
    "--size",
    metavar="SIZE",
    help="BEAM tier 100K (=128K), 500K, 1M, 10M (default 100K); LongMemEval S, M, oracle.",
)
@click.option(
    "--system",
    "systems",
    multiple=True,
    default=("scroll",),
    show_default=True,
    metavar="NAME",
    help=f"System(s) to run, repeatable or comma-separated: {', '.join(_SYSTEM_NAMES)}.",
)
@model_options
@view_options
@judge_options
@click.option("--out", "out", required=True, metavar="PATH", help="Result file (JSONL; resumed).")
@click.option("--limit", type=click.IntRange(min=1), help="At most N questions.")
@click.option("--categories", multiple=True, metavar="LIST", help="Only these categories.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Questions answered in parallel.",
)
@click.option("--data", "data_dir", metavar="DIR", help="Benchmark data (default: shared/data).")
@click.option(
    "--file",
    "data_file",
    metavar="PATH",
    help="The LongMemEval or LoCoMo JSON file (default: inside --data).",
)
@click.option("--work", "work_dir", metavar="DIR", help="Stores, traces (default: OUT.work).")
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Model calls per question before giving up.",
)
@click.option(
    "--sandbox",
    type=click.Choice(["strict", "best-effort", "off"]),
    default="strict",
    show_default=True,
    help="Kernel sandbox profile.",
)
@click.option(
    "--skip-missing",
    is_flag=True,
    help="BEAM: leave out the chats whose chat.json is not in the data (1M ships 9 of 35).",
)
@click.option("--keep-stores", is_flag=True, help="Keep each probe's store and workspace.")
@json_option
def run(
    benchmark: str,
    size: str | None,
    systems: tuple[str, ...],
    model_call: ModelCall,
    view_flags: ViewFlags,
    judge_flags: JudgeFlags,
    out: str,
    limit: int | None,
    categories: tuple[str, ...],
    workers: int,
    data_dir: str | None,
    data_file: str | None,
    work_dir: str | None,
    max_steps: int,
    sandbox: str,
    skip_missing: bool,
    keep_stores: bool,
    json_: bool,
) -> None:
    """Answer benchmark questions with Scroll or a baseline; score them; append to a result file.

    Each history is ingested session by session; each question runs in its own session and
    store copy. Rerunning the same command resumes: finished questions are skipped.

    Example: scroll bench run --benchmark beam --size 100K --system scroll --model openai:qwen3
    --judge-model openai:gpt-4.1-mini --out results/beam100k.jsonl
    """
    from scrollctx.agent import PromptSet
    from scrollctx.bench import ResultFile, RunSettings, get_system, run_questions

    names = _split(systems)
    unknown = [n for n in names if n not in _SYSTEM_NAMES]
    if unknown:
        raise UsageError(f"unknown system {unknown[0]!r}; choose from: {', '.join(_SYSTEM_NAMES)}")
    config = resolve_config(None)
    judge, prompts = judge_flags.build(config), PromptSet.load(view_flags.prompts)
    environ = model_call.environ()
    spec, base_url = _backbone(model_call, config, environ)
    out_path = Path(out)
    work = Path(work_dir) if work_dir else out_path.with_name(out_path.name + ".work")
    tier = size or ("S" if benchmark == "longmemeval" else "100K" if benchmark == "beam" else None)
    questions = _questions(
        benchmark, tier, data_dir, data_file, work, _split(categories), limit, skip_missing
    )
    agent = view_flags.agent_settings()
    settings = RunSettings(
        model=spec,
        environ=environ,
        options=model_call.backend_options(),
        config=config,
        max_steps=max_steps,
        budget_tokens=agent["budget_tokens"],
        rho=agent["rho"],
        k=agent["k"],
        tail_groups=agent["tail_groups"],
        keep_results=agent["keep_results"],
        sandbox=sandbox,
        opt_out="`scroll bench run --sandbox best-effort` (or off)",
        prompts=prompts,
        base_url=base_url,
    )
    results = ResultFile(out_path)
    summaries = []
    try:
        with BenchView() as view:
            for name in names:
                system = get_system(name, settings, work)
                finished = results.finished()
                view.start(name, len(questions), sum((name, q.qid) in finished for q in questions))
                summary = run_questions(
                    questions,
                    system,
                    results,
                    judge=judge,
                    size=tier,
                    workers=workers,
                    keep_stores=keep_stores,
                    progress=view.record if view.is_terminal else None,
                )
                summaries.append({**summary.to_dict(), "out": str(out_path)})
    finally:
        if judge is not None:
            judge.backend.close()
    emit(summaries, as_json=json_, human=_render_runs)
    _fail_on_errors(summaries)


def _fail_on_errors(summaries: list[dict[str, Any]]) -> None:
    """Exit 1 when any question of this invocation ended in error (the summary is printed)."""
    errored = [s for s in summaries if s["statuses"].get("error")]
    if not errored:
        return
    count = sum(s["statuses"]["error"] for s in errored)
    total = sum(sum(s["statuses"].values()) for s in summaries)
    raise RunIncomplete(
        f"{count} of {total} question{'s' if total > 1 else ''} ended in error; the first: "
        f"{errored[0]['first_error']}; rerun the same command to retry them (the others are "
        "kept)",
        errors=count,
        total=total,
    )


def _backbone(
    model_call: ModelCall, config: Config, environ: dict[str, str]
) -> tuple[str, str | None]:
    """The backbone's full ``backend:model`` name and base URL, checked before any question.

    Building it once up front turns a missing key, an unknown backend or a mistyped option
    into one error (exit 2) instead of one error record per question.
    """
    from scrollctx.agent import choose_model, resolve_model

    spec = choose_model(model_call.model, config=config, environ=environ)
    with resolve_model(spec, config=config, environ=environ) as backend:
        backend.options.merged(model_call.backend_options())
        return f"{backend.name}:{backend.model}", getattr(backend, "base_url", None)


def _questions(
    benchmark: str,
    tier: str | None,
    data_dir: str | None,
    data_file: str | None,
    work: Path,
    categories: list[str],
    limit: int | None,
    skip_missing: bool,
) -> list[Any]:
    from scrollctx.bench import beam_questions, locomo_questions, longmemeval_questions

    wanted = categories or None
    if benchmark == "beam":
        root = data_root(data_dir) / "beam" / "chats"
        return beam_questions(
            root, tier or "100K", categories=wanted, limit=limit, available_only=skip_missing
        )
    if benchmark == "locomo":
        path = Path(data_file) if data_file else data_root(data_dir) / "locomo" / "locomo10.json"
        return locomo_questions(path, work, categories=wanted, limit=limit)
    if tier not in _LME_FILES:
        raise UsageError(f"unknown LongMemEval size {tier!r}; choose S, M or oracle")
    if data_file:
        path = Path(data_file)
    else:
        path = data_root(data_dir) / "longmemeval" / _LME_FILES[tier]
        if not path.is_file():
            raise UsageError(
                f"{path} not found: LongMemEval is not shipped here; download "
                f"{_LME_FILES[tier]} and pass --file PATH"
            )
    return longmemeval_questions(path, work, categories=wanted, limit=limit)


def _render_runs(summaries: list[dict[str, Any]]) -> str:
    lines = []
    for s in summaries:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items())) or "nothing new"
        lines.append(
            f"{s['system']}: {s['questions']} questions ({s['skipped']} already done): "
            f"{counts} in {s['seconds']:.1f} s -> {s['out']}"
        )
    return "\n".join(lines)


@click.command()
@click.argument("results", nargs=-1, required=True, metavar="RESULTS...")
@click.option("--out", "out_dir", required=True, metavar="DIR", help="Folder for the report.")
@json_option
def report(results: tuple[str, ...], out_dir: str, json_: bool) -> None:
    """Render result files as a Markdown report with accuracy and cost tables and PNG plots.

    Example: scroll bench report results/*.jsonl --out results/report
    """
    from scrollctx.bench import write_report

    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    files = write_report([Path(r) for r in results], Path(out_dir), generated=date)
    data = {
        "markdown": str(files.markdown),
        "results_json": str(files.results_json),
        "summary_json": str(files.summary_json),
        "plots": [str(p) for p in files.plots],
        "sections": [s.title for s in files.sections],
    }
    emit(data, as_json=json_, human=lambda d: f"report: {d['markdown']} ({len(d['plots'])} plots)")
