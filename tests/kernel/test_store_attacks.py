"""Attacks on the Event Log's files from a cell: the worker holds no path to them at all.

``ms`` is answered by the memory reader, so the worker has no descriptor, mapping or Landlock
rule for the store's database, ``-wal``, ``-shm`` or ``payloads/``, and its mount namespace does
not contain them. Each defence is shown on its own: every attack runs under Landlock alone, at
each ABI from 1 to 7 (the namespaces layer taken away: what the doctor calls strict on Debian 12
and Ubuntu 22.04 needs both, and each must hold alone), and under the mount namespace alone (no
Landlock). Afterwards the host still runs a cell, ``ms`` still answers, and the log passes
``quick_check`` and is byte for byte what it was (rows, last seq, sha256 of its files).
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kernel_helpers import Session, assert_host_unharmed, attack, open_session

from needs import missing
from scrollctx.kernel import SandboxPolicy
from scrollctx.kernel._landlock import abi_version
from scrollctx.kernel._namespace import launch_problem
from scrollctx.log import EventLog, NewEvent

_BLOCKED = {errno.EACCES, errno.ENOENT}
"""An open of a store file: Landlock refuses it (EACCES), or it does not exist (ENOENT)."""


@dataclass(frozen=True)
class Defence:
    """One layer that keeps the store out of reach, with the others that would also do it off."""

    name: str
    policy: SandboxPolicy

    @property
    def namespaces(self) -> bool:
        """Whether the mount namespace is the defence here."""
        return "namespaces" not in self.policy.unavailable


DEFENCES = [
    Defence(
        f"landlock-abi{n}", SandboxPolicy("best-effort", frozenset({"namespaces"}), landlock_abi=n)
    )  # fmt: skip
    for n in range(1, 8)
] + [Defence("mount-namespace", SandboxPolicy("best-effort", frozenset({"landlock"})))]


@pytest.fixture(scope="module", params=DEFENCES, ids=[d.name for d in DEFENCES])
def defence(request: pytest.FixtureRequest) -> Defence:
    chosen: Defence = request.param
    abi = chosen.policy.landlock_abi
    if abi is not None and abi > abi_version():
        missing(f"this kernel's Landlock ABI is {abi_version()}, below {abi}")
    if chosen.namespaces and (problem := launch_problem(sys.executable)) is not None:
        missing(f"the namespaces layer is unavailable here: {problem}")
    return chosen


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, defence: Defence) -> Iterator[Session]:
    """A kernel whose worker has only this defence between it and the store (and seccomp)."""
    root = tmp_path_factory.mktemp(f"store-{defence.name}")
    session = open_session(root, sandbox=defence.policy, timeout=5.0, grace=1.0)
    status = session.kernel.status
    assert status is not None and [s.name for s in status.layers if not s.holds] == sorted(
        defence.policy.unavailable
    ), status.summary()
    yield session
    session.kernel.close()
    session.log.close()


def _store_files(session: Session) -> list[str]:
    db = str(session.log.path)
    return [db, db + "-wal", db + "-shm"]


def _assert_ms_answers(session: Session) -> None:
    hits = session.kernel.run_cell("print(ms.search('adoption', k=1)[0]['seq'])")
    assert hits.ok and hits.stdout == "1\n", hits.error


def test_truncate_the_log_and_its_wal(shared: Session) -> None:
    # Attack 1: os.truncate on the files themselves, and through a descriptor.
    db, wal, _ = _store_files(shared)
    sizes = {path: os.path.getsize(path) for path in (db, wal)}
    cell = (
        "import os\nout = []\n"
        f"for path in {[db, wal]!r}:\n"
        "    for cut in (lambda: os.truncate(path, 0),\n"
        "                lambda: os.ftruncate(os.open(path, os.O_RDONLY), 0)):\n"
        "        try:\n            cut()\n            out.append('TRUNCATED')\n"
        "        except OSError as e:\n            out.append(e.errno)\nprint(out)"
    )
    result, before = attack(shared, cell)
    assert result.ok and "TRUNCATED" not in result.stdout, result.stdout
    by_path, through_fd = eval(result.stdout)[0::2], eval(result.stdout)[1::2]  # noqa: S307
    assert set(by_path) == {errno.EPERM}  # seccomp: Landlock governs it only from ABI 3
    assert set(through_fd) <= _BLOCKED
    assert {path: os.path.getsize(path) for path in (db, wal)} == sizes
    assert_host_unharmed(shared, before)
    _assert_ms_answers(shared)


def test_a_read_lock_on_the_wal_index_cannot_block_the_store_writers(shared: Session) -> None:
    # Attack 3: an OFD read lock on the WAL write-lock byte (offset 120) of -shm made every
    # writer of the store wait and fail "database is locked" for as long as the worker lived.
    cell = (
        "import fcntl, os, struct\nout = []\nheld = []\n"
        f"for path in {_store_files(shared)!r}:\n"
        "    try:\n        fd = os.open(path, os.O_RDONLY)\n"
        "        fcntl.fcntl(fd, fcntl.F_OFD_SETLK,\n"
        "                    struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 120, 1, 0))\n"
        "        held.append(fd)\n        out.append('LOCKED')\n"
        "    except OSError as e:\n        out.append(e.errno)\nprint(out)"
    )
    result, before = attack(shared, cell)
    assert result.ok and set(eval(result.stdout)) <= _BLOCKED, result.stdout  # noqa: S307
    assert_host_unharmed(shared, before)
    with EventLog.open(shared.log.path, lock_timeout=1.0) as other_writer:
        assert other_writer.append(NewEvent(session_id="late", kind="system", content="w")) > 0


def test_flock_the_log_or_reach_it_through_another_process(shared: Session) -> None:
    # Attack 10: flock(LOCK_EX) through a read-only descriptor; and the descriptors that hold
    # the store, the host's and the memory reader's, reached through /proc.
    reader = shared.kernel.reader
    assert reader is not None and reader.pid is not None
    theirs = [
        f"/proc/{pid}/fd/{fd}"
        for pid in (os.getpid(), reader.pid)
        for fd in os.listdir(f"/proc/{pid}/fd")
        if os.path.realpath(f"/proc/{pid}/fd/{fd}").startswith(str(shared.log.path))
    ]
    assert theirs  # the host and the reader do hold the store
    cell = (
        "import fcntl, os\nout = []\n"
        f"for path in {[*_store_files(shared), *theirs]!r}:\n"
        "    try:\n        fcntl.flock(os.open(path, os.O_RDONLY), fcntl.LOCK_EX)\n"
        "        out.append('LOCKED ' + path)\n"
        "    except OSError as e:\n        out.append(e.errno)\nprint(sorted(set(out)))"
    )
    result, before = attack(shared, cell)
    assert result.ok and set(eval(result.stdout)) <= _BLOCKED, result.stdout  # noqa: S307
    assert_host_unharmed(shared, before)
    _assert_ms_answers(shared)


def test_the_worker_holds_nothing_of_the_store_and_the_reader_only_reads_it(
    shared: Session,
) -> None:
    # Read from the host through /proc: the worker has no descriptor or mapping on the store;
    # the reader's descriptors are all O_RDONLY and its WAL index is mapped without write.
    _assert_ms_answers(shared)
    db = str(shared.log.path)
    reader = shared.kernel.reader
    assert reader is not None and reader.pid is not None and shared.kernel.pid is not None
    worker_fds, worker_maps = _store_handles(shared.kernel.pid, db)
    assert worker_fds == {} and worker_maps == []
    reader_fds, reader_maps = _store_handles(reader.pid, db)
    assert set(reader_fds) == {db, db + "-wal", db + "-shm"}
    assert set(reader_fds.values()) == {os.O_RDONLY}
    assert reader_maps and all(line.split()[1][1] == "-" for line in reader_maps)


def _store_handles(pid: int, db: str) -> tuple[dict[str, int], list[str]]:
    modes = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        if target.startswith(db):
            flags = Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0]
            modes[target] = int(flags, 8) & os.O_ACCMODE
    maps = [line for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if db in line]
    return modes, maps


def test_no_sqlite_connection_in_the_worker_reaches_the_log(shared: Session) -> None:
    # Every SQLite handle reachable through gc (ms's own used to be one) has no store attached,
    # and neither ATTACH (read-write or read-only) nor a direct open reaches the file.
    db = str(shared.log.path)
    cell = (
        "import gc, sqlite3\nms.search('adoption', k=1)\nout = []\n"
        "conns = [o for o in gc.get_objects() if isinstance(o, sqlite3.Connection)]\n"
        "conns.append(sqlite3.connect(':memory:'))\n"
        "for c in conns:\n"
        "    c.set_authorizer(None)\n"
        f"    out += [r[2] for r in c.execute('PRAGMA database_list') if r[2] == {db!r}]\n"
        "    for mode in ('rw', 'ro'):\n"
        "        try:\n"
        f'            c.execute("ATTACH \'file:{db}?mode=" + mode + "\' AS s")\n'
        "            out.append('ATTACHED ' + mode)\n"
        "        except sqlite3.OperationalError as e:\n            out.append(str(e))\n"
        "try:\n"
        f"    sqlite3.connect({db!r}).execute('DELETE FROM _meta')\n    out.append('OPENED')\n"
        "except sqlite3.OperationalError as e:\n    out.append(str(e))\n"
        "print(sorted(set(out)))"
    )
    result, before = attack(shared, cell)
    outcomes = eval(result.stdout)  # noqa: S307 - a list of strings printed by the cell
    assert len(outcomes) == 3 and all(o.startswith("unable to open database") for o in outcomes)
    assert_host_unharmed(shared, before)


def test_write_the_log_through_links_or_the_wal_index(shared: Session) -> None:
    db = str(shared.log.path)
    cell = (
        "import mmap, os\nout = []\n"
        f"os.symlink({db!r}, 'alias.db')\n"
        "for path, mode in [('alias.db', 'r+b'), ('alias.db', 'rb')]:\n"
        "    try:\n        open(path, mode)\n        out.append('OPENED')\n"
        "    except OSError as e:\n        out.append(e.errno)\n"
        f"try:\n    shm = os.open({db + '-shm'!r}, os.O_RDONLY)\n"
        "    mmap.mmap(shm, 32768, access=mmap.ACCESS_WRITE)\n    out.append('MAPPED')\n"
        "except OSError as e:\n    out.append(e.errno)\nprint(out)"
    )
    result, before = attack(shared, cell)
    assert result.ok and set(eval(result.stdout)) <= _BLOCKED, result.stdout  # noqa: S307
    assert_host_unharmed(shared, before)


def test_stat_of_the_store_shows_nothing(shared: Session, defence: Defence) -> None:
    # Attack 10: os.stat told existence, size and mtime of any path. The mount namespace is the
    # defence: the files do not exist there. Landlock does not govern stat, and the threat
    # model says so: under Landlock alone the sizes still show (pinned here, both ways).
    targets = [*_store_files(shared), str(shared.log.path.parent / "config.toml")]
    (shared.log.path.parent / "config.toml").write_text("[backends]\n")
    leaked = [os.stat(path).st_size for path in targets]
    cell = (
        "import os\nout = []\n"
        f"for path in {targets!r}:\n"
        "    try:\n        out.append(os.stat(path).st_size)\n"
        "    except OSError as e:\n        out.append(e.errno)\nprint(out)"
    )
    result, before = attack(shared, cell)
    expected = [errno.ENOENT] * 4 if defence.namespaces else leaked
    assert result.ok and eval(result.stdout) == expected, result.stdout  # noqa: S307
    assert_host_unharmed(shared, before)
