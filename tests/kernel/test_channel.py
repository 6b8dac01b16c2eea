"""``ms`` straight from the worker to its memory reader, past the host.

The first ``ms`` call of a worker goes through the host, which starts the reader and hands it the
far end of a socket pair the worker was started with; from then on calls cross worker -> reader
and back, and the host is off that path. Each check the host made on it is kept elsewhere, and
each is shown here on its own: the call's deadline (the host's watch over the reader's shared
call clock), the reader's CPU between cells (the same watch), the largest request (the
reader's own frame limit, the kernel's limit of one call), and a channel that breaks (the call
goes through the host, which says what became of the reader). Real worker and reader processes.
"""

from __future__ import annotations

import os
import select
from pathlib import Path

import pytest
from kernel_helpers import WORKER, channel_in_use, open_session

from scrollctx.kernel import Kernel, Limits, MemoryReader, ReaderLimits, SandboxPolicy
from scrollctx.log import EventLog
from scrollctx.surface import Budgets

_MIB = 1024**2
_FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
_LIFTED = ReaderLimits(address_space=4096 * _MIB, heap=None, value_bytes=None)


def _count_forwards(reader: MemoryReader) -> list[str]:
    # The host's own path to the reader, counted (the channel never calls it).
    calls: list[str] = []
    forward = reader.forward

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(str(args[2]))
        return forward(*args, **kwargs)  # type: ignore[arg-type]

    reader.forward = counted  # type: ignore[method-assign]
    return calls


def test_only_the_first_call_goes_through_the_host(tmp_path: Path) -> None:
    session = open_session(tmp_path, start_reader=False)
    try:
        reader = session.kernel.reader
        assert reader is not None
        forwarded = _count_forwards(reader)
        cell = "print(len(ms.search('adoption')), len(ms.expand(1, 3)), ms.has_fts5)"
        for _ in range(3):
            assert session.kernel.run_cell(cell).stdout == "1 3 True\n"
        assert forwarded == ["ms.search"] and reader.has_channel
    finally:
        session.kernel.close()
        session.log.close()


def test_the_host_s_watch_kills_a_call_over_the_channel_past_its_deadline(tmp_path: Path) -> None:
    # One long SQLite step (no progress callbacks), no memory limit: over the channel only the
    # host's watch on the reader's call clock stops it, at budget + grace.
    session = open_session(
        tmp_path,
        budgets=Budgets(seconds=0.2),
        reader_limits=ReaderLimits(
            address_space=4096 * _MIB, heap=None, value_bytes=None, grace=0.3
        ),  # fmt: skip
    )
    try:
        reader = session.kernel.reader
        assert reader is not None and reader.has_channel
        forwarded = _count_forwards(reader)
        bomb = "ms.sql_query('SELECT length(randomblob(900000000)) AS n')"
        result = session.kernel.run_cell(bomb)
        assert result.error is not None and "did not finish within 0.5 s" in result.error
        assert "memory reader was killed" in result.error and not result.namespace_lost
        assert result.duration < 5 and forwarded == ["ms.sql_query"]  # reported by the host
        again = session.kernel.run_cell("print(ms.sql_query('SELECT 3 AS three')[0])")
        assert again.stdout == "{'three': 3}\n" and reader.restarts == 1
    finally:
        session.kernel.close()
        session.log.close()


def test_a_thread_calling_the_reader_between_cells_gets_it_killed(tmp_path: Path) -> None:
    # The worker refuses ms between cells, but a cell can write to the channel itself: the
    # reader's CPU while no cell runs is budgeted as the worker's is.
    policy = SandboxPolicy(limits=Limits(idle_cpu=1.0))
    session = open_session(tmp_path, sandbox=policy, budgets=Budgets(seconds=5.0))
    try:
        reader = session.kernel.reader
        assert reader is not None and reader.pid is not None
        pid = reader.pid
        queued = "".join(
            f"os.write(w.channel.fd, frame({{'op': 'ms', 'call': {n}, 'method': 'sql_query', "
            f"'kwargs': {{'sql': {_FOREVER!r}}}}}))\n"
            for n in range(1000, 1010)
        )
        assert session.kernel.run_cell(WORKER + queued).ok  # ten 5 s queries, queued
        exited = os.pidfd_open(pid)
        try:
            assert select.select([exited], [], [], 30)[0], "the reader ran on between cells"
        finally:
            os.close(exited)
        told = session.kernel.run_cell("ms.has_fts5")
        assert told.error is not None and "while no cell was running" in told.error
        assert session.kernel.run_cell("print(ms.has_fts5)").stdout == "True\n"
    finally:
        session.kernel.close()
        session.log.close()


def test_the_reader_refuses_a_request_over_the_kernel_s_limit_on_the_channel(
    tmp_path: Path,
) -> None:
    # A limit of one call's arguments below the frame reader's own default (16 MiB) binds on
    # the channel too: the reader reads the header, closes the channel and lives on.
    session = open_session(tmp_path, max_tool_input=64 * 1024)
    try:
        reader = session.kernel.reader
        assert reader is not None and reader.pid is not None
        pid = reader.pid
        assert session.kernel.run_cell("ms.has_fts5").ok  # the channel is in use
        forged = (
            "try:\n"
            "    os.write(w.channel.fd, frame({'op': 'ms', 'call': 999, 'method': 'has_fts5', "
            "'kwargs': {}, 'pad': 'x' * 200_000}))\n"
            "except BrokenPipeError:\n    pass  # the reader hung up before taking it all\n"
            "try:\n    print(w.channel.read_body(time.monotonic() + 10))\n"
            "except (OSError, WorkerCrashed):\n    print('hung up')\n"  # end of file, or reset
        )
        result = session.kernel.run_cell(WORKER + "from scrollctx.errors import WorkerCrashed\n"
                                         + forged)  # fmt: skip
        assert result.stdout == "hung up\n", result.error
        assert reader.pid == pid  # it refused the frame; it did not die of it
        assert session.kernel.run_cell("print(ms.has_fts5)").stdout == "True\n"
    finally:
        session.kernel.close()
        session.log.close()


def test_bytes_that_are_not_a_request_make_the_reader_hang_up_not_crash(tmp_path: Path) -> None:
    with channel_in_use(tmp_path) as (session, reader):
        pid = reader.pid
        forged = (
            "from scrollctx.errors import WorkerCrashed\n"
            "from scrollctx.kernel._frames import HEADER\n"
            "os.write(w.channel.fd, HEADER.pack(5, 1) + b'nope!')\n"
            "try:\n    print(w.channel.read_body(time.monotonic() + 10))\n"
            "except (OSError, WorkerCrashed):\n    print('hung up')\n"
        )
        result = session.kernel.run_cell(WORKER + forged)
        assert result.stdout == "hung up\n", result.error
        assert reader.pid == pid
        assert session.kernel.run_cell("print(ms.has_fts5)").stdout == "True\n"


def test_the_host_refuses_an_ms_frame_over_the_kernel_s_limit(tmp_path: Path) -> None:
    # Through the host (the first call), the same frame is under the host's frame limit (a
    # result's allowance) but over the limit of one ms call: forged, so the worker is replaced.
    session = open_session(tmp_path, start_reader=False, max_tool_input=64 * 1024)
    try:
        forged = (
            "os.write(w.fd_out, frame({'op': 'ms', 'call': 999, 'method': 'has_fts5', "
            "'kwargs': {}, 'pad': 'x' * 200_000}))\ntime.sleep(3)\n"
        )
        result = session.kernel.run_cell(WORKER + forged)
        assert result.namespace_lost and result.error is not None
        assert "exceeds the 65,536-byte limit of one call" in result.error
        assert session.kernel.reader is not None and session.kernel.reader.pid is None
    finally:
        session.kernel.close()
        session.log.close()


def test_a_call_larger_than_16_mib_crosses_when_the_kernel_allows_it(tmp_path: Path) -> None:
    # max_tool_input above the frame reader's default: the reader reads what the kernel allows,
    # through the host (the first call) and over the channel.
    log = EventLog.open(tmp_path / "store" / "history.db")
    kernel = Kernel(event_log=log, scratch=tmp_path / "scratch", max_tool_input=32 * _MIB,
                    reader_limits=_LIFTED)  # fmt: skip
    try:
        cell = "print(ms.sql_query('SELECT length(?) AS n', ['x' * 17_000_000])[0]['n'])"
        for _ in range(2):
            result = kernel.run_cell(cell)
            assert result.stdout == "17000000\n", result.error
        assert kernel.reader is not None and kernel.reader.has_channel
        assert kernel.reader.restarts == 0
    finally:
        kernel.close()
        log.close()


def test_a_fresh_worker_gets_a_reader_of_its_own(tmp_path: Path) -> None:
    session = open_session(tmp_path)
    try:
        reader = session.kernel.reader
        assert reader is not None and reader.has_channel
        session.kernel.restart()
        forwarded = _count_forwards(reader)
        for _ in range(2):
            assert session.kernel.run_cell("print(ms.has_fts5)").stdout == "True\n"
        assert forwarded == ["ms.has_fts5"] and reader.has_channel
    finally:
        session.kernel.close()
        session.log.close()


def test_without_shared_memory_for_the_clock_every_call_goes_through_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No memfd (not Linux): no watch could bound a call over the channel, so none is made.
    monkeypatch.delattr(os, "memfd_create")
    session = open_session(tmp_path, start_reader=False)
    try:
        reader = session.kernel.reader
        assert reader is not None
        forwarded = _count_forwards(reader)
        for _ in range(3):
            assert session.kernel.run_cell("print(ms.has_fts5)").stdout == "True\n"
        assert forwarded == ["ms.has_fts5"] * 3 and not reader.has_channel
    finally:
        session.kernel.close()
        session.log.close()


def test_a_frame_the_worker_never_finishes_holds_the_reader_no_longer_than_a_call(
    tmp_path: Path,
) -> None:
    # A header for a thousand bytes, then one: the reader waits a call's budget for the rest,
    # then hangs up (it used to wait for ever, serving nothing else); the worker's next call
    # goes through the host.
    with channel_in_use(tmp_path, budgets=Budgets(seconds=0.5)) as (session, reader):
        pid = reader.pid
        stalled = (
            "from scrollctx.errors import WorkerCrashed\n"
            "from scrollctx.kernel._frames import HEADER\n"
            "os.write(w.channel.fd, HEADER.pack(1_000, 1) + b'{')\n"
            "try:\n    print(w.channel.read_body(time.monotonic() + 10))\n"
            "except (OSError, WorkerCrashed):\n    print('hung up')\n"
        )
        result = session.kernel.run_cell(WORKER + stalled)
        assert result.stdout == "hung up\n", result.error
        assert reader.pid == pid
        assert session.kernel.run_cell("print(ms.has_fts5)").stdout == "True\n"


def test_a_worker_that_stops_reading_replies_holds_the_reader_no_longer_than_a_call(
    tmp_path: Path,
) -> None:
    # Requests whose replies fill the socket, none read for longer than a call's budget: the
    # reader gives up writing and hangs up, and is still there to serve the next call.
    with channel_in_use(tmp_path, budgets=Budgets(seconds=0.5)) as (session, reader):
        pid = reader.pid
        flood = (
            "from scrollctx.errors import WorkerCrashed\n"
            "ask = frame({'op': 'ms', 'call': 7, 'method': 'sql_query', 'kwargs': "
            "{'sql': 'SELECT hex(zeroblob(200000)) AS h'}})\n"
            "for _ in range(40):\n"
            "    try:\n        os.write(w.channel.fd, ask)\n"
            "    except OSError:\n        break\n"
            "time.sleep(5)\n"  # the attack: replies left unread far past the budget
            "try:\n"
            "    while w.channel.read_body(time.monotonic() + 10) is not None:\n        pass\n"
            "    print('still open')\n"
            "except (OSError, WorkerCrashed):\n    print('hung up')\n"
        )
        result = session.kernel.run_cell(WORKER + flood)
        assert result.stdout == "hung up\n", result.error
        assert reader.pid == pid
        assert session.kernel.run_cell("print(ms.has_fts5)").stdout == "True\n"


def test_a_call_id_nested_to_the_decoder_s_limit_is_refused_not_fatal(tmp_path: Path) -> None:
    # The reader echoes a request's call id in its reply. A call id nested as deep as its JSON
    # decoder still reads was then too deep to encode one stack frame further down, and the
    # reader died of the RecursionError (the next call was told it had been killed during it).
    # It now answers only int call ids; the first depth it cannot decode closes the channel.
    with channel_in_use(tmp_path) as (session, reader):
        pid = reader.pid
        nested = (
            "from scrollctx.errors import WorkerCrashed\n"
            "from scrollctx.kernel._frames import HEADER\n"
            "refused = 0\n"
            "for depth in range(900, 1100):\n"
            "    call = '[' * depth + ']' * depth\n"
            "    head = json.dumps({'op': 'ms', 'method': 'has_fts5', 'kwargs': {}})[:-1]\n"
            "    body = (head + ', ' + json.dumps('call') + ': ' + call + '}').encode()\n"
            "    try:\n"
            "        os.write(w.channel.fd, HEADER.pack(len(body), 1) + body)\n"
            "        reply = w.channel.read_body(time.monotonic() + 10)\n"
            "    except (OSError, WorkerCrashed):\n"
            "        print('hung up after', refused > 0)\n"
            "        break\n"
            "    refused += b'call id' in reply\n"
        )
        result = session.kernel.run_cell(WORKER + nested)
        assert result.stdout == "hung up after True\n", result.error
        assert reader.pid == pid  # it refused them all; it did not die of one
        after = session.kernel.run_cell("print(ms.has_fts5)")
        assert after.stdout == "True\n", after.error
        assert reader.restarts == 0


def test_descriptors_sent_over_the_channel_never_reach_the_reader(tmp_path: Path) -> None:
    # A cell can attach descriptors to its requests (SCM_RIGHTS): the reader reads the channel
    # with read(), which takes no ancillary data, so the kernel closes each passed descriptor
    # as its bytes are read. None is ever open in the reader, however many are sent.
    with channel_in_use(tmp_path) as (session, reader):
        pid = reader.pid
        before = sorted(os.listdir(f"/proc/{pid}/fd"))
        passing = (
            "import array, socket\n"
            "sock = socket.socket(fileno=os.dup(w.channel.fd))\n"
            "mine = array.array('i', [w.channel.fd, w.fd_out, w.reader.fd] * 8)\n"
            "answered = 0\n"
            "for n in range(100):\n"
            "    ask = frame({'op': 'ms', 'call': 9000 + n, 'method': 'has_fts5', 'kwargs': {}})\n"
            "    sock.sendmsg([ask], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, mine)])\n"
            "    answered += b'\"ok\":true' in w.channel.read_body(time.monotonic() + 10)\n"
            "print(answered)\n"
        )
        result = session.kernel.run_cell(WORKER + passing)
        assert result.stdout == "100\n", result.error
        assert reader.pid == pid and sorted(os.listdir(f"/proc/{pid}/fd")) == before
