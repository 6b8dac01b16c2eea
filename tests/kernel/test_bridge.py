"""The tool bridge with real workers: calls cross to the host, are logged, and fail cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_helpers import Session

from scrollctx.errors import UsageError
from scrollctx.kernel import Kernel, describe_tool
from scrollctx.log import EventLog, Kind

_WORKER = "import gc\nworker = next(o for o in gc.get_objects() if type(o).__name__ == 'Worker')\n"


def test_declared_tool_is_a_function_with_the_host_signature_and_doc(shared: Session) -> None:
    result = shared.kernel.run_cell("help(lookup)")
    assert "lookup(topic: str, limit: int = 3) -> list[str]" in result.stdout
    assert "Return up to ``limit`` canned facts about ``topic``." in result.stdout


def test_call_returns_the_value_and_logs_call_and_full_result(shared: Session) -> None:
    result = shared.kernel.run_cell("facts = lookup('tides', limit=2)\nprint(facts)")
    assert result.stdout == "['tides fact 0', 'tides fact 1']\n"
    assert len(result.tool_calls) == 1
    events = [e for e in shared.log.session_events("k1") if e.tool_call_id == result.tool_calls[0]]
    call, answer = events
    assert (call.kind, call.name, call.tool_input) == (
        Kind.TOOL_CALL,
        "lookup",
        {"args": ["tides"], "kwargs": {"limit": 2}},
    )
    assert (answer.kind, answer.tool_state) == (Kind.TOOL_RESULT, "ok")
    assert json.loads(answer.content) == ["tides fact 0", "tides fact 1"]


def test_large_result_is_returned_whole_and_externalized_in_the_log(shared: Session) -> None:
    result = shared.kernel.run_cell("blob = big_blob(100_000)\nprint(len(blob), blob[-3:])")
    assert result.stdout == "100000 bbb\n"
    answer = shared.log.session_events("k1")[-1]
    assert answer.tool_call_id == result.tool_calls[0] and answer.is_externalized
    assert json.loads(shared.log.full_text(answer)) == "b" * 100_000


def test_host_exception_becomes_tool_call_error_in_the_cell(shared: Session) -> None:
    result = shared.kernel.run_cell(
        "try:\n    explode('disk full')\nexcept ToolCallError as exc:\n    print('caught:', exc)"
    )
    assert result.stdout == "caught: explode: ValueError: disk full\n"
    answer = shared.log.session_events("k1")[-1]
    assert (answer.tool_state, answer.content) == ("error", "explode: ValueError: disk full")
    uncaught = shared.kernel.run_cell("explode('again')")
    assert uncaught.error is not None
    assert uncaught.error.endswith("tools.ToolCallError: explode: ValueError: again")


def test_wrong_arguments_fail_in_the_cell_without_reaching_the_host(shared: Session) -> None:
    before = shared.log.last_seq()
    result = shared.kernel.run_cell("lookup()")
    assert result.error is not None and "missing a required argument: 'topic'" in result.error
    not_json = shared.kernel.run_cell("lookup(object())")
    assert not_json.error is not None and "must be JSON-able" in not_json.error
    assert shared.log.last_seq() == before


def test_undeclared_names_are_unreachable(shared: Session) -> None:
    kernel = shared.kernel
    assert "NameError" in (kernel.run_cell("open_host_file('/etc/passwd')").error or "")
    forged = kernel.run_cell(
        _WORKER
        + "try:\n    worker.call_tool('system', ['id'], {})\n"
        + "except ToolCallError as exc:\n    print(exc)"
    )
    assert forged.stdout.startswith("no tool named 'system' is declared to this kernel")
    logged = shared.log.session_events("k1")[-1]
    assert (logged.name, logged.tool_state) == ("system", "error")


def test_tool_returning_a_non_json_value_fails_cleanly(tmp_path: Path) -> None:
    def handle() -> object:
        """Return something JSON cannot carry."""
        return object()

    with Kernel(scratch=tmp_path / "scratch", tools={"handle": handle}) as kernel:
        result = kernel.run_cell("handle()")
        assert result.error is not None and "not JSON-able" in result.error
        assert kernel.run_cell("print('ok')").stdout == "ok\n"


def test_tool_declarations_are_checked() -> None:
    with pytest.raises(UsageError, match="reserved"):
        describe_tool(lambda: None, "ms")
    with pytest.raises(UsageError, match="not a public Python identifier"):
        describe_tool(lambda: None, "not valid")
    with pytest.raises(UsageError, match="unique"):
        Kernel(tools=[len, len])


def test_dotted_tools_are_grouped_under_one_kernel_name(tmp_path: Path) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def negate(x: int) -> int:
        """Negate a number."""
        return -x

    with EventLog.open(tmp_path / "store" / "history.db") as log:
        tools = {"calc.add": add, "calc.negate": negate}
        with Kernel(event_log=log, session_id="g", scratch=tmp_path / "s", tools=tools) as kernel:
            result = kernel.run_cell("print(calc.add(a=2, b=3), calc.negate(x=4))\nhelp(calc.add)")
            assert result.stdout.startswith("5 -4\n") and "add(a: int, b: int) -> int" in (
                result.stdout
            )
            assert "<tools calc: add, negate;" in kernel.run_cell("print(repr(calc))").stdout
            assert kernel.run_cell("print(calc.nope)").error is not None
            assert not [d for d in result.digest if d.name == "calc"]  # the kernel's, not a var
        calls = [e for e in log.session_events("g") if e.kind == Kind.TOOL_CALL]
        assert [c.name for c in calls] == ["calc.add", "calc.negate"]
    with pytest.raises(UsageError, match="both a tool and a group"):
        Kernel(tools={"calc": add, "calc.add": add})
    with pytest.raises(UsageError, match="GROUP.NAME"):
        describe_tool(add, "a.b.c")
    with pytest.raises(UsageError, match="reserved"):
        describe_tool(add, "ms.add")
