"""The backend registry: names to ``"module:Class"`` targets, resolved on first use.

Invariants:

- Built-in backends register exactly like third-party ones: as ``"module:Class"`` strings, so
  no adapter module (and no optional SDK) is imported until a backend of that name is asked for.
- Third-party backends arrive through the ``scrollctx.backends`` entry-point group, read once,
  on first lookup, behind a loaded flag. A plugin never replaces a built-in or a name registered
  by code; the clash is reported with a warning.
- :func:`resolve_model` is the one function that reads ``os.environ``, and only when the
  caller passes no ``environ`` mapping; everything below it gets the mapping as a parameter.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from scrollctx.config import Config
from scrollctx.errors import ConfigError, UsageError

from ._base import Backend

__all__ = [
    "ENTRY_POINT_GROUP",
    "backend_class",
    "backend_names",
    "register",
    "resolve_model",
    "unregister",
]

ENTRY_POINT_GROUP = "scrollctx.backends"

_BUILTINS: dict[str, str] = {
    "anthropic": "scrollctx.agent.backends._anthropic:AnthropicBackend",
    "local": "scrollctx.agent.backends._local:LocalBackend",
    "openai": "scrollctx.agent.backends._openai:OpenAIBackend",
}
_targets: dict[str, str | type[Backend]] = dict(_BUILTINS)
_resolved: dict[str, type[Backend]] = {}
_plugins_loaded = False


def register(name: str, target: str | type[Backend], *, replace: bool = False) -> None:
    """Make a backend available under ``name``.

    Args:
        target: a :class:`Backend` subclass, or ``"module:Class"`` imported on first use.
        replace: allow taking over a name that is already registered.

    Raises:
        UsageError: the name is taken (and ``replace`` is false) or is not a plain word.
    """
    _load_plugins()
    if not name or ":" in name or name != name.strip():
        raise UsageError(f"backend name {name!r} must be a non-empty word without ':'")
    if name in _targets and not replace:
        raise UsageError(
            f"backend {name!r} is already registered; unregister it first or pass replace=True"
        )
    _targets[name] = target
    _resolved.pop(name, None)


def unregister(name: str) -> None:
    """Remove ``name``; built-ins come back as they were if they were replaced.

    Raises:
        UsageError: nothing is registered under ``name``.
    """
    _load_plugins()
    if name not in _targets:
        raise UsageError(f"no backend named {name!r} is registered")
    _resolved.pop(name, None)
    if name in _BUILTINS:
        _targets[name] = _BUILTINS[name]
    else:
        del _targets[name]


def backend_names() -> list[str]:
    """Every registered backend name, sorted."""
    _load_plugins()
    return sorted(_targets)


def backend_class(name: str) -> type[Backend]:
    """Return the class registered under ``name``, importing it on first use.

    Raises:
        UsageError: no backend has that name (the message lists the known names).
        ConfigError: the target cannot be imported or is not a :class:`Backend`.
    """
    _load_plugins()
    if name in _resolved:
        return _resolved[name]
    if name not in _targets:
        raise UsageError(
            f"unknown backend {name!r}; known backends: {', '.join(sorted(_targets))} "
            "(use --model NAME or --model NAME:MODEL, e.g. openai:gpt-4o-mini)"
        )
    target = _targets[name]
    cls = _import_target(name, target) if isinstance(target, str) else target
    _resolved[name] = cls
    return cls


def resolve_model(
    spec: str,
    *,
    config: Config | None = None,
    environ: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> Backend:
    """Build the backend a model spec names: ``"openai:gpt-4o-mini"``, ``"local"``, ``"NAME"``.

    The part before the first ``:`` names the backend; the rest (which may hold more colons,
    as in ``openai:qwen2.5:7b``) is the model, or the backend's default when absent.

    Example::

        backend = resolve_model("openai:gpt-4o-mini", config=resolve_config())
    """
    name, _, model = spec.strip().partition(":")
    if not name:
        raise UsageError(f"model spec {spec!r} names no backend; use NAME or NAME:MODEL")
    env = os.environ if environ is None else environ
    cls = backend_class(name)
    return cls.from_spec(model or None, config=config, environ=env, options=options)


def _import_target(name: str, target: str) -> type[Backend]:
    module_name, _, attr = target.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"backend {name!r} points at {target!r}, which cannot be imported ({exc}); "
            "reinstall the package that provides it"
        ) from exc
    if not (isinstance(found, type) and issubclass(found, Backend)):
        raise ConfigError(f"backend {name!r} target {target!r} is not a Backend subclass")
    return found


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in _targets:
            warnings.warn(
                f"ignoring plugin backend {point.name!r} ({point.value}): the name is taken",
                stacklevel=3,
            )
            continue
        _targets[point.name] = point.value
