"""Lazy package exports: a package names where each public object lives and imports it on use.

STYLE.md's "nothing happens at import" applied to import time itself: ``scroll search`` and the
kernel worker (which passes through ``scrollctx`` and ``scrollctx.kernel`` on its way to
``_worker``) must not pay for modules they never touch. A package lists its exports as
``{name: module}`` and installs the two functions :func:`lazy_exports` returns as its
module-level ``__getattr__`` and ``__dir__`` (PEP 562); the first access imports the module,
later ones find the name bound on the package. Type checkers read the same names from an
``if TYPE_CHECKING:`` block of imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` exporting ``name -> module``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
