"""Resolved configuration, built once and passed down.

Precedence, highest first:

1. an explicit argument or command-line flag;
2. a ``SCROLL_*`` environment variable (``SCROLL_STORE``, ``SCROLL_LOCAL_DIR``, ``SCROLL_DEBUG``);
3. ``<store>/config.toml`` (read with :mod:`tomllib`);
4. the default.

Deep layers never read the environment: they receive a :class:`Config` or plain parameters.

A store is a folder (``history.db`` inside) or a ``postgresql://`` URL: a shared log. For a
shared log ``store_dir`` is this host's own folder (``SCROLL_LOCAL_DIR``, default ``./.scroll``):
its replica of the log for ``ms`` (``replicas/<name>/history.db``), workspaces and traces.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrollctx.errors import ConfigError

__all__ = ["DEFAULT_STORE", "Config", "is_store_url", "resolve_config"]

DEFAULT_STORE = ".scroll"
_CONFIG_FILE = "config.toml"
_URL_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class Config:
    """Where the store lives and the settings read from its ``config.toml``."""

    store_dir: Path
    debug: bool = False
    settings: Mapping[str, Any] = field(default_factory=dict)
    store_url: str | None = None
    """The ``postgresql://`` URL of a shared log (None: the log is ``store_dir/history.db``)."""

    @property
    def db_path(self) -> Path:
        """The local SQLite Event Log that ``ms`` reads: the store's file, or its replica."""
        if self.store_url is None:
            return self.store_dir / "history.db"
        return self.store_dir / "replicas" / replica_name(self.store_url) / "history.db"

    @property
    def store_label(self) -> str:
        """The store as a user named it, for messages (a URL shown without its password)."""
        return str(self.store_dir) if self.store_url is None else _without_password(self.store_url)

    @property
    def config_path(self) -> Path:
        """The optional ``config.toml`` inside the store."""
        return self.store_dir / _CONFIG_FILE


def resolve_config(
    store: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Resolve the configuration from an explicit store, the environment and the defaults."""
    env = os.environ if environ is None else environ
    location = str(store or env.get("SCROLL_STORE") or DEFAULT_STORE)
    debug = env.get("SCROLL_DEBUG", "").lower() in {"1", "true", "yes"}
    url = location if is_store_url(location) else None
    local = (env.get("SCROLL_LOCAL_DIR") or DEFAULT_STORE) if url else location
    store_dir = Path(local).expanduser()
    return Config(
        store_dir=store_dir, debug=debug, settings=_read_settings(store_dir), store_url=url
    )


def is_store_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a shared (PostgreSQL) store rather than a folder."""
    return str(location).startswith(_URL_SCHEMES)


def replica_name(url: str) -> str:
    """Return the folder name of this host's replica of the log at ``url``.

    The same database reached as another user shares the replica; another database never does.

    Raises:
        ConfigError: the URL's port is not a number from 0 to 65535.
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError as exc:  # the message names the port only, never the password
        raise ConfigError(f"the store URL's port is not a number from 0 to 65535 ({exc})") from None
    where = f"{parts.hostname or ''}:{port or ''}{parts.path}?{parts.query}"
    digest = hashlib.sha256(where.encode("utf-8")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", parts.path.strip("/"))[:40] or "postgres"
    return f"{name}-{digest}"


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def _read_settings(store_dir: Path) -> dict[str, Any]:
    path = store_dir / _CONFIG_FILE
    if not path.is_file():
        return {}
    import tomllib  # only a store with a config.toml pays for the parser

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}; fix or remove it") from exc
