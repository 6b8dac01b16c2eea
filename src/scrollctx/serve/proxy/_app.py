"""The proxy's HTTP side: Starlette routes over the door, real SSE, client disconnects.

Routes: ``POST /v1/chat/completions`` (OpenAI), ``POST /v1/messages`` (Anthropic) and
``GET /v1/models`` (passed through). The work of a request (the log, the kernel, the upstream
call) is blocking and runs on a worker thread; a stream's events reach the client as the
worker pushes them. A client that disconnects stops its request: mid-stream, the worker sees it
before the next upstream event and closes the upstream response; before the first event or
without a stream (a recall cell running), no further upstream call is made. What was logged
stays.

Request bodies are read up to ``max_body`` bytes (413 past it, at once when the declared
``Content-Length`` says so) and must be JSON (400; nesting deeper than the decoder takes is a
400 too). At most ``max_requests`` requests are served at once (a stream counts until it ends);
one more gets 503 with ``Retry-After`` before its body is read. A body must arrive whole within
``body_seconds`` (408 past it): a request holds its slot while its body arrives, so bodies begun
and never finished would otherwise keep every other client out. Together they bound what
clients can make the proxy hold: ``max_requests`` bodies of ``max_body`` bytes, each about 20
times its size once decoded (JSON of many small objects), for at most ``body_seconds`` each
before any work starts.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from scrollctx.errors import ScrollError
from scrollctx.serve._network import TokenGuard
from scrollctx.serve.proxy._door import (
    Cancellation,
    Disconnected,
    Door,
    Reply,
    StreamItem,
    failure,
)
from scrollctx.serve.proxy._json import loads
from scrollctx.serve.proxy._proxy import WIRES, Proxy

__all__ = ["BODY_SECONDS", "MAX_BODY", "MAX_REQUESTS", "build_app"]

MAX_BODY = 64 * 1024 * 1024
MAX_REQUESTS = 32
BODY_SECONDS = 30.0


def build_app(
    proxy: Proxy,
    *,
    token: str | None = None,
    max_body: int = MAX_BODY,
    max_requests: int = MAX_REQUESTS,
    body_seconds: float = BODY_SECONDS,
) -> Any:
    """The ASGI app of ``scroll serve`` (behind the token guard when a token is set)."""
    bounds = _BodyBounds(max_body, body_seconds)

    async def chat(request: Request) -> Response:
        return await _serve(proxy, "openai", request, bounds)

    async def messages(request: Request) -> Response:
        return await _serve(proxy, "anthropic", request, bounds)

    async def models(request: Request) -> Response:
        return _response(await anyio.to_thread.run_sync(proxy.door.models))

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )
    return TokenGuard(_Bounded(app, proxy, max_requests), token, also=("x-api-key",))


class _Bounded:
    """ASGI middleware: at most ``limit`` requests at once; one more gets 503 at once."""

    def __init__(self, app: Any, proxy: Proxy, limit: int) -> None:
        self.app, self.proxy, self.limit = app, proxy, limit
        self.busy = 0  # only the event loop's thread counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.busy >= self.limit:
            message = (f"scroll serve is answering {self.limit} requests already "
                       "(--max-requests); retry shortly")  # fmt: skip
            door = self.proxy.door
            headers = {**door.headers, "Retry-After": "1"}
            reply = Reply.json(503, door.wire.error_body(503, message), headers)
            await _response(reply)(scope, receive, send)
            return
        self.busy += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.busy -= 1


class _BodyBounds(NamedTuple):
    max_body: int
    seconds: float


async def _serve(proxy: Proxy, wire: str, request: Request, bounds: _BodyBounds) -> Response:
    try:
        door = proxy.door_for(wire)
    except ScrollError as exc:
        return _response(failure(exc, WIRES[wire], proxy.door.headers))
    body = await _read_json(request, bounds, door)
    if isinstance(body, Reply):
        return _response(body)
    headers = {k.lower(): v for k, v in request.headers.items()}
    if isinstance(body, dict) and body.get("stream") is True:
        return await _stream(door, body, headers, request.receive)
    cancelled = Cancellation()
    async with anyio.create_task_group() as group:
        group.start_soon(_watch_disconnect, request.receive, cancelled)
        reply = await anyio.to_thread.run_sync(door.complete, body, headers, cancelled)
        group.cancel_scope.cancel()
    return _response(reply)


async def _watch_disconnect(receive: Receive, cancelled: Cancellation) -> None:
    """Tell the request's worker once its client is gone (the body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    cancelled.cancel()


async def _read_json(request: Request, bounds: _BodyBounds, door: Door) -> Any:
    max_body = bounds.max_body
    message = (f"the request body exceeds {max_body:,} bytes, the most scroll serve reads "
               "(--max-body-mb); nothing of it was logged")  # fmt: skip
    too_large = _refusal(door, 413, message)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body:
        return too_large  # not a byte read
    chunks, size = [], 0
    with anyio.move_on_after(bounds.seconds) as waiting:
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body:
                    return too_large
                chunks.append(chunk)
        except ClientDisconnect:  # nobody reads the answer; it keeps the server's log quiet
            message = "the client went away before its body arrived; nothing of it was logged"
            return _refusal(door, 400, message)
    if waiting.cancelled_caught:
        message = (f"the request body did not arrive within {bounds.seconds:g} s, the most "
                   "scroll serve waits for one; nothing of it was logged")  # fmt: skip
        return _refusal(door, 408, message)
    try:
        return loads(b"".join(chunks))
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        message = f"the request body is not JSON: {exc}"
    except RecursionError:  # the decoder's own limit: a body nested deeper than Python's stack
        message = "the request body is nested too deeply to be a request"
    return _refusal(door, 400, message)


def _refusal(door: Door, status: int, message: str) -> Reply:
    """A request refused before any work: ``status`` and the message, in the door's wire."""
    return Reply.json(status, door.wire.error_body(status, message), door.headers)


def _response(reply: Reply) -> Response:
    if reply.after is not None:
        return _Answered(reply)
    return Response(reply.content, reply.status, reply.headers, media_type="application/json")


class _Answered(Response):
    """A JSON answer whose ``after`` runs once it is sent, also when sending failed."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.content, reply.status, reply.headers, media_type="application/json")
        self.after = reply.after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.after is not None:
                await anyio.to_thread.run_sync(self.after)


async def _stream(
    door: Door, body: dict[str, Any], headers: Mapping[str, str], receive: Receive
) -> Response:
    sender, receiver = anyio.create_memory_object_stream[StreamItem](math.inf)
    cancelled = Cancellation()
    token = anyio.lowlevel.current_token()

    def push(item: StreamItem) -> None:
        try:
            anyio.from_thread.run_sync(sender.send_nowait, item, token=token)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError) as exc:
            cancelled.cancel()
            raise Disconnected from exc

    def work() -> None:
        try:
            door.stream(body, headers, push, cancelled)
        finally:
            try:
                anyio.from_thread.run_sync(sender.close, token=token)
            except RuntimeError:  # the server's event loop is gone (shutdown)
                pass

    worker = threading.Thread(target=work, name="scroll-serve-stream", daemon=True)
    worker.start()
    async with anyio.create_task_group() as group:  # recall may run before the first event
        group.start_soon(_watch_disconnect, receive, cancelled)
        first = await receiver.receive()
        group.cancel_scope.cancel()
    if isinstance(first, Reply):
        receiver.close()
        return _response(first)
    return _EventStream(receiver, first if isinstance(first, dict) else {}, cancelled)


class _EventStream(StreamingResponse):
    """Server-sent events from a worker, stopped (and the worker told) on disconnect."""

    def __init__(
        self,
        items: MemoryObjectReceiveStream[StreamItem],
        headers: Mapping[str, str],
        cancelled: Cancellation,
    ) -> None:
        super().__init__(iter(()), 200, {**headers, "Cache-Control": "no-cache"},
                         media_type="text/event-stream")  # fmt: skip
        self.items, self.cancelled = items, cancelled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        finished = False
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._watch, receive, group.cancel_scope)
                await send({"type": "http.response.start", "status": self.status_code,
                            "headers": self.raw_headers})  # fmt: skip
                async for item in self.items:
                    if item is None:
                        break
                    if isinstance(item, bytes):
                        await send({"type": "http.response.body", "body": item, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                finished = True
                group.cancel_scope.cancel()
        except OSError:
            pass  # the client went away while we were sending
        finally:
            if not finished:
                self.cancelled.cancel()
            self.items.close()

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.cancelled.cancel()
                scope.cancel()
                return
