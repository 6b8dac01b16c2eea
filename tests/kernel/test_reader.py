"""The memory reader: ``ms`` answered by a separate, confined process, within real budgets.

Every test uses real processes: a kernel's worker and reader, or a host-side reader alone (as
the JSON memory tools use it). Each budget is shown on its own: the other limits that would also
stop the same query are lifted (``None``, or generous), so that removing the one under test
lets the query through.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import Session, open_session

from scrollctx.errors import QueryError
from scrollctx.kernel import Kernel, MemoryReader, ReaderLimits, SandboxPolicy
from scrollctx.kernel._quota import cpu_seconds
from scrollctx.kernel._reader_host import NOT_STARTED
from scrollctx.log import EventLog, Kind, NewEvent
from scrollctx.surface import (
    Budgets,
    Encoder,
    MemorySurface,
    RemoteSurface,
    embed_pending,
    open_surface,
)
from scrollctx.surface._filters import Binding

_MIB = 1024**2
_LIFTED = ReaderLimits(address_space=4096 * _MIB, heap=None, value_bytes=None)
_FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventLog]:
    log = EventLog.open(tmp_path / "store" / "history.db")
    log.append_many(
        NewEvent(session_id="s", kind=Kind.CONVERSATION, role="user", content=f"row {i} text")
        for i in range(40)
    )
    yield log
    log.close()


def _remote(
    log: EventLog, limits: ReaderLimits, budgets: Budgets | None = None
) -> tuple[RemoteSurface, MemoryReader]:
    reader = MemoryReader(
        log.path, Binding("s"), policy=SandboxPolicy(), budgets=budgets, limits=limits
    )
    return RemoteSurface(reader.request, Binding("s"), budgets or Budgets()), reader


# -- the same ms, through the kernel -------------------------------------------------------------

_CELL_CALLS = [
    "ms.search('adoption agencies', k=2)",
    "ms.search('adoption', kind='conversation', seq_range=(1, 10**30), chars=20)",
    "ms.search('x', k=0)",
    "ms.expand([1, 2, 999])",
    "ms.expand(4, 1)",
    "ms.expand('abc')",
    "ms.sql_query('SELECT seq, length(content) AS n FROM hist.conversation_history LIMIT 3')",
    "ms.sql_query(\"SELECT x'00ff' AS b, 1e999 AS inf, NULL AS nothing\")",
    "ms.sql_query('DELETE FROM hist.conversation_history')",
    "ms.sql_query('SELECT * FROM missing')",
    "ms.sessions()",
    "ms.session('seed')",
    "ms.recall_tool('nope')",
    "ms.index()",
    "ms.has_fts5",
    "ms.days_between('2024-01-01', '2024-03-01')",
]


def _probe(ms: object, calls: list[str] = _CELL_CALLS) -> str:
    """Run every call of ``calls`` on ``ms``; return one line per outcome."""
    lines = []
    for call in calls:
        try:
            value = eval(call, {"ms": ms})  # noqa: S307 - the fixed calls above
        except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
            lines.append(f"{call} -> {type(exc).__name__}: {exc}")
            continue
        flags = (value.notes, value.partial, value.truncated) if hasattr(value, "notes") else ()
        lines.append(f"{call} -> {type(value).__name__} {value!r} {flags}")
    return "\n".join(lines)


def test_ms_in_a_cell_answers_exactly_as_in_process(shared: Session) -> None:
    source = Path(__file__).read_text()
    probe = source[source.index("_CELL_CALLS = [") : source.index("def test_ms_in_a_cell")]
    result = shared.kernel.run_cell(probe + "print(_probe(ms))\nprint(ms.help())")
    assert result.ok, result.error
    with open_surface(shared.log.path, session_id="k1") as local:
        expected = _probe(local) + "\n" + local.help() + "\n"
        notes = local.drain_notes()
    assert result.stdout == expected
    assert list(result.notes) == list(dict.fromkeys(notes))
    assert shared.kernel.ms_state == "bound"


def test_blobs_cross_as_bytes(shared: Session) -> None:
    result = shared.kernel.run_cell("v = ms.sql_query(\"SELECT x'00ff10' AS b\")[0]['b']\nv")
    assert result.stdout == "b'\\x00\\xff\\x10'\n"


_SEMANTIC_TEXTS = [
    "I can't stand cilantro, it tastes like soap to me.",
    "We adopted a rescue greyhound named Pixel last spring.",
    "The deploy failed because the TLS certificate expired.",
    "Sprint planning moved to Thursday mornings at nine.",
]
_MODE_CALLS = [
    f"ms.search({question!r}, k=3, mode={mode!r})"
    for question in ("which herb do I dislike", "the dog we adopted")
    for mode in ("bm25", "semantic", "hybrid", None)
] + ["ms.search('herb', mode='dense')"]


def test_every_search_mode_answers_in_a_cell_as_in_process(
    tmp_path: Path, semantic_encoder: Encoder
) -> None:
    # mode= crosses to the reader, which loads the encoder inside its own sandbox: each mode
    # ranks, fuses and notes exactly as in-process (a hit says which channel found it).
    log = EventLog.open(tmp_path / "store" / "history.db")
    log.append_many(
        NewEvent(session_id="s", kind=Kind.CONVERSATION, role="user", content=text)
        for text in _SEMANTIC_TEXTS
    )
    embed_pending(log, semantic_encoder)
    source = Path(__file__).read_text()
    probe = source[source.index("_CELL_CALLS = [") : source.index("def test_ms_in_a_cell")]
    with Kernel(event_log=log, session_id="s", scratch=tmp_path / "scratch") as kernel:
        result = kernel.run_cell(probe + f"print(_probe(ms, {_MODE_CALLS!r}))")
        with open_surface(log.path, session_id="s") as local:
            expected = _probe(local, _MODE_CALLS) + "\n"
    assert result.ok, result.error
    assert result.stdout == expected
    assert "'channel': 'semantic'" in expected and "'channel': 'both'" in expected
    log.close()


def _readers_of_this_host() -> set[int]:
    """Pids of memory reader processes descending from this test process (read from /proc)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        try:
            parents[int(entry.name)] = int(
                (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            )
        except (ValueError, OSError):
            continue
    found = set()
    for pid in parents:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1, os.getpid()):
            ancestor = parents.get(ancestor)
        if ancestor == os.getpid() and b"scrollctx.kernel._reader" in command[:4]:
            found.add(pid)
    return found


def test_the_first_ms_call_in_a_cell_starts_the_reader(tmp_path: Path) -> None:
    # Kernel.start boots the worker alone: no reader process exists until a cell calls ms.
    before = _readers_of_this_host()
    session = open_session(tmp_path, start_reader=False)
    try:
        kernel, reader = session.kernel, session.kernel.reader
        assert reader is not None and kernel.pid is not None
        assert kernel.run_cell("print(6 * 7)").stdout == "42\n"
        assert reader.pid is None and reader.status is None
        assert _readers_of_this_host() == before
        assert (
            kernel.ms_state
            == NOT_STARTED
            == "not started yet: the memory reader starts on the first ms call"
        )
        result = kernel.run_cell("print(len(ms.search('adoption')))")
        assert result.stdout == "1\n", result.error
        assert not result.interrupted and not result.timed_out  # a call in time is not cut
        assert reader.pid is not None and _readers_of_this_host() == before | {reader.pid}
        assert kernel.ms_state == "bound" and reader.status is not None and reader.status.holds
        logged = [e for e in session.log.session_events("k1") if "memory_reader" in e.metadata]
        assert [e.content.split(" (")[0] for e in logged] == [
            "memory reader started on the first ms call"
        ]
        assert kernel.run_cell("print(len(ms.search('adoption')))").stdout == "1\n"
        assert (
            len([e for e in session.log.session_events("k1") if "memory_reader" in e.metadata]) == 1
        )
    finally:
        session.kernel.close()
        session.log.close()


def test_a_reader_whose_layers_do_not_hold_refuses_the_call_naming_the_opt_out(
    tmp_path: Path,
) -> None:
    # The worker's layers hold; the reader's do not (landlock treated as missing for the reader
    # alone, the documented test knob): strict refuses its first call, and every later one.
    before = _readers_of_this_host()
    session = open_session(tmp_path, start_reader=False)
    try:
        reader = session.kernel.reader
        assert reader is not None
        reader.policy = SandboxPolicy(unavailable=frozenset({"landlock"}))
        result = session.kernel.run_cell("ms.search('adoption')")
        assert result.error is not None and not result.refused and not result.namespace_lost
        assert (
            "RuntimeError: ms is not available in this kernel: the memory reader's sandbox "
            "does not hold here: landlock (unavailable" in result.error
        )
        assert "opt out explicitly: Kernel(sandbox='best-effort') or 'off'" in result.error
        assert reader.pid is None and _readers_of_this_host() == before
        again = session.kernel.run_cell(
            "try:\n    ms.expand(1)\nexcept RuntimeError as e:\n    print(e)"
        )
        assert "does not hold here: landlock" in again.stdout and reader.pid is None
        refused = [e for e in session.log.session_events("k1") if e.metadata.get("refused")]
        assert len(refused) == 1 and refused[0].content.startswith(
            "memory reader refuses to read the store: required sandbox layer(s) not holding: "
            "landlock"
        )
        assert refused[0].metadata["memory_reader"]["layers"]["landlock"]["state"] == "unavailable"
    finally:
        session.kernel.close()
        session.log.close()


def test_a_reader_that_fails_to_start_is_an_observation_of_that_cell(tmp_path: Path) -> None:
    session = open_session(
        tmp_path, start_reader=False, reader_limits=ReaderLimits(boot_timeout=0.001)
    )
    try:
        session.kernel.run_cell("kept = 1")
        result = session.kernel.run_cell("ms.search('adoption')")
        assert result.error is not None and not result.namespace_lost
        assert (
            "RuntimeError: ms is not available in this kernel: the memory reader failed to "
            "start (it did not report ready in time)" in result.error
        )
        assert session.kernel.run_cell("print(kept)").stdout == "1\n"
        assert session.kernel.reader is not None and session.kernel.reader.pid is None
    finally:
        session.kernel.close()
        session.log.close()


def test_a_reader_that_cannot_be_spawned_is_an_observation_of_that_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its private folder cannot be made (the temporary folder is gone): the call fails with the
    # reason, the run goes on, and the next call tries again once the folder is back.
    session = open_session(tmp_path, start_reader=False)
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
        result = session.kernel.run_cell("ms.search('adoption')")
        assert result.error is not None and not result.namespace_lost
        assert "ms is not available in this kernel: the memory reader failed to start: " in (
            result.error
        )
        assert "No such file or directory" in result.error
        (tmp_path / "gone").mkdir()
        assert session.kernel.run_cell("print(len(ms.search('adoption')))").stdout == "1\n"
    finally:
        session.kernel.close()
        session.log.close()


def test_a_killed_reader_is_replaced_for_the_next_call(shared: Session) -> None:
    reader = shared.kernel.reader
    assert shared.kernel.run_cell("ms.has_fts5").ok
    assert reader is not None and reader.pid is not None
    first, restarts = reader.pid, reader.restarts
    os.kill(first, signal.SIGKILL)
    died = shared.kernel.run_cell("ms.search('adoption')")
    assert died.error is not None and "the memory reader was killed" in died.error
    assert "narrow it" in died.error and not died.namespace_lost
    start = shared.log.last_seq()
    again = shared.kernel.run_cell("print(len(ms.search('adoption')))")
    assert again.stdout == "1\n" and reader.pid not in (None, first)
    assert reader.restarts == restarts + 1
    logged = [e.content for e in shared.log.span(start + 1, shared.log.last_seq())]
    assert [c.split(" (")[0] for c in logged] == ["memory reader restarted"]


def test_the_reader_is_confined_and_its_layers_are_logged(shared: Session) -> None:
    # Read from the host: the reader's own report could be forged only by our own code.
    reader = shared.kernel.reader
    assert shared.kernel.run_cell("ms.has_fts5").ok
    assert reader is not None and reader.pid is not None and reader.status is not None
    assert reader.status.holds and {s.state for s in reader.status.layers} == {"ok"}
    status = dict(
        line.split(":\t", 1)
        for line in Path(f"/proc/{reader.pid}/status").read_text().splitlines()
        if ":\t" in line
    )
    assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1"
    assert all(int(status[key], 16) == 0 for key in ("CapEff", "CapPrm", "CapBnd"))
    for namespace in ("net", "mnt", "pid"):
        assert os.readlink(f"/proc/{reader.pid}/ns/{namespace}") != os.readlink(
            f"/proc/self/ns/{namespace}"
        )
    started = [e for e in shared.log.session_events("k1") if "memory_reader" in e.metadata]
    assert started[0].kind == Kind.SYSTEM and started[0].content.startswith("memory reader started")
    assert started[-1].metadata["memory_reader"]["layers"]["landlock"]["state"] == "ok"


def test_a_strict_reader_whose_sandbox_does_not_hold_reads_nothing(store: EventLog) -> None:
    reader = MemoryReader(
        store.path, Binding("s"), policy=SandboxPolicy(unavailable=frozenset({"landlock"}))
    )
    ms = RemoteSurface(reader.request, Binding("s"), Budgets())
    try:
        with pytest.raises(RuntimeError, match="the memory reader's sandbox does not hold here"):
            ms.search("row")
        assert reader.pid is None  # fail closed: no unconfined reader is left running
    finally:
        reader.close()


def test_a_file_that_is_not_a_store_leaves_ms_unavailable_with_the_reason(
    tmp_path: Path,
) -> None:
    bogus = tmp_path / "store" / "history.db"
    bogus.parent.mkdir()
    bogus.write_bytes(b"not sqlite" * 100)
    with Kernel(bogus, scratch=tmp_path / "scratch") as kernel:
        result = kernel.run_cell("ms.search('x')")
        assert result.error is not None and "ms is not available in this kernel" in result.error
        assert "IntegrityError" in kernel.ms_state


def test_a_store_no_writer_holds_open_is_read_and_seen_as_it_grows(tmp_path: Path) -> None:
    # The last writer to close deletes the store's -wal and -shm, and the confined reader can
    # create neither: the kernel's host keeps them while the reader may need them.
    db = tmp_path / "store" / "history.db"
    adoption = NewEvent(session_id="s", kind=Kind.CONVERSATION, role="user", content="adoption")
    with EventLog.open(db) as log:
        log.append(adoption)
    assert sorted(p.name for p in db.parent.iterdir()) == ["history.db"]
    with Kernel(db, scratch=tmp_path / "scratch") as kernel:
        first = kernel.run_cell("print(len(ms.search('adoption')))")
        assert first.stdout == "1\n", first.error
        with EventLog.open(db) as log:  # another writer comes and goes while the kernel lives
            log.append(adoption)
        assert kernel.run_cell("print(len(ms.search('adoption')))").stdout == "2\n"
    assert sorted(p.name for p in db.parent.iterdir()) == ["history.db", "payloads"]


# -- budgets, each on its own ----------------------------------------------------------------


def test_the_heap_limit_stops_a_query_that_allocates(store: EventLog) -> None:
    ms, reader = _remote(store, ReaderLimits(address_space=4096 * _MIB, heap=32 * _MIB,
                                             value_bytes=None))  # fmt: skip
    try:
        with pytest.raises(QueryError, match="ran out of memory: the memory reader allows 32 MiB"):
            ms.sql_query("SELECT length(randomblob(200000000)) AS n")
        assert ms.sql_query("SELECT 1 AS one")[0] == {"one": 1} and reader.restarts == 0
    finally:
        reader.close()


def test_the_value_limit_stops_a_big_blob_at_once(store: EventLog) -> None:
    ms, reader = _remote(store, ReaderLimits(address_space=4096 * _MIB, heap=None,
                                             value_bytes=_MIB))  # fmt: skip
    try:
        with pytest.raises(QueryError, match="one value may hold at most 1,048,576 bytes"):
            ms.sql_query("SELECT length(randomblob(5000000)) AS n")
    finally:
        reader.close()


def test_the_address_space_limit_stops_what_sqlite_does_not_count(store: EventLog) -> None:
    ms, reader = _remote(store, ReaderLimits(address_space=256 * _MIB, heap=None,
                                             value_bytes=None))  # fmt: skip
    try:
        with pytest.raises(QueryError, match="ran out of memory"):
            ms.sql_query("SELECT length(randomblob(400000000)) AS n")
        assert ms.sql_query("SELECT 2 AS two")[0] == {"two": 2}
    finally:
        reader.close()


def test_the_time_budget_cuts_a_query_that_would_run_forever(store: EventLog) -> None:
    # The progress handler alone: the host's own deadline is far away.
    ms, reader = _remote(store, ReaderLimits(grace=60.0), Budgets(seconds=0.3))
    try:
        rows = ms.sql_query(_FOREVER)
        assert rows.partial and rows == [] and "ran past the 0.3s time budget" in rows.notes[0]
        assert reader.restarts == 0
    finally:
        reader.close()


def test_the_host_kills_a_call_the_progress_handler_cannot_stop(store: EventLog) -> None:
    # One long SQLite step (no progress callbacks) with no memory limit to stop it: only the
    # host's deadline (budget + grace) does, and the next call gets a fresh reader.
    ms, reader = _remote(
        store,
        ReaderLimits(address_space=4096 * _MIB, heap=None, value_bytes=None, grace=0.3),
        Budgets(seconds=0.2),
    )
    try:
        started = time.monotonic()
        with pytest.raises(QueryError, match="did not finish within 0.5 s .* reader was killed"):
            ms.sql_query("SELECT length(randomblob(900000000)) AS n")
        assert time.monotonic() - started < 5
        assert ms.sql_query("SELECT 3 AS three")[0] == {"three": 3} and reader.restarts == 1
    finally:
        reader.close()


def test_the_row_and_byte_budgets_cross_with_their_flags(store: EventLog) -> None:
    ms, reader = _remote(store, _LIFTED, Budgets(rows=10, bytes=100))
    try:
        capped = ms.sql_query("SELECT seq FROM hist.conversation_history")
        assert len(capped) == 10 and capped.truncated and capped.partial
        assert "hit the 10-row cap" in capped.notes[0]
        cut = ms.sql_query("SELECT seq, content FROM hist.conversation_history LIMIT 9")
        assert 0 < len(cut) < 9 and cut.partial and not cut.truncated
        assert "100-byte budget ran out" in cut.notes[0]
        assert ms.drain_notes() == [*capped.notes, *cut.notes]
    finally:
        reader.close()


def test_a_reply_over_the_reply_limit_is_an_error_saying_so(store: EventLog) -> None:
    ms, reader = _remote(store, ReaderLimits(address_space=4096 * _MIB, heap=None,
                                             value_bytes=None, reply_bytes=_MIB))  # fmt: skip
    try:
        with pytest.raises(QueryError, match="over the 1,048,576-byte limit of one ms call"):
            ms.sql_query("SELECT randomblob(2000000) AS b")
        assert reader.restarts == 0
    finally:
        reader.close()


@pytest.mark.parametrize(
    "over_channel", [True, False], ids=["over-the-channel", "through-the-host"]
)
def test_a_cell_timeout_interrupts_its_ms_call_and_keeps_the_namespace(
    tmp_path: Path, over_channel: bool
) -> None:
    # Through the host: the kernel's first ms call (it starts the reader), which the host
    # interrupts at the cell's deadline and then gives the cell its grace to stop.
    session = open_session(tmp_path, start_reader=over_channel, timeout=0.5, grace=2.0,
                           budgets=Budgets(seconds=30.0))  # fmt: skip
    try:
        session.kernel.run_cell("kept = 'yes'")
        result = session.kernel.run_cell(f"ms.sql_query({_FOREVER!r})")
        assert result.interrupted and not result.namespace_lost, result.error
        reader = session.kernel.reader
        assert reader is not None and reader.restarts == 0
        assert session.kernel.run_cell("print(kept, len(ms.expand(1)))").stdout == "yes 1\n"
    finally:
        session.kernel.close()
        session.log.close()


def test_a_query_bomb_from_a_cell_costs_the_host_nothing(shared: Session) -> None:
    # Attack 7 through the kernel: 400 MB of random bytes once went through the host.
    result = shared.kernel.run_cell("ms.sql_query('SELECT randomblob(400000000) AS b')")
    assert result.error is not None and "QueryError" in result.error
    assert "string or blob too big" in result.error and result.duration < 5
    assert shared.kernel.run_cell("print(len(ms.search('adoption')))").stdout == "1\n"


_BLOB_CELL = "b = ms.sql_query('SELECT randomblob(9000000) AS b')[0]['b']\nprint(len(b))"
_BLOB_REPLY = 4 * 9_000_000 // 3  # base64


def _host_peak(kernel: Kernel, cell: str) -> tuple[str, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = kernel.run_cell(cell)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.ok, result.error
    return result.stdout, peak


def test_the_host_forwards_a_large_reply_without_copying_it(tmp_path: Path) -> None:
    # The first ms call of a kernel goes through the host (it starts the reader): 9 MB of blob
    # crosses as ~12 MiB of JSON, which the host reads into one buffer and hands to the
    # worker's pipe as it is (no decoding, no copy, no re-framing).
    session = open_session(tmp_path, start_reader=False)
    try:
        stdout, peak = _host_peak(session.kernel, _BLOB_CELL)
        assert stdout == "9000000\n"
        assert _BLOB_REPLY < peak < 1.5 * _BLOB_REPLY, peak
    finally:
        session.kernel.close()
        session.log.close()


def test_later_calls_go_straight_to_the_reader_past_the_host(tmp_path: Path) -> None:
    # Once the reader serves the worker's channel, the same reply never enters the host.
    session = open_session(tmp_path)
    try:
        assert session.kernel.reader is not None and session.kernel.reader.has_channel
        stdout, peak = _host_peak(session.kernel, _BLOB_CELL)
        assert stdout == "9000000\n" and peak < _MIB, peak
    finally:
        session.kernel.close()
        session.log.close()


def test_in_process_ms_is_unchanged_by_the_reader_options(store: EventLog) -> None:
    # The CLI and the reader share MemorySurface; only the reader passes a value limit.
    with open_surface(store.path) as ms:
        assert isinstance(ms, MemorySurface)
        assert ms.sql_query("SELECT length(randomblob(20000000)) AS n")[0]["n"] == 20_000_000


_READER_HOST = f"""
import sys
from pathlib import Path
from scrollctx.kernel import MemoryReader, SandboxPolicy
from scrollctx.surface import Budgets, RemoteSurface
from scrollctx.surface._filters import Binding

budgets = Budgets(seconds=600)
policy = SandboxPolicy(sys.argv[2], unavailable=frozenset(sys.argv[3:]))
reader = MemoryReader(Path(sys.argv[1]), Binding("s"), policy=policy, budgets=budgets)
reader.wait_ready()
print(reader.pid, flush=True)
RemoteSurface(reader.request, Binding("s"), budgets).sql_query({_FOREVER!r})
"""


def _in_query(pid: int, before: float) -> bool:
    # Running, and past what its boot and idle wait could have used since it reported ready:
    # only the endless query burns CPU there (a reader that is merely runnable once, just
    # after its ready frame, is not in the query yet: killing the host then would test the
    # control pipe closing, not the death signal).
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    used = cpu_seconds(pid)
    return state == "R" and used is not None and used - before >= 0.2


@pytest.mark.parametrize("sandbox", [("strict",), ("best-effort", "namespaces")])
def test_a_reader_busy_in_a_query_dies_with_its_killed_host(
    store: EventLog, sandbox: tuple[str, ...]
) -> None:
    # Its control pipe closing does not stop a reader inside a 600 s query: its death signal
    # does. Under strict, bwrap's (--die-with-parent, for bwrap and its child); without the
    # namespaces layer, the reader's own PR_SET_PDEATHSIG, set before its boot frame. Both
    # follow the host's spawner thread.
    command = [sys.executable, "-c", _READER_HOST, str(store.path), *sandbox]
    host = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert host.stdout is not None
    pid = int(host.stdout.readline())
    exited = os.pidfd_open(pid)
    before = cpu_seconds(pid) or 0.0
    try:
        deadline = time.monotonic() + 30
        while not _in_query(pid, before) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the reader's state from outside: it runs the query
        assert _in_query(pid, before), "the reader never started the query"
        host.kill()
        host.wait()
        assert select.select([exited], [], [], 30)[0], "the reader outlived its host"
    finally:
        os.close(exited)
        host.stdout.close()
        if os.path.exists(f"/proc/{pid}/status"):
            os.kill(pid, signal.SIGKILL)
