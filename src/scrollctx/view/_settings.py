"""The knobs of a working view, resolved once: the flag, else ``[view]`` of config.toml, else
the default.

====================== ============== ======= ================================================
flag                   config key     default meaning
====================== ============== ======= ================================================
``--budget-tokens N``  budget_tokens  (model) the window C; by default from the model's window
``--rho R``            rho            0.8     eviction starts above rho * C (0 < rho <= 1)
``--index-k K``        index_k        4       tier width of the eviction index (>= 3)
``--tail-groups N``    tail_groups    2       newest exchanges eviction protects
``--keep-results N``   keep_results   3       newest tool results eviction protects
====================== ============== ======= ================================================

Invariants: every value is checked here, with the same rules as :class:`WorkingView` (a bad
config value is a :class:`~scrollctx.errors.ConfigError` naming the file and the key; a bad
flag a :class:`~scrollctx.errors.UsageError`); ``origins`` says where each value came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from scrollctx.config import Config
from scrollctx.errors import ConfigError, UsageError

__all__ = ["VIEW_DEFAULTS", "ViewSettings"]

VIEW_DEFAULTS: Mapping[str, Any] = {
    "budget_tokens": None,
    "rho": 0.8,
    "index_k": 4,
    "tail_groups": 2,
    "keep_results": 3,
}


@dataclass(frozen=True, slots=True)
class ViewSettings:
    """How a session's working view is bounded (see the module docstring for the table)."""

    budget_tokens: int | None = None
    rho: float = 0.8
    index_k: int = 4
    tail_groups: int = 2
    keep_results: int = 3
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)
    """``flag``, ``config`` or ``default`` per knob."""

    @classmethod
    def resolve(cls, config: Config | None = None, **flags: Any) -> ViewSettings:
        """Each knob from ``flags`` (``None``: not given), else config.toml ``[view]``, else
        the default.

        Raises:
            UsageError: a flag is out of range or unknown.
            ConfigError: a ``[view]`` value is out of range, of the wrong type, or unknown.
        """
        unknown = sorted(set(flags) - set(VIEW_DEFAULTS))
        if unknown:
            raise UsageError(f"unknown view setting {unknown[0]!r}")
        section = _section(config)
        values: dict[str, Any] = {}
        origins: dict[str, str] = {}
        for name, default in VIEW_DEFAULTS.items():
            if flags.get(name) is not None:
                values[name], origins[name] = flags[name], "flag"
            elif name in section:
                values[name], origins[name] = section[name], "config"
            else:
                values[name], origins[name] = default, "default"
        for name, value in values.items():
            problem = _problem(name, value)
            if problem and origins[name] == "config":
                where = config.config_path if config is not None else "config.toml"
                raise ConfigError(f"{where}: [view] {name} = {value!r}: {problem}")
            if problem:
                raise UsageError(f"--{name.replace('_', '-')} {value!r}: {problem}")
        return cls(**values, origins=origins)

    def to_dict(self) -> dict[str, Any]:
        """The values, for records and traces."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "origins"}


def _section(config: Config | None) -> dict[str, Any]:
    if config is None:
        return {}
    section = config.settings.get("view", {})
    if not isinstance(section, Mapping):
        raise ConfigError(f"{config.config_path}: [view] must be a table of settings")
    unknown = sorted(set(section) - set(VIEW_DEFAULTS))
    if unknown:
        raise ConfigError(
            f"{config.config_path}: unknown [view] key {unknown[0]!r}; the keys are: "
            + ", ".join(VIEW_DEFAULTS)
        )
    return dict(section)


def _problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not a valid ``name``, or ``None``."""
    if name == "budget_tokens":
        if value is None:
            return None
        return None if _is_int(value) and value >= 1024 else "the window needs an integer >= 1024"
    if name == "rho":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1
        return None if ok else "rho must be a number in (0, 1]"
    if name == "index_k":
        return None if _is_int(value) and value >= 3 else "the tier width must be an integer >= 3"
    return None if _is_int(value) and value >= 0 else "needs an integer >= 0"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
