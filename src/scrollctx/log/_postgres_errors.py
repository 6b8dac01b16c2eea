"""Translate psycopg's exceptions into the Event Log's, by type, at one boundary.

Server-reported errors carry a SQLSTATE, and psycopg raises one class per SQLSTATE: those are
mapped by class, most specific first. A failure to *connect* carries none (libpq reports only
text), so :func:`connect_error` tells "the server is not there" from "the server said no" by
probing the address itself, never by reading the message.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg import errors as pg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from scrollctx.errors import StoreAccessDenied, StoreError, StoreUnavailable, UsageError

__all__ = ["connect_error", "describe", "is_connection_loss", "translate"]

_LOST = (pg.AdminShutdown, pg.CrashShutdown, pg.CannotConnectNow, pg.ConnectionException)
_DENIED = (pg.InsufficientPrivilege, pg.InvalidAuthorizationSpecification, pg.InvalidPassword)
_DOCS = "see docs/postgres.md, Roles"


def describe(conninfo: str) -> str:
    """Return ``user@host:port/dbname`` for messages (never the password).

    Raises:
        UsageError: the URL cannot be parsed; the message repeats no part of its password.
    """
    if "@" in urlsplit(conninfo).netloc.rpartition("@")[0]:
        # libpq ends the user and password at the first '@': the rest would become the host.
        raise UsageError(
            "the store URL has an '@' inside its user or password: write it as %40 there"
        )
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:  # libpq quotes the bad token: it may be a secret
        reason = _without_secrets(_first_line(exc), conninfo)
        raise UsageError(f"the store URL is not a valid PostgreSQL URL: {reason}") from None
    host = params.get("host") or "localhost"
    return (
        f"{params.get('user') or '(default user)'}@{host}:{params.get('port') or 5432}"
        f"/{params.get('dbname') or '(default database)'}"
    )


def is_connection_loss(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection is gone (the server may be back soon)."""
    if isinstance(exc, (PoolTimeout, *_LOST)):
        return True
    # A client-side OperationalError has no SQLSTATE: the socket broke or never opened.
    return type(exc) is psycopg.OperationalError and exc.sqlstate is None


def translate(exc: psycopg.Error | PoolTimeout, where: str, action: str) -> StoreError:
    """Return the StoreError for ``exc`` raised while doing ``action`` on store ``where``."""
    if is_connection_loss(exc):
        return StoreUnavailable(
            f"{action} on {where} failed: lost the connection to PostgreSQL ({_first_line(exc)}); "
            "nothing unacknowledged was kept half-written — check that the server is up, then "
            "retry (appends with dedup keys are never doubled)"
        )
    if isinstance(exc, pg.ReadOnlySqlTransaction):
        return StoreAccessDenied(
            f"{action} on {where} refused: the server is read-only ({_first_line(exc)}); "
            "point the store URL at the primary, not a standby"
        )
    if isinstance(exc, _DENIED):
        return StoreAccessDenied(
            f"{action} on {where} refused: {_first_line(exc)}; this role may not {action} — "
            f"use the writer role for appends and the read-only role for reading ({_DOCS})"
        )
    return StoreError(f"{action} on {where} failed: {_first_line(exc)}")


def connect_error(exc: psycopg.OperationalError, conninfo: str) -> StoreError:
    """Return the StoreError for a failed first connection to the server in ``conninfo``."""
    where = describe(conninfo)
    if not _reachable(conninfo):
        return StoreUnavailable(
            f"cannot reach PostgreSQL for {where}: {_first_line(exc)}; start the server or fix "
            "the host and port in the store URL"
        )
    return StoreAccessDenied(
        f"PostgreSQL refused the connection for {where}: {_last_line(exc)}; check the user, "
        f"password (PGPASSWORD or ~/.pgpass) and database name in the store URL ({_DOCS})"
    )


def _reachable(conninfo: str) -> bool:
    """Whether something listens at the first host and port of ``conninfo``."""
    params = conninfo_to_dict(conninfo)
    host = str(params.get("host") or "/var/run/postgresql").split(",")[0]
    port = int(str(params.get("port") or 5432).split(",")[0])
    try:
        if host.startswith("/"):
            with socket.socket(socket.AF_UNIX) as probe:
                probe.settimeout(2)
                probe.connect(str(Path(host) / f".s.PGSQL.{port}"))
        else:
            socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


def _without_secrets(text: str, url: str) -> str:
    """``text`` with the URL's password (as written and decoded) shown as ``***``."""
    parts = urlsplit(url)
    written = [parts.password or ""]
    written += [value for key, _, value in (p.partition("=") for p in parts.query.split("&"))
                if key == "password"]  # fmt: skip
    for secret in sorted({*written, *map(unquote, written)} - {""}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _last_line(exc: BaseException) -> str:
    # libpq prefixes a refused login with the address it tried; the server's reason is last.
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
