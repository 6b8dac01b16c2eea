"""One wire's door: a client request in, the recall loop, the client's answer out.

Per request: parse and check the body (:class:`~._wire.Wire`), find its conversation and log
its new messages (:class:`~._conversations.Conversations`), run the recall loop
(:class:`~._recall.RecallLoop`) against the upstream, and shape the answer: JSON, or a stream
of events (:meth:`Door.stream`, fed by a wire's stream translator).

Failure is visible, never silent, and loses nothing already logged:

- a body that cannot be served: 400 with a message naming the field, nothing logged;
- an upstream error: the upstream's own status and body, its ``Retry-After`` passed on; an
  upstream that cannot be reached, timed out or answered nonsense: 502 saying which;
- a store error: 503 with its message (nothing of the request was logged, or, when only the
  flush of its messages failed, they are logged and the upstream was not called);
- a view that cannot fit the window even after eviction: 400 ``context_length_exceeded``.

Of the client's headers only :data:`FORWARDED_HEADERS` reach the upstream. Every answer carries
``X-Scroll-Sandbox`` (the kernel's profile, ``opt-out`` stated) and, once the request has a
conversation, ``X-Scroll-Session``; a non-streamed one also carries
``X-Scroll-Recall-Steps`` (the hidden steps themselves are in the body's ``scroll`` field).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from scrollctx.agent.backends import Backend, WireStream
from scrollctx.errors import (
    BackendError,
    ContextOverflow,
    KernelError,
    ScrollError,
    StoreError,
    UsageError,
)
from scrollctx.serve.proxy._anthropic_stream import AnthropicStream
from scrollctx.serve.proxy._conversations import Admission, Conversation, Conversations
from scrollctx.serve.proxy._json import dumps
from scrollctx.serve.proxy._openai_stream import OpenAIStream
from scrollctx.serve.proxy._recall import RECALL_TOOL, Outcome, RecallLoop
from scrollctx.serve.proxy._wire import ClientRequest, Wire

__all__ = [
    "SESSION_HEADER",
    "Cancellation",
    "Disconnected",
    "Door",
    "Reply",
    "StreamItem",
    "failure",
]

SESSION_HEADER = "x-scroll-session"
_log = logging.getLogger(__name__)
SESSION_KEYS = ("header", "api-key")
FORWARDED_HEADERS = ("anthropic-beta",)
"""Client headers passed upstream: they change what the upstream accepts (Claude Code's beta
features and the fields that need them); credentials and everything else stay here."""


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer: status, JSON (or the upstream's raw text), headers."""

    status: int
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)
    after: Callable[[], None] | None = None
    """To run once the answer is sent (or could not be): log the reply, free the session."""

    @classmethod
    def json(cls, status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
        """A JSON answer."""
        return cls(status, dumps(body), dict(headers or {}))


class Door:
    """One wire's way in (see the module docstring).

    Args:
        wire: the format clients of this door speak, and the upstream answers in.
        backend: the upstream.
        conversations: the proxy's sessions.
        loop: the recall loop for this wire.
        sandbox: the kernel's profile as stated in ``X-Scroll-Sandbox``.
        session_key: ``header`` (``X-Scroll-Session`` names a session namespace) or
            ``api-key`` (so does the client's key when it sends no header).
    """

    def __init__(
        self,
        wire: Wire,
        backend: Backend,
        conversations: Conversations,
        loop: RecallLoop,
        *,
        sandbox: str,
        session_key: str = "header",
    ) -> None:
        if session_key not in SESSION_KEYS:
            raise UsageError(f"session_key must be one of {', '.join(SESSION_KEYS)}")
        self.wire, self.backend, self.conversations, self.loop = wire, backend, conversations, loop
        self.sandbox, self.session_key = sandbox, session_key

    @property
    def headers(self) -> dict[str, str]:
        """The headers of every answer of this door."""
        return {"X-Scroll-Sandbox": self.sandbox}

    def complete(
        self, body: Any, headers: Mapping[str, str], cancelled: Cancellation | None = None
    ) -> Reply:
        """Answer one non-streamed request (any thread).

        Once ``cancelled`` is set (the client left), no further upstream call is made: the
        answer is a 499 nobody reads, and what was logged stays.
        """
        try:
            request = self.wire.parse(body)
            admitted = self.conversations.admit(request, self.wire, self.namespace(headers))
        except ScrollError as exc:
            return failure(exc, self.wire, self.headers)
        conversation = admitted.conversation
        said = {**self.headers, "X-Scroll-Session": conversation.session_id}
        passed = forwarded(headers)

        def call(upstream: dict[str, Any], timeout: float | None) -> dict[str, Any]:
            if cancelled is not None and cancelled.is_set():
                raise Disconnected
            admitted.wait_durable()  # nothing the client sent is lost once upstream has it
            return self.backend.send(upstream, timeout=timeout, headers=passed, encode=dumps)

        try:
            outcome = self.loop.run(conversation, request, call)
        except ScrollError as exc:
            self.conversations.release(conversation)
            return failure(exc, self.wire, said)
        except Disconnected:
            self.conversations.release(conversation)
            return Reply.json(499, self.wire.error_body(499, "the client left"), said)
        except BaseException:
            self.conversations.release(conversation)
            raise
        said["X-Scroll-Recall-Steps"] = str(len(outcome.recall))
        answer = self.wire.response(
            outcome.answers[-1],
            outcome.reply,
            outcome.usage,
            outcome.extension(conversation.session_id),
        )
        reply = Reply.json(200, answer, said)
        return replace(reply, after=lambda: self._settle(conversation, outcome))

    def _settle(self, conversation: Conversation, outcome: Outcome) -> None:
        """Log what was left until the client had it, then let the next request in."""
        try:
            if outcome.settle is not None:
                outcome.settle()
        except StoreError as exc:  # the client's next request carries the reply: logged then
            _log.warning("logging the reply of %s failed: %s", conversation.session_id, exc)
        finally:
            self.conversations.release(conversation)

    def stream(
        self,
        body: Any,
        headers: Mapping[str, str],
        push: Callable[[StreamItem], None],
        cancelled: Cancellation,
    ) -> None:
        """Answer one streamed request (a worker thread), pushing what the client gets.

        The first item is a :class:`Reply` when the request fails before any event (so the
        client gets a real status; what follows it is not read), else the stream's headers;
        then the encoded events; last ``None``. ``push`` raises :class:`Disconnected` once the
        client is gone; ``cancelled`` says so too, and closes the upstream stream at once.
        """
        try:
            request = self.wire.parse(body)
            admitted = self.conversations.admit(request, self.wire, self.namespace(headers))
        except ScrollError as exc:
            push(failure(exc, self.wire, self.headers))  # answered as it is: nothing follows
            return
        conversation = admitted.conversation
        said = {**self.headers, "X-Scroll-Session": conversation.session_id}
        out = _Outlet(push, cancelled, said)
        translator = self._translator(request)
        passed = forwarded(headers)
        try:
            outcome = self.loop.run(
                conversation,
                request,
                lambda upstream, timeout: self._relay(
                    admitted, upstream, timeout, passed, translator, out
                ),
                reply=lambda _: translator.reply(),
            )
            out.send(translator.finish(outcome.usage, outcome.extension(conversation.session_id)))
            out.close()
            self._settle(conversation, outcome)
            return
        except Disconnected:
            pass  # the client left: what was logged stays logged
        except ScrollError as exc:
            out.fail(exc, self.wire, translator)
        self.conversations.release(conversation)
        out.close()

    def _translator(self, request: ClientRequest) -> StreamTranslator:
        sent = self.backend.stream_builder()
        if self.wire.name == "openai":
            return OpenAIStream(request, RECALL_TOOL, sent)
        return AnthropicStream(request, RECALL_TOOL, sent)

    def _relay(
        self,
        admitted: Admission,
        body: dict[str, Any],
        timeout: float | None,
        headers: Mapping[str, str],
        translator: StreamTranslator,
        out: _Outlet,
    ) -> dict[str, Any]:
        """One streamed upstream call: its events translated to the client as they come."""
        out.check()  # a client that left during a recall cell costs no further upstream call
        admitted.wait_durable()  # nothing the client sent is lost once upstream has it
        translator.start_answer()
        builder = self.backend.stream_builder()
        events = self.backend.send_stream(body, timeout=timeout, headers=headers, encode=dumps)
        try:
            with out.cancelled.watching(events):
                for event in events:
                    out.check()
                    builder.add(event)
                    out.send(translator.feed(event))
            out.check()  # a stream we cut ends early: its answer is not one to log
        except BackendError as exc:
            if out.cancelled.is_set():  # we closed it: the client went away
                raise Disconnected from exc
            raise
        finally:
            events.close()
        out.send(translator.end_answer())
        return builder.answer()

    def namespace(self, headers: Mapping[str, str]) -> str:
        """The session namespace a request's headers name ("" for none)."""
        named = headers.get(SESSION_HEADER)
        if named:
            return "header:" + named
        if self.session_key == "api-key":
            key = headers.get("x-api-key") or headers.get("authorization", "")
            if key:
                return "key:" + hashlib.sha256(key.encode()).hexdigest()
        return ""

    def models(self) -> Reply:
        """``GET /v1/models``, passed through."""
        try:
            return Reply.json(200, self.backend.models(), self.headers)
        except ScrollError as exc:
            return failure(exc, self.wire, self.headers)


def forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's headers (names lower-cased) that go upstream: :data:`FORWARDED_HEADERS`."""
    return {name: headers[name] for name in FORWARDED_HEADERS if headers.get(name)}


class Disconnected(Exception):  # noqa: N818 - a signal: the client is gone
    """The client of a stream went away; the request stops where it is."""


StreamItem = Reply | dict[str, str] | bytes | None
"""What a stream pushes: a failure reply or the headers first, then events, then None."""


class StreamTranslator(Protocol):
    """A wire's upstream events to client events (:mod:`._openai_stream`, ...)."""

    def start_answer(self) -> None: ...
    def feed(self, event: Mapping[str, Any]) -> list[bytes]: ...
    def end_answer(self) -> list[bytes]: ...
    def reply(self) -> dict[str, Any]: ...
    def finish(self, usage: Any, extension: Mapping[str, Any]) -> list[bytes]: ...
    def error(self, status: int, message: str) -> list[bytes]: ...


class Cancellation:
    """Set once a stream's client is gone; closes the upstream stream being read then."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._watched: WireStream | None = None

    def is_set(self) -> bool:
        """Whether the client is gone."""
        return self._event.is_set()

    def cancel(self) -> None:
        """The client is gone (any thread): stop the upstream stream now."""
        with self._lock:
            self._event.set()
            watched = self._watched
        if watched is not None:
            watched.close()

    @contextmanager
    def watching(self, stream: WireStream) -> Iterator[None]:
        """Close ``stream`` on :meth:`cancel` while the block runs (at once if already set)."""
        with self._lock:
            self._watched = stream
        if self.is_set():
            stream.close()
        try:
            yield
        finally:
            with self._lock:
                self._watched = None


class _Outlet:
    """Sends a stream's events: headers before the first, a failure as a reply before any."""

    def __init__(
        self,
        push: Callable[[StreamItem], None],
        cancelled: Cancellation,
        headers: dict[str, str],
    ) -> None:
        self.push, self.cancelled, self.headers = push, cancelled, headers
        self.started = False

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Disconnected

    def send(self, events: list[bytes]) -> None:
        for event in events:
            self.check()
            if not self.started:
                self.push(self.headers)
                self.started = True
            self.push(event)

    def fail(self, exc: ScrollError, wire: Wire, translator: StreamTranslator) -> None:
        if not self.started:
            self.push(failure(exc, wire, self.headers))
            return
        reply = failure(exc, wire, self.headers)
        try:
            self.send(translator.error(reply.status, _message(reply)))
        except Disconnected:
            pass

    def close(self) -> None:
        try:
            self.push(None)
        except Disconnected:
            pass


def _message(reply: Reply) -> str:
    text = reply.content.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else text


def failure(exc: ScrollError, wire: Wire, headers: Mapping[str, str]) -> Reply:
    """The HTTP answer for an error (see the module docstring for each case)."""
    if isinstance(exc, BackendError) and exc.status_code is not None:
        said = dict(headers)
        if exc.retry_after is not None:
            said["Retry-After"] = f"{exc.retry_after:g}"
        if exc.body is not None:
            return Reply(exc.status_code, exc.body.encode(), said)
        return Reply.json(exc.status_code, wire.error_body(exc.status_code, str(exc)), said)
    status, message = _status(exc)
    body = wire.error_body(status, message)
    if isinstance(exc, ContextOverflow) and wire.name == "openai":
        body["error"]["code"] = "context_length_exceeded"
    return Reply.json(status, body, headers)


def _status(exc: ScrollError) -> tuple[int, str]:
    if isinstance(exc, BackendError):  # no HTTP status: unreachable, timed out, unusable
        return 502, f"scroll serve got no usable answer from the upstream: {exc}"
    if isinstance(exc, StoreError):
        return 503, f"scroll serve could not write its Event Log: {exc}"
    if isinstance(exc, KernelError):
        return 503, f"scroll serve could not run a recall cell: {exc}"
    if isinstance(exc, ContextOverflow):
        return 400, f"the conversation does not fit the upstream window: {exc}"
    return 400, str(exc)
