"""Mutation testing of the modules whose guarantees matter most, each against its own tests.

Usage (from the repo root, with the project's venv and the ``mutation`` dependency group)::

    nice -n 10 .venv/bin/python scripts/mutation.py                 # every module in MODULES
    nice -n 10 .venv/bin/python scripts/mutation.py view/_index.py  # one (or a few)
    nice -n 10 .venv/bin/python scripts/mutation.py --rerun-survivors view/_index.py  # new tests
    .venv/bin/python scripts/mutation.py --report                   # the table from the last runs

Not part of CI: a module takes minutes to an hour. The tool is cosmic-ray: it writes each
mutant into the file on disk and runs a test command, so code that runs in another process
(the kernel worker ``python -I -m scrollctx.kernel._worker``, the CLI's console script) runs the
mutant too. To keep the checkout usable while it runs, each module is mutated in a private copy
of the working tree under ``.mutation/<module>/`` with its own small venv: a ``.pth`` file puts
the copy's ``src`` first and this venv's site-packages after it (plain paths, so this checkout's
editable install is not loaded), and ``bin/scroll`` runs the copy. The copy's sources are compiled
once to *checked-hash* ``.pyc`` files: an import compares the source's hash, not its mtime, so a
mutant is never served a stale ``.pyc`` of another mutant of the same size written in the same
second, while the unmutated modules load from their cache (a third of each run's start-up).

Operators: cosmic-ray's defaults replace every binary and comparison operator by every other
(hundreds of mutants per module, most of them type errors). ``KEPT_OPERATORS`` keeps the
mutations a real slip makes: each arithmetic operator to its inverse, each comparison to its
boundary twin and its negation, ``and``/``or`` swapped, ``not`` added or dropped, booleans
flipped, numbers moved by one, loops run zero times, ``break``/``continue`` swapped, exception
handlers that no longer catch, decorators removed.

Score: killed / (mutants - judged equivalent). A timeout counts as killed (cosmic-ray's rule; each
mutant gets three times the unmutated run plus 30 s). Surviving mutants judged equivalent are
listed with why in ``scripts/mutation_equivalent.toml``, matched by module, operator and the line
before and after; the others are written to ``.mutation/<module>.survivors.txt``.
"""

from __future__ import annotations

import argparse
import ast
import json
import shlex
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import time
import tomllib
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".mutation"
EQUIVALENT = Path(__file__).with_name("mutation_equivalent.toml")

# Module (under src/scrollctx) -> the narrowest tests that cover it, fastest first (-x stops at
# the first failure, so a killed mutant usually costs one short file).
MODULES: dict[str, list[str]] = {
    "bench/_metrics.py": ["tests/bench/test_metrics.py"],
    "surface/_guard.py": [
        "tests/surface/test_guard_connection.py",
        "tests/surface/test_guard_authorizer.py",
        "tests/surface/test_surface_readonly.py",
        "tests/surface/test_surface_integrity.py",
        "tests/surface/test_surface_sql.py",
    ],
    "view/_eviction.py": [
        "tests/view/test_eviction_lines.py",
        "tests/view/test_eviction_boundaries.py",
        "tests/view/test_eviction.py",
    ],
    "view/_index.py": [
        "tests/view/test_index.py",
        "tests/view/test_eviction_lines.py",
        "tests/view/test_index_anchors.py",
        "tests/view/test_carried.py",
        "tests/view/test_eviction.py",
    ],
    "view/_working.py": [
        "tests/view/test_eviction_boundaries.py",
        "tests/view/test_eviction.py",
        "tests/view/test_render.py",
        "tests/view/test_replay.py",
        "tests/view/test_surface_contract.py",
        "tests/view/test_carried.py",
        "tests/view/test_restore_process.py",
    ],
    "log/_store.py": [
        *("-k", "not postgresql"),  # the PostgreSQL store is log/_postgres.py, not this module
        *("-p", "no:hypothesispytest"),  # no property tests here: skip its import per mutant
        "tests/log/test_store_boundaries.py",
        "tests/log/test_store_locks.py",
        "tests/log/test_store.py",
        "tests/log/test_integrity.py",
        "tests/log/test_check.py",
        "tests/log/test_read_only.py",
        "tests/log/test_sqlite_file.py",
        "tests/log/test_text_labels.py",
        "tests/log/test_failures.py",
    ],
    "agent/_loop.py": [
        *("-m", "not slow"),  # the local-model run: a minute of llama.cpp, no loop line of its own
        *("-p", "no:hypothesispytest"),  # no property tests here: skip its import per mutant
        "tests/agent/test_agent_loop.py",
        "tests/agent/test_agent_submit.py",
        "tests/agent/test_agent_calls.py",
        "tests/agent/test_agent_failures.py",
        "tests/agent/test_agent_carried_index.py",
        "tests/agent/test_agent_sessions.py",
        "tests/agent/test_agent_store_errors.py",  # a run_end the Event Log refuses
        "tests/agent/test_agent_trajectories.py",  # fenced code blocks, the trace's reasoning
    ],
    "kernel/_host.py": [
        # Every line of _host.py that tests/kernel runs, at 60% of its time (per-test line
        # coverage): not the sandbox-layer attacks of test_hostile (eight variants each),
        # test_store_attacks or test_namespace, which add no line of their own.
        "tests/kernel/test_cells.py",
        "tests/kernel/test_bridge.py",
        "tests/kernel/test_hostile.py::test_forged_tool_calls_are_bounded_per_cell",
        # the host's watch of a worker and its reader between cells (what the host hands them)
        "tests/kernel/test_hostile.py::test_threads_left_spinning_between_cells_get_the_worker_killed",
        "tests/kernel/test_channel.py",
        "tests/kernel/test_bounds.py",
        "tests/kernel/test_scratch.py",
        "tests/kernel/test_sandbox.py",
        "tests/kernel/test_lifecycle.py",
        "tests/kernel/test_frames_hostile.py",
        "tests/kernel/test_reader.py",
    ],
    "kernel/_sandbox.py": [
        # _sandbox.py runs in the worker, which every one of these tests starts, so line coverage
        # cannot narrow it; the sandbox variants can. A variant only changes the Landlock ABI cap,
        # which _sandbox.py passes on to _landlock.restrict untouched: every variant runs the same
        # lines of this module. abi7 (the strongest Landlock, this kernel's own) shows a mutant
        # that weakens Landlock's paths; no-landlock (best-effort, no Landlock at all) is where
        # the other layers hold alone, so it shows a mutant weakening one of them most plainly.
        # abi1 ... abi6 lie between the two: 180 of the 292 tests, half of the run.
        *("-k", " and ".join(f"not abi{n}" for n in range(1, 7))),
        "tests/kernel/test_sandbox.py",
        "tests/kernel/test_namespace.py",
        "tests/kernel/test_hostile.py",
    ],
    "surface/_search.py": [
        "tests/surface/test_search_broadening.py",
        "tests/surface/test_surface_search.py",
        "tests/surface/test_surface_query.py",
        "tests/surface/test_surface_broaden.py",
        "tests/surface/test_fusion.py",
        "tests/surface/test_surface_api.py",
        "tests/surface/test_paper_appendix.py",
        "tests/surface",
    ],
}

KEPT_OPERATORS = {
    *(f"core/ReplaceBinaryOperator_{a}_{b}" for a, b in [
        ("Add", "Sub"), ("Sub", "Add"), ("Mul", "Div"), ("Div", "Mul"), ("FloorDiv", "Mul"),
        ("Mod", "FloorDiv"), ("Pow", "Mul"), ("BitOr", "BitAnd"), ("BitAnd", "BitOr"),
        ("BitXor", "BitOr"), ("LShift", "RShift"), ("RShift", "LShift"),
    ]),
    *(f"core/ReplaceComparisonOperator_{a}_{b}" for a, b in [
        ("Eq", "NotEq"), ("NotEq", "Eq"), ("Is", "IsNot"), ("IsNot", "Is"),
        ("Lt", "LtE"), ("LtE", "Lt"), ("Gt", "GtE"), ("GtE", "Gt"),
        ("Lt", "GtE"), ("LtE", "Gt"), ("Gt", "LtE"), ("GtE", "Lt"),
    ]),
    "core/ReplaceUnaryOperator_Delete_Not", "core/ReplaceUnaryOperator_USub_UAdd",
    "core/AddNot", "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd",
    "core/ReplaceBreakWithContinue", "core/ReplaceContinueWithBreak",
    "core/ExceptionReplacer", "core/NumberReplacer", "core/ZeroIterationForLoop",
    "core/RemoveDecorator",
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """One mutant's outcome, named by what it changed."""

    operator: str
    line: int
    column: int
    before: str
    after: str
    outcome: str  # killed | survived | incompetent
    job: str = field(default="", compare=False)  # the session's job id

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.operator, self.before, self.after)


@dataclass
class Score:
    """A module's tally; ``equivalent`` are survivors matched in the equivalents file."""

    module: str
    mutants: list[Mutant] = field(default_factory=list)
    equivalent: list[Mutant] = field(default_factory=list)
    why: dict[Mutant, str] = field(default_factory=dict)
    annotations_skipped: int = 0
    """Mutants inside type annotations, marked skipped before the run (not in ``mutants``)."""

    def count(self, outcome: str) -> int:
        return sum(m.outcome == outcome for m in self.mutants)

    @property
    def survivors(self) -> list[Mutant]:
        return [m for m in self.mutants if m.outcome == "survived" and m not in self.why]

    @property
    def percent(self) -> float:
        counted = len(self.mutants) - len(self.equivalent)
        return 100.0 * self.count("killed") / counted if counted else 100.0

    def row(self) -> str:
        return (
            f"| `{self.module}` | {len(self.mutants)} | {self.count('killed')} | "
            f"{self.count('survived')} | {len(self.equivalent)} | {self.percent:.1f}% |"
        )


def slug(module: str) -> str:
    return module.replace("/", "__").removesuffix(".py")


def copy_tree(dest: Path) -> None:
    """Copy the working tree's tracked and unignored files (edits included) to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file() and not name.startswith(".mutation/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def make_venv(root: Path, src: Path) -> Path:
    """A venv whose Python imports scrollctx from ``src`` and everything else from ours."""
    env = root / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    python = env / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "scrollctx_mutation.pth").write_text(f"{src}\n{ours}\n")
    scroll = env / "bin" / "scroll"
    scroll.write_text(f"#!{python}\nimport sys\nfrom scrollctx.cli import main\nsys.exit(main())\n")
    scroll.chmod(0o755)
    return python


def prepare(module: str) -> Path:
    """Lay out ``.mutation/<module>/``: the copy, its venv, the shared data beside the copy."""
    root = WORK / slug(module)
    shutil.rmtree(root, ignore_errors=True)
    repo = root / "repo"
    repo.mkdir(parents=True)
    copy_tree(repo)
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (root / "shared").symlink_to(shared)
    python = make_venv(root, repo / "src")
    subprocess.run(
        [python, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", repo / "src"],
        check=True,
    )  # fmt: skip
    return root


def test_command(root: Path, module: str) -> list[str]:
    python = root / "venv" / "bin" / "python"
    return [str(python), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *MODULES[module]]


def baseline(root: Path, module: str) -> float:
    """Run the tests on the unmutated copy; return the seconds they took (they must pass)."""
    start = time.monotonic()
    done = subprocess.run(
        test_command(root, module), cwd=root / "repo", capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"{module}: the tests fail before any mutation:\n{done.stdout[-3000:]}")
    return time.monotonic() - start


def write_config(root: Path, module: str, timeout: float) -> Path:
    excluded = [
        f"{name}$"
        for name in subprocess.run(
            [cosmic_ray(), "operators"], capture_output=True, text=True, check=True
        ).stdout.split()
        if name not in KEPT_OPERATORS
    ]
    config = {
        "module-path": str(root / "repo" / "src" / "scrollctx" / module),
        "timeout": round(timeout, 1),
        "excluded-modules": [],
        "test-command": shlex.join(test_command(root, module)),  # cosmic-ray shlex.splits it
        "distributor": {"name": "local"},
        "filters": {"operators-filter": {"exclude-operators": excluded}},
    }
    path = root / "cosmic-ray.toml"
    path.write_text(json_to_toml(config))
    return path


def json_to_toml(config: dict[str, object]) -> str:
    """The few shapes this config has (strings, numbers, string lists, nested tables)."""

    def table(prefix: str, values: dict[str, object]) -> list[str]:
        lines, nested = [f"[{prefix}]"], []
        for key, value in values.items():
            if isinstance(value, dict):
                nested += table(f"{prefix}.{key}", value)
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        return lines + [""] + nested

    return "\n".join(table("cosmic-ray", config)) + "\n"


def cosmic_ray(tool: str = "cosmic-ray") -> str:
    return str(Path(sys.executable).parent / tool)


def run_module(
    module: str, resume: bool, rerun_survivors: bool = False, survivors_only: bool = False
) -> Score:
    """Mutate one module in its copy, run its tests per mutant, and score it.

    ``survivors_only`` (with ``rerun_survivors``): the mutants a stopped run never reached stay
    pending, for a later ``--resume``; only the survivors run again.
    """
    root = WORK / slug(module)
    session = root / "session.sqlite"
    if session.is_file():
        undefer(session)  # what an interrupted --survivors-only left marked
    deferred = defer_pending(session) if rerun_survivors and survivors_only else False
    try:
        if rerun_survivors:
            forget_survivors(root, module)
        run_session(module, root, session, resume, rerun_survivors)
    finally:
        if deferred:
            undefer(session)
    return score(module)


def run_session(module: str, root: Path, session: Path, resume: bool, rerun: bool) -> None:
    """Make the session unless it is resumed or rerun, then run what is pending in it."""
    if not rerun and not (resume and session.is_file()):
        root = prepare(module)
        seconds = baseline(root, module)
        config = write_config(root, module, 3 * seconds + 30)
        steps: list[list[str | Path]] = [
            [cosmic_ray(), "init", config, session],
            [cosmic_ray("cr-filter-operators"), session, config],
        ]
        for argv in steps:
            subprocess.run(argv, cwd=root / "repo", check=True, capture_output=True)
        skip_annotations(session, REPO / "src" / "scrollctx" / module)
    with (root / "exec.log").open("a") as log:
        subprocess.run(
            [cosmic_ray(), "exec", root / "cosmic-ray.toml", session],
            cwd=root / "repo", check=True, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


DEFERRED = "not run yet: deferred by --survivors-only"


def defer_pending(session: Path) -> bool:
    """Mark every mutant not run yet as skipped (:data:`DEFERRED`), so exec passes it by."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            db.set_result(
                item.job_id, WorkResult(output=DEFERRED, worker_outcome=WorkerOutcome.SKIPPED)
            )
    return True


def undefer(session: Path) -> None:
    """Make the deferred mutants pending again."""
    with sqlite3.connect(session) as db:
        db.execute("DELETE FROM work_results WHERE output = ?", (DEFERRED,))


def skip_annotations(session: Path, path: Path) -> None:
    """Mark the mutants inside type annotations skipped: equivalent by rule, not worth a run.

    Each would survive, so each would cost a full run of the module's tests (21 such mutants
    in ``kernel/_host.py``, half an hour there); :func:`score` counts them apart.
    """
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = annotation_spans(path)
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            start = tuple(item.mutations[0].start_pos)
            if any(lo <= start < hi for lo, hi in spans):
                skipped = WorkResult(output=ANNOTATION, worker_outcome=WorkerOutcome.SKIPPED)
                db.set_result(item.job_id, skipped)


def forget_survivors(root: Path, module: str) -> None:
    """Refresh the copy's tests and selection from this checkout; mark the survivors pending
    (those not judged equivalent: a judged one would only survive again).

    Only for new or tightened tests: the module itself must be unchanged since the session was
    made, or the recorded mutants would no longer be this code's mutants.
    """
    copied = root / "repo" / "src" / "scrollctx" / module
    if copied.read_bytes() != (REPO / "src" / "scrollctx" / module).read_bytes():
        sys.exit(f"{module} changed since its session was made: run it again without --rerun")
    shutil.rmtree(root / "repo" / "tests")
    shutil.copytree(
        REPO / "tests", root / "repo" / "tests", ignore=shutil.ignore_patterns("__pycache__")
    )
    config = tomllib.loads((root / "cosmic-ray.toml").read_text())["cosmic-ray"]
    write_config(root, module, config["timeout"])  # this checkout's test selection
    unjudged = [m.job for m in score(module).survivors]  # the judged ones would survive again
    with sqlite3.connect(root / "session.sqlite") as db:
        db.executemany("DELETE FROM work_results WHERE job_id = ?", [(job,) for job in unjudged])


def score(module: str) -> Score:
    """Read a module's session (results so far) and match survivors against the judged list."""
    session = WORK / slug(module) / "session.sqlite"
    dumped = subprocess.run(
        [cosmic_ray(), "dump", session], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    result = Score(module)
    for item, outcome in map(json.loads, dumped):
        if outcome is not None and outcome["output"] == ANNOTATION:
            result.annotations_skipped += 1
        if outcome is None or outcome["worker_outcome"] not in ("normal", "exception"):
            continue  # pending, skipped by the operator filter, or no mutation possible
        if any(sign in (outcome["output"] or "") for sign in HARNESS_FAILURES):
            sys.exit(f"{module}: a mutant's test run did not run the tests:\n{outcome['output']}")
        mutation = item["mutations"][0]
        before, after = changed_lines(outcome["diff"])
        line, column = mutation["start_pos"]
        result.mutants.append(
            Mutant(
                mutation["operator_name"], line, column, before, after, outcome["test_outcome"],
                item["job_id"],
            )
        )  # fmt: skip
    judged = equivalents(module)
    annotations = annotation_spans(REPO / "src" / "scrollctx" / module)
    for m in result.mutants:
        if m.outcome != "survived":
            continue
        if any(lo <= (m.line, m.column) < hi for lo, hi in annotations):
            result.why[m] = ANNOTATION
            continue
        for entry in judged:
            if (entry["operator"], entry["before"], entry["after"]) == m.key and entry.get(
                "line", m.line
            ) == m.line:
                result.why[m] = entry["why"]
    result.equivalent = list(result.why)
    write_survivors(result)
    return result


ANNOTATION = "inside a type annotation, which is never evaluated"
# What pytest prints when the command itself is wrong: such a run "kills" every mutant.
HARNESS_FAILURES = ("ERROR: file or directory not found", "no tests ran", "error: unrecognized")


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where ``path``'s type annotations are, as (line, character) ranges.

    Every module here starts with ``from __future__ import annotations``, so an annotation is
    a string nobody evaluates at run time: a mutant inside one (``X | None`` to ``X & None``)
    is equivalent by construction and is counted so without a listing of its own.
    """
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    if not any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    ):
        return []
    lines = source.splitlines()

    def position(line: int, byte: int) -> tuple[int, int]:
        return line, len(lines[line - 1].encode()[:byte].decode())

    spans = []
    for node in ast.walk(tree):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for annotation in filter(None, found):
            assert annotation.end_lineno is not None and annotation.end_col_offset is not None
            spans.append(
                (
                    position(annotation.lineno, annotation.col_offset),
                    position(annotation.end_lineno, annotation.end_col_offset),
                )
            )
    return spans


def changed_lines(diff: str) -> tuple[str, str]:
    """The removed and added lines of a mutant's diff, each stripped and joined by ' / '."""
    lines = diff.splitlines()
    removed = [x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++")]
    return " / ".join(removed), " / ".join(added)


def equivalents(module: str) -> list[dict[str, Any]]:
    if not EQUIVALENT.is_file():
        return []
    entries = tomllib.loads(EQUIVALENT.read_text()).get("equivalent", [])
    return [e for e in entries if e["module"] == module]


def write_survivors(result: Score) -> None:
    """List the survivors nobody has judged, as line and diff, for whoever writes the tests."""
    out = WORK / f"{slug(result.module)}.survivors.txt"
    text = [
        f"line {m.line} {m.operator}\n  - {m.before}\n  + {m.after}\n"
        for m in sorted(result.survivors, key=lambda m: m.line)
    ]
    out.write_text("".join(text))


def report(scores: list[Score]) -> str:
    head = "| module | mutants | killed | survived | judged equivalent | score |\n"
    return head + "|---|---:|---:|---:|---:|---:|\n" + "\n".join(s.row() for s in scores)


def equivalents_markdown(scores: list[Score]) -> str:
    """Each module's survivors judged equivalent, with why (annotation mutants counted)."""
    out = []
    for result in scores:
        listed = sorted(
            (m for m in result.equivalent if result.why[m] != ANNOTATION), key=lambda m: m.line
        )
        annotated = len(result.equivalent) - len(listed)
        out.append(f"\n### `{result.module}`\n")
        out += [f"- line {m.line}, `{m.before}` → `{m.after}`: {result.why[m]}" for m in listed]
        if annotated:
            out.append(
                f"- {annotated} mutant(s) {ANNOTATION} (`from __future__ import annotations`)."
            )
        if result.annotations_skipped:
            out.append(
                f"- {result.annotations_skipped} more mutant(s) {ANNOTATION}, skipped before "
                "the run (counted in no column)."
            )
        if not result.equivalent and not result.annotations_skipped:
            out.append("- none")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules under src/scrollctx (default: all)")
    parser.add_argument("--resume", action="store_true", help="finish an interrupted session")
    parser.add_argument("--report", action="store_true", help="only print the last results")
    parser.add_argument(
        "--rerun-survivors",
        action="store_true",
        help="run the survivors again against this checkout's tests (the module unchanged)",
    )
    parser.add_argument(
        "--survivors-only",
        action="store_true",
        help="with --rerun-survivors: leave the mutants a stopped run never reached pending",
    )
    args = parser.parse_args()
    if args.survivors_only and not args.rerun_survivors:
        parser.error("--survivors-only goes with --rerun-survivors")
    unknown = set(args.modules) - MODULES.keys()
    if unknown:
        parser.error(f"not in MODULES: {', '.join(sorted(unknown))}")
    modules = args.modules or list(MODULES)
    scores = []
    for module in modules:
        if args.report:
            scores.append(score(module))
        else:
            scores.append(
                run_module(module, args.resume, args.rerun_survivors, args.survivors_only)
            )
            print(scores[-1].row(), flush=True)
    print(report(scores))
    if args.report:
        print(equivalents_markdown(scores))
    print(f"survivors not judged equivalent: {WORK}/<module>.survivors.txt")
    sys.exit(0 if all(s.percent >= 85 for s in scores) else 1)


if __name__ == "__main__":
    main()
