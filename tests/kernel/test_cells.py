"""Cells in a real worker: persistence, last-expression display, output caps, errors, digest."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from kernel_helpers import WORKER, Session, big_blob, lookup

from scrollctx.errors import UsageError
from scrollctx.kernel import (
    CellResult,
    DigestEntry,
    Kernel,
    Limits,
    SandboxPolicy,
    render_digest,
    render_observation,
)
from scrollctx.kernel._frames import MAX_FRAME


def test_variables_imports_and_functions_persist(shared: Session) -> None:
    kernel = shared.kernel
    first = kernel.run_cell("import math\ncounter = 41\ndef bump(n):\n    return n + 1")
    assert first.ok, first.error
    second = kernel.run_cell("counter = bump(counter)\nprint(counter, math.floor(2.5))")
    assert second.stdout == "42 2\n"


def test_top_level_await_and_tasks_survive_between_cells(shared: Session) -> None:
    kernel = shared.kernel
    kernel.run_cell(
        "import asyncio\nasync def twice(x):\n    await asyncio.sleep(0)\n    return 2 * x"
    )
    result = kernel.run_cell("value = await twice(21)\nvalue")
    assert result.stdout == "42\n"
    kernel.run_cell("task = asyncio.ensure_future(twice(5))")
    assert kernel.run_cell("await task").stdout == "10\n"


def test_last_expression_is_shown_and_bound_to_underscore(shared: Session) -> None:
    kernel = shared.kernel
    assert kernel.run_cell("'abc'.upper()").stdout == "'ABC'\n"
    assert kernel.run_cell("print(_)").stdout == "ABC\n"
    assert kernel.run_cell("None").stdout == ""


def test_stdout_cap_keeps_the_head_and_says_what_was_hidden(tmp_path: Path) -> None:
    with Kernel(scratch=tmp_path / "scratch", stdout_cap=100) as kernel:
        result = kernel.run_cell("big = 'x' * 250 + 'TAIL'\nprint(big)")
    assert result.stdout == "x" * 100
    assert result.stdout_hidden == 155  # 150 x, TAIL and the newline
    text = render_observation(result)
    assert "155 more characters hidden" in text
    assert "variables persist" in text
    assert "print less" in text
    assert "TAIL" not in text


def test_binary_writes_to_stdout_buffer_are_captured(shared: Session) -> None:
    result = shared.kernel.run_cell(
        "import sys\nsys.stdout.buffer.write(b'raw \\xff bytes\\n')\nprint('text')"
    )
    assert result.stdout == "raw \ufffd bytes\ntext\n"


def test_stderr_is_captured_apart_from_stdout(shared: Session) -> None:
    result = shared.kernel.run_cell("import sys\nprint('out')\nprint('warned', file=sys.stderr)")
    assert (result.stdout, result.stderr) == ("out\n", "warned\n")
    assert render_observation(result) == "stdout:\nout\nstderr:\nwarned"


def test_exception_comes_back_with_a_traceback_of_cell_frames(shared: Session) -> None:
    kernel = shared.kernel
    kernel.run_cell("def inner(d):\n    return d['missing']")
    result = kernel.run_cell("x_before = 1\ninner({})")
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("Traceback (most recent call last):")
    assert "return d['missing']" in result.error
    assert result.error.endswith("KeyError: 'missing'")
    assert "_cell.py" not in result.error and "_worker.py" not in result.error
    assert kernel.run_cell("x_before").stdout == "1\n"


def test_syntax_error_and_system_exit_are_observations(shared: Session) -> None:
    kernel = shared.kernel
    bad = kernel.run_cell("def broken(:\n    pass")
    assert bad.error is not None and "SyntaxError" in bad.error
    exited = kernel.run_cell("import sys\nsys.exit(3)")
    assert exited.error is not None and "SystemExit: 3" in exited.error
    assert kernel.run_cell("print('alive')").stdout == "alive\n"


def test_a_cell_raising_keyboard_interrupt_itself_was_not_interrupted(shared: Session) -> None:
    # Only the host interrupts, at the timeout; the worker's word that the cell ended in a
    # KeyboardInterrupt (which the cell can raise itself) is not enough.
    result = shared.kernel.run_cell("raise KeyboardInterrupt")
    assert not result.interrupted and not result.timed_out and not result.namespace_lost
    assert result.error is not None and "KeyboardInterrupt" in result.error
    assert "timeout" not in result.error


def test_digest_lists_user_variables_with_type_and_shape(shared: Session) -> None:
    kernel = shared.kernel
    kernel.run_cell("import json")
    result = kernel.run_cell(
        "n = 7\nlabel = 'short'\nessay = 'w' * 500\nrows = [{'a': 1}] * 120\n"
        "conf = {'alpha': 1, 'beta': 2}\n_private = 1\n"
        "class Grid:\n    shape = (3, 4)\n    dtype = 'float32'\ngrid = Grid()\n"
        "def area(w, h=2):\n    return w * h"
    )
    entries = {entry.name: entry for entry in result.digest}
    assert entries["n"] == DigestEntry("n", "int", "= 7")
    assert entries["label"] == DigestEntry("label", "str", "= 'short'")
    assert entries["essay"] == DigestEntry("essay", "str", "len=500")
    assert entries["rows"] == DigestEntry("rows", "list[dict]", "len=120")
    assert entries["conf"].summary == "len=2 keys=['alpha', 'beta']"
    assert entries["grid"].summary == "shape=(3, 4) dtype=float32"
    assert entries["area"].summary == "area(w, h=2)"
    assert entries["Grid"].type == "class"
    hidden = {"json", "_private", "ms", "lookup", "explode", "ToolCallError", "days_between"}
    assert not hidden & set(entries)
    rendered = render_digest(result.digest)
    assert "rows: list[dict] len=120" in rendered.splitlines()


def test_digest_counts_what_it_does_not_list(tmp_path: Path) -> None:
    with Kernel(scratch=tmp_path / "scratch") as kernel:
        result = kernel.run_cell("for i in range(75):\n    globals()[f'v{i}'] = i")
    assert len(result.digest) == 60
    assert result.digest_more == 16  # v0..v74 plus the loop variable i
    assert render_digest(result.digest, result.digest_more).endswith("… and 16 more")


def test_ms_is_bound_read_only_and_its_notes_reach_the_observation(shared: Session) -> None:
    kernel = shared.kernel
    hits = kernel.run_cell("hits = ms.search('adoption agencies')\nprint(hits[0]['content'])")
    assert hits.stdout == "We talked about adoption agencies and the paperwork they need.\n"
    missing = kernel.run_cell("rows = ms.expand([999999])\nlen(rows)")
    assert missing.notes and "999999" in missing.notes[0]
    assert f"[note] {missing.notes[0]}" in render_observation(missing)
    helpers = kernel.run_cell("print(days_between('2024-01-01', '2024-01-31'), callable(or_terms))")
    assert helpers.stdout == "30 True\n"


def test_empty_cell_renders_no_output(shared: Session) -> None:
    result = shared.kernel.run_cell("quiet = 1")
    assert render_observation(result) == "(no output)"


def test_render_observation_of_a_constructed_result() -> None:
    result = CellResult(stdout="a\n", error="ValueError: x", notes=("look closer",))
    assert render_observation(result) == "stdout:\na\nerror: ValueError: x\n[note] look closer"


def test_bad_arguments_are_usage_errors(shared: Session, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="str of Python source"):
        shared.kernel.run_cell(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="timeout must be positive"):
        shared.kernel.run_cell("1", timeout=0)
    with pytest.raises(UsageError, match="unknown sandbox profile"):
        Kernel(sandbox="loose")
    with pytest.raises(UsageError, match="must not write"):
        Kernel(shared.log.path, scratch=shared.log.path.parent)
    with pytest.raises(UsageError, match="must not write"):
        Kernel(scratch="/")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "timeouts must be positive"),
        ({"grace": 0}, "timeouts must be positive"),
        ({"boot_timeout": 0}, "timeouts must be positive"),
        ({"stdout_cap": 0}, "output caps must be positive"),
        ({"stderr_cap": 0}, "output caps must be positive"),
        ({"max_tool_calls": -1}, "tool-call limits must be positive"),
        ({"session_tool_calls": -1}, "tool-call limits must be positive"),
        ({"max_tool_input": 0}, "tool-call limits must be positive"),
        ({"session_log_bytes": 0}, "tool-call limits must be positive"),
        ({"session_id": ""}, "non-empty session_id"),
    ],
)
def test_a_limit_out_of_range_is_refused_before_a_worker_starts(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        Kernel(scratch=tmp_path, **options)  # type: ignore[arg-type]


def test_the_smallest_limits_are_accepted(tmp_path: Path) -> None:
    # No tool call at all (per cell or per session) is a limit, not a mistake; caps and
    # sizes start at one.
    kernel = Kernel(
        scratch=tmp_path,
        boot_timeout=0.5,
        stderr_cap=1,
        max_tool_calls=0,
        max_tool_input=1,
        session_tool_calls=0,
        session_log_bytes=1,
    )
    assert (kernel.max_tool_calls, kernel.session_tool_calls) == (0, 0)
    kernel.close()
    with Kernel(scratch=tmp_path, stdout_cap=1, max_tool_calls=0, tools=[lookup]) as kernel:
        result = kernel.run_cell(
            "print('ab')\ntry:\n    lookup('x')\nexcept ToolCallError as e:\n    refused = str(e)"
        )
        assert (result.stdout, result.stdout_hidden) == ("a", 2)
        said = "this cell already made 0 tool calls"
        assert kernel.run_cell(f"print(int(refused.startswith({said!r})))").stdout == "1"


def test_a_cell_may_be_a_quarter_of_a_frame_and_no_larger(shared: Session) -> None:
    most = MAX_FRAME // 4  # characters: each may take four bytes in the frame
    assert shared.kernel.run_cell("#" * (most - 9) + "\nprint(1)").stdout == "1\n"
    with pytest.raises(UsageError, match=f"too large \\(at most {most:,}\\)"):
        shared.kernel.run_cell("#" * (most + 1))


def test_without_an_event_log_ms_is_unbound_and_a_forged_call_is_answered(
    tmp_path: Path,
) -> None:
    with Kernel(scratch=tmp_path / "scratch") as kernel:
        assert kernel.ms_state == "no Event Log bound (the kernel was started without one)"
        forged = WORKER + (
            "os.write(w.fd_out, frame({'op': 'ms', 'call': 7, 'method': 'search', "
            "'args': ['x'], 'kwargs': {}}))\nanswer = w.reader.read()\n"
            "print(answer['call'], answer['ok'], 'ms is not available' in str(answer))"
        )
        result = kernel.run_cell(forged)
        assert result.stdout == "7 False True\n", result.error
        assert kernel.run_cell("print('still here')").stdout == "still here\n"


def test_undecodable_text_and_huge_errors_do_not_cost_the_namespace(shared: Session) -> None:
    kernel = shared.kernel
    kernel.run_cell("survivor = 'kept'")
    odd = kernel.run_cell("print('name-\\udcff-end')")  # a lone surrogate, as os.listdir gives
    assert odd.stdout == "name-?-end\n"
    huge = kernel.run_cell("raise ValueError('x' * 10**7)")
    assert huge.error is not None and len(huge.error) < 25_000
    assert "characters cut" in huge.error and not huge.namespace_lost
    assert kernel.run_cell("print(survivor)").stdout == "kept\n"


def test_duration_covers_the_cell_and_its_wait(shared: Session) -> None:
    quick = shared.kernel.run_cell("pass")
    slow = shared.kernel.run_cell("import time\ntime.sleep(0.2)")
    assert 0 < quick.duration and slow.duration >= 0.2


def test_a_cell_s_timeout_is_passed_by_name_only(shared: Session) -> None:
    # run_cell(source, *, timeout=...): a number after the source is a mistake, not a timeout.
    assert shared.kernel.run_cell(source="print(2)").stdout == "2\n"
    with pytest.raises(TypeError):
        shared.kernel.run_cell("print(1)", 5)  # type: ignore[misc]


def test_a_cell_may_make_500_tool_calls_by_default_and_no_more(tmp_path: Path) -> None:
    cell = (
        "made = refused = 0\nfor i in range(501):\n    try:\n        lookup('t', 1)\n"
        "        made += 1\n    except ToolCallError:\n        refused += 1\nprint(made, refused)"
    )
    with Kernel(scratch=tmp_path / "scratch", tools=[lookup]) as kernel:
        assert kernel.run_cell(cell).stdout == "500 1\n"


def test_a_lost_cell_s_duration_is_the_time_it_took(shared: Session) -> None:
    started = time.monotonic()
    result = shared.kernel.run_cell("import os\nos._exit(3)")
    took = time.monotonic() - started
    assert result.namespace_lost and 0 < result.duration <= took


def test_a_cell_calling_tools_without_pause_is_still_interrupted_at_its_timeout(
    tmp_path: Path,
) -> None:
    # The host answers each call and then waits for the next frame only until the deadline: a
    # cell that keeps it busy with calls is interrupted at its timeout all the same.
    cell = (
        "import time\nends = time.monotonic() + 20\nwhile time.monotonic() < ends:\n"
        "    try:\n        lookup('t', 1)\n    except ToolCallError:\n        pass\n"
        "print('ran to the end')"
    )
    with Kernel(scratch=tmp_path / "scratch", tools=[lookup], timeout=0.5) as kernel:
        result = kernel.run_cell(cell)
    assert result.interrupted and result.stdout == "", result.stdout


def test_start_reader_says_whether_ms_is_bound(shared: Session, tmp_path: Path) -> None:
    assert shared.kernel.start_reader() is True  # already running: the answer stands
    with Kernel(scratch=tmp_path / "scratch") as kernel:
        assert kernel.reader is None and kernel.start_reader() is False


def test_the_default_session_bound_on_logged_bytes_is_far_above_a_megabyte(
    tmp_path: Path,
) -> None:
    cell = "for _ in range(5):\n    big_blob(300_000)\nprint('ran')"
    with Kernel(scratch=tmp_path / "scratch", tools=[big_blob]) as kernel:
        first, second = kernel.run_cell(cell), kernel.run_cell(cell)
    assert (first.stdout, second.stdout) == ("ran\n", "ran\n"), second.error


def test_a_tool_call_up_to_the_input_limit_is_read_whatever_the_result_limit(
    tmp_path: Path,
) -> None:
    # The largest frame the host reads leaves room for a call's envelope above max_tool_input,
    # here far above what a result frame may take.
    def length(text: str) -> int:
        """Return the length of ``text``."""
        return len(text)

    limit = 1_000_000
    with Kernel(scratch=tmp_path / "scratch", tools=[length], max_tool_input=limit) as kernel:
        assert kernel.frame_limit > limit
        result = kernel.run_cell(f"print(length('a' * {limit - 200}))")
    assert result.stdout == f"{limit - 200}\n" and not result.namespace_lost, result.error


def test_cpu_a_cell_uses_is_not_counted_against_the_idle_budget(tmp_path: Path) -> None:
    # The idle budget is for CPU used while no cell runs; a cell's own CPU is its timeout's.
    policy = SandboxPolicy(limits=Limits(idle_cpu=0.5))
    cell = (
        "import time\nends = time.process_time() + 1.5\nwhile time.process_time() < ends:\n    pass"
    )
    with Kernel(scratch=tmp_path / "scratch", sandbox=policy) as kernel:
        result = kernel.run_cell(cell + "\nprint('done')")
    assert result.stdout == "done\n" and not result.namespace_lost, result.error


def test_a_worker_that_dies_in_a_cell_shows_the_last_1500_characters_of_its_output(
    shared: Session,
) -> None:
    cell = "import os\nos.write(2, b'e' * 2000 + b'x' * 1500)\nos._exit(3)"
    result = shared.kernel.run_cell(cell)
    assert result.namespace_lost and result.error is not None
    assert "its last output (untrusted) was:\n" + "x" * 1500 + "; a fresh" in result.error


def test_the_scratch_may_neither_hold_nor_lie_inside_the_code_the_host_imports(
    tmp_path: Path,
) -> None:
    # The worker writes its scratch: a module or a .pth file it left in the interpreter's
    # folders or beside the package would run in the host. A subfolder of the store is fine.
    import scrollctx

    holding = Path(scrollctx.__file__).resolve().parents[1]
    for inside in (holding, holding / "scrollctx", Path(sys.prefix) / "lib" / "scratch"):
        with pytest.raises(UsageError, match="code the kernel must not write"):
            Kernel(scratch=inside)
    with pytest.raises(UsageError, match="code the kernel must not write"):
        Kernel(scratch=holding.parent)
    store = tmp_path / "store" / "history.db"
    Kernel(store, scratch=store.parent / "scratch").close()
    Kernel(scratch=tmp_path / "elsewhere").close()
