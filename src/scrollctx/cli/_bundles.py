"""Option bundles: a group of click options handed to a command as one frozen dataclass.

``option_bundle(Fields, options, "param")`` returns a decorator that adds ``options`` (whose
parameter names are the dataclass's field names) to a command and passes their values as one
``Fields`` instance under ``param``. The model, view and judge options are bundles, so every
command that takes them takes the same flags, parsed the same way.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["option_bundle"]

F = TypeVar("F", bound=Callable[..., Any])


def option_bundle(
    fields: type[Any], options: Sequence[Callable[[Any], Any]], param: str
) -> Callable[[F], F]:
    """A decorator adding ``options`` and passing their values as ``param=fields(...)``."""
    names = [f.name for f in dataclasses.fields(fields)]

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def bundled(*args: Any, **kwargs: Any) -> Any:
            kwargs[param] = fields(**{name: kwargs.pop(name) for name in names})
            return func(*args, **kwargs)

        command: Any = bundled
        for option in reversed(options):
            command = option(command)
        return command  # type: ignore[no-any-return]

    return decorate
