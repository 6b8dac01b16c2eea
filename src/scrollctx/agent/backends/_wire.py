"""The wire door of a backend: provider-format request bodies in, the provider's JSON out.

A proxy passes its clients' requests through it: the body goes as the client wrote it (a
backend only fills in what its own requests always carry: model, reply cap, message shape),
through the backend's SDK client, error translation and retry policy, and the answer comes back
as the provider sent it, or as the events of its stream.

The body's JSON is the SDK's own encoding unless the caller passes an ``encode`` (the proxy
passes its faster one: a 100 KB view took the SDK's standard-library encoder 1-2 ms per
request); it is sent as those bytes where the SDK takes a request's ``content`` (every SDK
version of the last year), else as the SDK encodes it.

Invariants: only opening a stream is retried; :meth:`WireStream.close` ends a stream from any
thread, also one blocked reading it; an answer that is not a JSON object is
:class:`~scrollctx.errors.BadResponse`.
"""

from __future__ import annotations

import functools
import inspect
import json
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

from scrollctx.errors import BadResponse

from ._retry import RetryPolicy, call_with_retries
from ._types import Delta

__all__ = ["Encoder", "StreamBuilder", "WireDoor", "WireStream", "wire_answer"]

Encoder = Callable[[Any], bytes]
"""Writes a request body as UTF-8 JSON."""


class StreamBuilder(Protocol):
    """Folds the events of one wire stream into the answer the same request without
    streaming would have got (:meth:`Backend.read_answer` parses it)."""

    def add(self, event: Mapping[str, Any]) -> Delta:
        """Take the next event's JSON; return the text and reasoning it added."""
        ...

    def answer(self) -> dict[str, Any]:
        """The answer JSON the events so far add up to."""
        ...


class WireStream:
    """The events of one :meth:`Backend.send_stream` as JSON, as they arrive.

    :meth:`close` may be called from any thread, also while another thread waits for the next
    event: it closes the HTTP response, so that wait ends at once (with an error) and the
    provider stops generating for a client that is gone.
    """

    def __init__(self, events: Any, translate: Callable[[], AbstractContextManager[None]]) -> None:
        self._events, self._translate = events, translate
        self._iterator = iter(events)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        with self._translate():
            event = next(self._iterator)
        return event  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the stream and its HTTP response (from any thread)."""
        # Closing a socket does not wake a thread blocked reading it; shutting it down does.
        response = getattr(self._events, "response", None)
        network = (getattr(response, "extensions", None) or {}).get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if isinstance(sock, socket.socket):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the other side
        self._events.close()


class WireDoor:
    """The wire door for a backend whose SDK client speaks its provider's format.

    A subclass names its paths (``wire_path``, ``models_path``) and gives
    :meth:`_wire_body` (what it fills in), :meth:`_wire_errors` (its error translation) and
    :meth:`_wire_stream_class` (its SDK's stream class).
    """

    name: ClassVar[str]
    wire_path: ClassVar[str] = ""
    models_path: ClassVar[str] = ""
    retry: RetryPolicy
    options: Any  # the backend's options: their ``timeout`` is a request's default
    _client: Any

    def send(
        self,
        body: Mapping[str, Any],
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        encode: Encoder | None = None,
    ) -> dict[str, Any]:
        """Send a body in the provider's format; return its JSON answer as it sent it.

        ``timeout`` caps this request (default: the backend's ``timeout`` option); ``headers``
        are added to the SDK's own (a client's ``anthropic-beta``, never credentials);
        ``encode`` writes the body (see the module docstring).
        """
        wire, options = self._wire_body(body, stream=False), self._options(timeout, headers)
        payload = self._payload(wire, encode)

        def post() -> dict[str, Any]:
            with self._wire_errors():
                try:
                    data = self._client.post(self.wire_path, **payload, cast_to=object,
                                             options=options)  # fmt: skip
                except json.JSONDecodeError as exc:
                    raise BadResponse(f"{self.name} answered with invalid JSON ({exc.msg})",
                                      backend=self.name) from exc  # fmt: skip
            return wire_answer(data, self.name)

        return call_with_retries(post, self.retry)

    def send_stream(
        self,
        body: Mapping[str, Any],
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        encode: Encoder | None = None,
    ) -> WireStream:
        """Like :meth:`send` with streaming on: each event's JSON as it arrives."""
        wire, options = self._wire_body(body, stream=True), self._options(timeout, headers)
        payload = self._payload(wire, encode)

        def open_stream() -> Any:
            with self._wire_errors():
                return self._client.post(self.wire_path, **payload, cast_to=object,
                                         options=options, stream=True,
                                         stream_cls=self._wire_stream_class())  # fmt: skip

        return WireStream(call_with_retries(open_stream, self.retry), self._wire_errors)

    def models(self) -> dict[str, Any]:
        """Return the provider's model list as it sent it."""
        with self._wire_errors():
            data = self._client.get(self.models_path, cast_to=object)
        return wire_answer(data, self.name)

    def _payload(self, wire: dict[str, Any], encode: Encoder | None) -> dict[str, Any]:
        """The body argument of the SDK's ``post``: our bytes where it takes them."""
        if encode is not None and _takes_content(self._client.post):
            return {"content": encode(wire)}
        return {"body": wire}

    def _options(self, timeout: float | None, headers: Mapping[str, str] | None) -> dict[str, Any]:
        limit = timeout or float(self.options.timeout)
        return {"timeout": limit, **({"headers": dict(headers)} if headers else {})}

    def _wire_body(self, body: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _wire_errors(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _wire_stream_class(self) -> Any:
        raise NotImplementedError


def _takes_content(post: Callable[..., Any]) -> bool:
    """Whether an SDK client's ``post`` sends a request's bytes as given (``content``)."""
    function = getattr(post, "__func__", post)
    return _signature_takes(function, "content")


@functools.cache
def _signature_takes(function: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(function).parameters


def wire_answer(data: Any, backend: str) -> dict[str, Any]:
    """Return a wire-format answer that must be a JSON object, or raise :class:`BadResponse`."""
    if not isinstance(data, dict):
        raise BadResponse(
            f"{backend} answered with something that is not a JSON object: {str(data)[:200]!r}",
            backend=backend,
        )
    return data
