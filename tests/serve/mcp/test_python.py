"""``scroll_python`` through a real ``scroll mcp``: persistence, limits, the sandbox policy,
hostile cells, concurrent sessions and clients that go away mid-cell (checked in /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import anyio
import pytest
from mcp_helpers import (
    call,
    eventually,
    http_server,
    http_session,
    stdio_session,
    store_digest,
    text,
)

from procs import alive, cpu_ticks, descendants, wait_for

pytestmark = pytest.mark.anyio

SPIN = "while True:\n    pass"


async def test_variables_persist_and_output_is_capped(beam_store: Path, tmp_path: Path) -> None:
    async with stdio_session(beam_store, "--cell-timeout", "5", errlog=tmp_path / "err") as client:
        query = "SELECT seq FROM hist.conversation_history WHERE kind = 'conversation'"
        await call(client, "scroll_python", source=f"rows = ms.sql_query({query!r})")
        counted = await call(client, "scroll_python", source="print(len(rows))")
        assert text(counted).startswith("stdout:\n188")
        loud = await call(client, "scroll_python", source="print('x' * 50_000)")
        assert "[stdout cut: 18,001 more characters hidden" in text(loud)
        assert "Your variables persist" in text(loud)
        assert loud.structured_content["stdout"] == "x" * 32_000

        quick = await call(client, "scroll_python", source=SPIN, timeout=0.5)
        assert quick.is_error and "0.5 s timeout and was interrupted" in text(quick)
        kept = await call(client, "scroll_python", source="print(len(rows))")
        assert text(kept).startswith("stdout:\n188")  # an interrupt keeps the namespace

        asked = await call(client, "scroll_python", source="print('ok')", timeout=600)
        assert "timeout lowered to the server's limit of 5 s" in text(asked)


async def test_the_sandbox_policy_holds_unchanged(store_dir: Path, tmp_path: Path) -> None:
    errlog = tmp_path / "err"
    async with stdio_session(store_dir, "--without", "seccomp", errlog=errlog) as client:
        refused = await call(client, "scroll_python", source="print('ran')")
        assert refused.is_error and refused.structured_content["refused"]
        assert "Nothing ran" in text(refused) and "ran\n" not in text(refused)
        assert "scroll mcp --sandbox best-effort" in text(refused)
        assert "scroll exec" not in text(refused)  # that flag is not this server's
        searched = await call(client, "scroll_search", query="anything")  # its reader too
        assert searched.is_error and "sandbox does not hold here: seccomp" in text(searched)
        assert "scroll mcp --sandbox best-effort" in text(searched)
    async with stdio_session(store_dir, "--sandbox", "off", errlog=errlog) as client:
        for source in ("x = 1", "print(x)"):
            result = await call(client, "scroll_python", source=source)
            assert text(result).startswith("[sandbox] opt-out 'off'")
        logged = await call(client, "scroll_sql", sql="SELECT count(*) AS n FROM "
                            "hist.conversation_history WHERE json_extract(metadata, "
                            "'$.opt_out') IS NOT NULL")  # fmt: skip
    assert logged.structured_content["rows"][0]["n"] >= 1  # the opt-out is in the log


HOSTILE = {
    "write the store": "open({db!r}, 'ab').write(b'x')",
    "delete the store": "import os; os.remove({db!r})",
    "write beside it": "open({folder!r} + '/planted.py', 'w').write('x')",
    "run a program": "import subprocess; subprocess.run(['true'])",
    "open a socket": "import socket; socket.socket()",
    "attach writable": 'ms.sql_query("ATTACH DATABASE {db!r} AS w")',
    "write through ms": "ms.sql_query('DELETE FROM hist.conversation_history')",
    "signal the server": "import os; os.kill(os.getppid(), 9)",
}


async def test_hostile_cells_leave_the_store_unchanged(beam_store: Path, tmp_path: Path) -> None:
    db, folder = str(beam_store / "history.db"), str(beam_store)
    async with stdio_session(beam_store, "--read-only", errlog=tmp_path / "err") as client:
        await call(client, "scroll_python", source="1")  # readers open: SQLite adds an empty -wal
        before = store_digest(beam_store)
        for attack, source in HOSTILE.items():
            result = await call(client, "scroll_python", source=source.format(db=db, folder=folder))
            assert result.is_error, f"{attack}: {text(result)}"
        alive_ = await call(client, "scroll_python", source="print(len(ms.search('Flask')))")
        assert text(alive_).startswith("stdout:\n10")  # the server and ms outlived every attack
    assert store_digest(beam_store) == before


async def test_http_sessions_are_isolated_and_cancelled_cells_stop_their_kernel(
    beam_store: Path, tmp_path: Path
) -> None:
    errlog = tmp_path / "err"
    with http_server(beam_store, "--cell-timeout", "60", errlog=errlog) as (url, server):
        async with http_session(url) as alice, http_session(url) as bob:
            a = await call(alice, "scroll_python", source="secret = 'alice'")
            b = await call(bob, "scroll_python", source="secret = 'bob'")
            a_session, b_session = a.structured_content["session"], b.structured_content["session"]
            assert a_session and b_session and a_session != b_session
            read_a = await call(alice, "scroll_python", source="print(secret)", session=a_session)
            assert text(read_a).startswith("stdout:\nalice")
            fresh = await call(alice, "scroll_python", source="print(secret)")
            assert "NameError" in text(fresh)  # no handle: a new kernel, nobody's variables

            workers = descendants(server.pid)
            ticks = {pid: cpu_ticks(pid) for pid in workers}
            async with anyio.create_task_group() as group:
                group.start_soon(
                    partial(call, bob, "scroll_python", source=SPIN, session=b_session)
                )
                await eventually(
                    lambda: any(cpu_ticks(p) > ticks[p] + 20 for p in workers), "the cell to spin"
                )
                group.cancel_scope.cancel()  # bob goes away mid-cell
            spinning = {p for p in workers if cpu_ticks(p) > ticks[p] + 20}
            await eventually(lambda: not any(alive(p) for p in spinning), "the worker to stop")
            gone = await call(bob, "scroll_python", source="print(secret)", session=b_session)
            assert gone.is_error and "went away while a cell was running" in text(gone)
            still = await call(alice, "scroll_python", source="print(secret)", session=a_session)
            assert text(still).startswith("stdout:\nalice")  # others are untouched
        assert server.poll() is None


def test_a_client_killed_mid_cell_leaves_no_process(beam_store: Path) -> None:
    script = Path(__file__).with_name("crashing_client.py")
    client = subprocess.Popen([sys.executable, str(script), str(beam_store)],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ))  # fmt: skip
    assert client.stdout is not None
    try:
        line = client.stdout.readline()
        assert line.startswith("SERVER "), line
        server = int(line.split()[1])
        processes = descendants(server)
        assert processes, "the kernel's processes should be running"
        ticks = {pid: cpu_ticks(pid) for pid in processes}
        wait_for(lambda: any(cpu_ticks(p) > ticks[p] + 20 for p in processes), "the cell to spin")
    finally:
        client.send_signal(signal.SIGKILL)  # no goodbye: the server only sees its stdin close
        client.wait()
        client.stdout.close()
    wait_for(lambda: not alive(server), "the server to exit on its own")
    assert not [pid for pid in processes if alive(pid)]
