"""A throwaway PostgreSQL server on loopback for the tests (a real server, not a double).

``initdb`` makes a cluster in a temporary folder; ``pg_ctl`` starts it on a free port of
127.0.0.1 with password (scram) authentication for TCP clients. PostgreSQL refuses to run as
root, so under root (CI) the server runs as the ``postgres`` user Debian's package creates (or
``nobody``). Missing binaries or psycopg are reported through :func:`needs.missing`: a skip
locally, a failure under ``SCROLL_CI=1``. A watcher process holds a pipe from the test run and
stops the server when that pipe closes, so a killed test run leaves no server behind.

Fixtures: ``postgres_server`` (one per test session) and ``postgres_url`` (a fresh, empty
database per test, reached as the server's superuser).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from needs import import_or_missing, missing

ADMIN = "scroll_admin"
ADMIN_PASSWORD = "admin-secret"
# Blocks until the test run's end of the pipe closes (however the run ended), then stops
# the postmaster at once (SIGQUIT: immediate shutdown).
_WATCHER = (
    "import os, signal, sys\n"
    "sys.stdin.buffer.read()\n"
    "try:\n    os.kill(int(sys.argv[1]), signal.SIGQUIT)\n"
    "except ProcessLookupError:\n    pass\n"
)


def find_bindir() -> Path | None:
    """Return the folder holding ``initdb`` and ``pg_ctl`` (PATH first, then Debian's)."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(os.path.realpath(on_path)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version_key)
    return Path(found[-1]).parent if found else None


def _version_key(path: str) -> int:
    version = Path(path).parts[-3]
    return int(version) if version.isdigit() else 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in a temporary folder, started and stopped with ``pg_ctl``."""

    def __init__(self, bindir: Path, root: Path, user: str | None) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.user = user
        self.port = _free_port()
        self._names = itertools.count(1)
        self._watcher: subprocess.Popen[bytes] | None = None

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            user=self.user,
            cwd=self.root,
            check=False,
        )
        if done.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{args[0]} failed: {done.stderr.strip()}\n{log}")

    def init(self) -> None:
        """Create the cluster with a password-protected superuser."""
        pwfile = self.root / "pwfile"
        pwfile.write_text(ADMIN_PASSWORD + "\n")
        self._chown(pwfile)
        self._run(
            "initdb", "-D", str(self.data), "-U", ADMIN, f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip

    def start(self, *, durable: bool = False) -> None:
        """Start (or restart after :meth:`stop`) on the same port; wait until it accepts.

        Tests run without fsync (the machine does not crash under them; a stopped server still
        recovers from its WAL); ``durable`` keeps PostgreSQL's defaults, for benchmarks.
        """
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
        options += "-c max_connections=200"
        if not durable:
            options += " -c fsync=off -c full_page_writes=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
            "-o", options, "start",
        )  # fmt: skip
        postmaster = (self.data / "postmaster.pid").read_text().split()[0]
        self._watcher = subprocess.Popen(
            [sys.executable, "-c", _WATCHER, postmaster], stdin=subprocess.PIPE
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` aborts open transactions, ``immediate`` is a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
        if self._watcher is not None:
            assert self._watcher.stdin is not None
            self._watcher.stdin.close()
            self._watcher.wait()
            self._watcher = None

    def url(self, database: str, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> str:
        """Return a ``postgresql://`` URL for ``database`` on this server."""
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    def admin(self, database: str = "postgres") -> Any:
        """Open an autocommit superuser connection (psycopg) to ``database``."""
        psycopg = import_or_missing("psycopg")
        return psycopg.connect(self.url(database), autocommit=True)

    def create_database(self) -> str:
        """Create a fresh empty database and return its name."""
        name = f"scroll_test_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def _chown(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)


def server_user() -> str | None:
    """Who runs the server: nobody special as a normal user; under root, an unprivileged one."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise LookupError("running as root and no unprivileged user (postgres, nobody) to run as")


@contextmanager
def throwaway_server(bindir: Path, *, durable: bool = False) -> Iterator[PostgresServer]:
    """Make, start and finally delete a cluster in a temporary folder (see the module doc)."""
    root = Path(tempfile.mkdtemp(prefix="scroll-pg-"))
    server = PostgresServer(bindir, root, server_user())
    server._chown(root)
    try:
        server.init()
        server.start(durable=durable)
        yield server
    finally:
        try:
            server.stop("immediate")
        except RuntimeError:
            pass  # already stopped (a test that stopped it failed before restarting)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server on 127.0.0.1 for the whole test session."""
    import_or_missing("psycopg")
    import_or_missing("psycopg_pool")
    bindir = find_bindir()
    if bindir is None:
        missing("PostgreSQL server binaries (initdb, pg_ctl) not found; apt-get install postgresql")
    try:
        with throwaway_server(bindir) as server:
            yield server
    except LookupError as exc:
        missing(str(exc))


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the test server, as a superuser URL."""
    return postgres_server.url(postgres_server.create_database())
