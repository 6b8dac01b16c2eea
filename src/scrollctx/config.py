"""Resolved configuration, built once and passed down.

Precedence, highest first:

1. an explicit argument or command-line flag;
2. a ``SCROLL_*`` environment variable (``SCROLL_STORE``, ``SCROLL_DEBUG``);
3. ``<store>/config.toml`` (read with :mod:`tomllib`);
4. the default.

Deep layers never read the environment: they receive a :class:`Config` or plain parameters.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.errors import ConfigError

__all__ = ["DEFAULT_STORE", "Config", "resolve_config"]

DEFAULT_STORE = ".scroll"
_CONFIG_FILE = "config.toml"


@dataclass(frozen=True, slots=True)
class Config:
    """Where the store lives and the settings read from its ``config.toml``."""

    store_dir: Path
    debug: bool = False
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        """The Event Log file inside the store."""
        return self.store_dir / "history.db"

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
    store_dir = Path(store or env.get("SCROLL_STORE") or DEFAULT_STORE).expanduser()
    debug = env.get("SCROLL_DEBUG", "").lower() in {"1", "true", "yes"}
    return Config(store_dir=store_dir, debug=debug, settings=_read_settings(store_dir))


def _read_settings(store_dir: Path) -> dict[str, Any]:
    path = store_dir / _CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}; fix or remove it") from exc
