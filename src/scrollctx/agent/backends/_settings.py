"""Where a backend's endpoint, key and model come from.

Precedence, highest first (the same order as :mod:`scrollctx.config`):

1. an explicit argument (``--model openai:NAME``, ``base_url=``, ``api_key=``);
2. the provider's standard environment variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``;
   ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``);
3. ``<store>/config.toml``, table ``[backends.NAME]`` with keys ``model``, ``base_url``,
   ``api_key`` and a sub-table ``options``;
4. the backend's default.

Invariant: the environment arrives as a mapping parameter; nothing here reads ``os.environ``.
Keys are never part of a repr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.config import Config
from scrollctx.errors import ConfigError

__all__ = ["Endpoint", "EndpointSource", "resolve_cache_dir", "resolve_endpoint"]

_SECTION_KEYS = frozenset({"model", "base_url", "api_key", "options"})


@dataclass(frozen=True, slots=True)
class EndpointSource:
    """Which variables a backend reads and what it falls back to."""

    backend: str
    key_variable: str
    base_url_variable: str
    default_model: str
    default_base_url: str | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A resolved endpoint; ``origins`` says where each value came from (for ``scroll paths``)."""

    backend: str
    model: str
    base_url: str | None
    api_key: str | None = field(repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_default_base_url(self) -> bool:
        """True when no base URL was configured anywhere (the provider's own API is used)."""
        return self.origins.get("base_url") == "default"


def resolve_endpoint(
    source: EndpointSource,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    environ: Mapping[str, str],
    config: Config | None = None,
) -> Endpoint:
    """Resolve model, base URL and key for one backend by the documented precedence."""
    section = _config_section(source.backend, config)
    origins: dict[str, str] = {}
    chosen_model = _first(origins, "model", [("argument", model), ("config", section.get("model"))])
    chosen_url = _first(
        origins,
        "base_url",
        [
            ("argument", base_url),
            ("environment", environ.get(source.base_url_variable)),
            ("config", section.get("base_url")),
        ],
    )
    chosen_key = _first(
        origins,
        "api_key",
        [
            ("argument", api_key),
            ("environment", environ.get(source.key_variable)),
            ("config", section.get("api_key")),
        ],
    )
    return Endpoint(
        backend=source.backend,
        model=chosen_model or source.default_model,
        base_url=chosen_url or source.default_base_url,
        api_key=chosen_key,
        options=dict(section.get("options") or {}),
        origins={
            "model": origins.get("model", "default"),
            "base_url": origins.get("base_url", "default"),
            "api_key": origins.get("api_key", "missing"),
        },
    )


def resolve_cache_dir(environ: Mapping[str, str]) -> Path:
    """The scrollctx cache folder: ``$XDG_CACHE_HOME/scrollctx``, else ``~/.cache/scrollctx``."""
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "scrollctx"
    home = environ.get("HOME")
    base = Path(home) if home else Path("~").expanduser()
    return base / ".cache" / "scrollctx"


def _first(origins: dict[str, str], name: str, candidates: list[tuple[str, object]]) -> str | None:
    for origin, value in candidates:
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise ConfigError(f"{name} from the {origin} must be text, not {type(value).__name__}")
        origins[name] = origin
        return value
    return None


def _config_section(backend: str, config: Config | None) -> Mapping[str, Any]:
    if config is None:
        return {}
    backends = config.settings.get("backends", {})
    section = backends.get(backend, {}) if isinstance(backends, Mapping) else None
    if not isinstance(section, Mapping):
        raise ConfigError(
            f"[backends.{backend}] in {config.config_path} must be a table; fix or remove it"
        )
    unknown = sorted(set(section) - _SECTION_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key {', '.join(unknown)} in [backends.{backend}] of {config.config_path}; "
            f"valid keys: {', '.join(sorted(_SECTION_KEYS))}"
        )
    for key in ("model", "base_url", "api_key"):
        if key in section and not isinstance(section[key], str):
            raise ConfigError(
                f"{key} in [backends.{backend}] of {config.config_path} must be a quoted string"
            )
    if not isinstance(section.get("options", {}), Mapping):
        raise ConfigError(f"[backends.{backend}].options in {config.config_path} must be a table")
    return section
