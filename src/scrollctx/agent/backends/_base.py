"""The backend contract: one abstract method, capabilities as class attributes, strict options.

Invariants:

- A backend implements :meth:`Backend.complete`; one that streams also overrides
  :meth:`Backend.stream` and sets ``can_stream``. Capabilities (``supports_tools``,
  ``can_stream``, ``context_window``) are class attributes the loop reads before calling.
- Options are a frozen dataclass per backend (:class:`BackendOptions` subclasses). Building one
  from a mapping rejects unknown keys and wrongly typed values with a :class:`UsageError` that
  lists the valid keys, so a typo fails before any request is sent.
- A backend never reads ``os.environ``: :meth:`Backend.from_spec` receives the environment as
  a mapping from the registry, which gets it from its caller.
- A backend whose provider has a wire format others speak (``wire``: ``openai`` chat
  completions, ``anthropic`` Messages) also takes request bodies in that format as they are
  (:meth:`Backend.send`, :meth:`Backend.send_stream`) and answers with the provider's JSON
  unchanged, through the same client, error translation and retry policy as
  :meth:`Backend.complete` (:mod:`._wire`). A proxy passes its clients' requests through it.
"""

from __future__ import annotations

import dataclasses
import types
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, Union, get_args, get_origin, get_type_hints

from scrollctx.config import Config
from scrollctx.errors import UsageError

from ._retry import RetryPolicy
from ._types import ChatRequest, Completion, Delta

if TYPE_CHECKING:
    from ._wire import Encoder, StreamBuilder, WireStream

__all__ = ["Backend", "BackendOptions"]


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """Base of every backend's options; subclasses add fields with defaults.

    Example::

        @dataclass(frozen=True, slots=True)
        class Options(BackendOptions):
            temperature: float | None = None

        Options.from_mapping({"temperature": 0.2})    # ok
        Options.from_mapping({"temprature": 0.2})     # UsageError naming the valid keys
    """

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None = None) -> Self:
        """Build options from a mapping, rejecting unknown keys and mistyped values."""
        values = dict(values or {})
        _check_keys(cls, values)
        hints = get_type_hints(cls)
        checked = {key: _check_type(cls, key, value, hints[key]) for key, value in values.items()}
        return cls(**checked)

    def merged(self, overrides: Mapping[str, Any] | None) -> Self:
        """Return a copy with ``overrides`` applied, validated like :meth:`from_mapping`."""
        if not overrides:
            return self
        current = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return type(self).from_mapping({**current, **overrides})

    def as_dict(self) -> dict[str, Any]:
        """Every option with its value (``None`` where unset)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _check_keys(cls: type[BackendOptions], values: Mapping[str, Any]) -> None:
    valid = sorted(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise UsageError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for "
            f"{cls.__qualname__}; valid options: {', '.join(valid) or '(none)'}"
        )


def _check_type(cls: type[BackendOptions], key: str, value: Any, hint: Any) -> Any:
    """Return ``value`` (lists coerced to tuples where a tuple is expected) or raise."""
    allowed = _runtime_types(hint)
    if allowed is None:
        return value
    if tuple in allowed and isinstance(value, list):
        value = tuple(value)
    is_bool = isinstance(value, bool)
    if isinstance(value, allowed) and (bool in allowed or not is_bool):
        return value
    if float in allowed and isinstance(value, int) and not is_bool:
        return float(value)
    names = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
    raise UsageError(f"option {key}={value!r} for {cls.__qualname__} must be {names}")


def _runtime_types(hint: Any) -> tuple[type, ...] | None:
    """The classes ``isinstance`` can check for a field annotation, or None for "anything"."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        found: list[type] = []
        for arg in get_args(hint):
            sub = _runtime_types(arg)
            if sub is None:
                return None
            found.extend(sub)
        return tuple(found)
    if hint is type(None):
        return (type(None),)
    if origin is not None:
        return (origin,) if isinstance(origin, type) else None
    return (hint,) if isinstance(hint, type) and hint is not Any else None


class Backend(ABC):
    """A model provider behind one method: :meth:`complete`.

    Subclasses set ``name`` and their capabilities, define a nested ``Options`` dataclass, and
    build themselves from a model spec in :meth:`from_spec`.
    """

    name: ClassVar[str] = ""
    supports_tools: ClassVar[bool] = False
    can_stream: ClassVar[bool] = False
    context_window: ClassVar[int | None] = None
    wire: ClassVar[str | None] = None
    """The provider API whose bodies :meth:`send` takes (``openai``, ``anthropic``), if any."""
    Options: ClassVar[type[BackendOptions]] = BackendOptions

    def __init__(
        self,
        *,
        model: str | None = None,
        options: BackendOptions | Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model or ""
        self.options = (
            options if isinstance(options, BackendOptions) else self.Options.from_mapping(options)
        )
        self.retry = retry or RetryPolicy()

    @classmethod
    def from_spec(
        cls,
        model: str | None,
        *,
        config: Config | None = None,
        environ: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Backend:
        """Build the backend for ``model`` from the resolved configuration and environment.

        The base implementation ignores configuration and environment; adapters that need
        credentials or endpoints override it.
        """
        return cls(model=model, options=options)

    @abstractmethod
    def complete(self, request: ChatRequest) -> Completion:
        """Send one request and return the whole answer."""

    def stream(self, request: ChatRequest) -> Iterator[Delta | Completion]:
        """Yield :class:`Delta` pieces as they arrive, then the final :class:`Completion`.

        Backends that cannot stream yield just the completion.
        """
        yield self.complete(request)

    def reported_window(self, model: str | None = None) -> int | None:
        """The context window the server reports for ``model`` (default: this backend's), or
        ``None`` (not reported).

        The base reports none; a backend whose server publishes model metadata overrides it.
        """
        return None

    def send(
        self,
        body: Mapping[str, Any],
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        encode: Encoder | None = None,
    ) -> dict[str, Any]:
        """Send a request body in the provider's wire format; return its JSON answer unchanged.

        ``timeout`` caps this request (default: the ``timeout`` option); ``headers`` are sent
        besides the backend's own; ``encode`` writes the body's JSON (default: the SDK's own
        encoder).

        Raises:
            UsageError: the backend has no wire format (``wire`` is None).
        """
        raise UsageError(self._no_wire())

    def send_stream(
        self,
        body: Mapping[str, Any],
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        encode: Encoder | None = None,
    ) -> WireStream:
        """Like :meth:`send` with streaming on: each event's JSON as it arrives."""
        raise UsageError(self._no_wire())

    def read_answer(self, answer: Mapping[str, Any]) -> Completion:
        """Parse an answer of :meth:`send` (or one a :meth:`stream_builder` assembled)."""
        raise UsageError(self._no_wire())

    def stream_builder(self) -> StreamBuilder:
        """A fresh :class:`StreamBuilder` for the events of one :meth:`send_stream`."""
        raise UsageError(self._no_wire())

    def models(self) -> dict[str, Any]:
        """Return the provider's model list (``GET /models``) as it sent it."""
        raise UsageError(self._no_wire())

    def _no_wire(self) -> str:
        return (
            f"the {self.name or type(self).__name__} backend takes no wire-format requests; "
            "use an openai: or anthropic: backend"
        )

    def close(self) -> None:  # noqa: B027 - optional hook; most test doubles hold nothing
        """Release connections; the backend must not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}:{self.model or '(default)'}>"
