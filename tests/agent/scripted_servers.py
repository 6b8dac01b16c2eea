"""Test doubles for LLM providers: real HTTP servers on loopback that serve scripted replies.

``ScriptedOpenAIServer`` speaks the OpenAI chat-completions API (``POST /v1/chat/completions``,
``GET /v1/models``); ``ScriptedAnthropicServer`` speaks the Anthropic Messages API
(``POST /v1/messages``). Both run the standard library's ``ThreadingHTTPServer`` in a daemon
thread on 127.0.0.1 with an OS-chosen port, so the real SDKs talk to them over real HTTP.

How to use them (the fixtures in ``tests/agent/conftest.py`` hand out one server per session,
reset before each test)::

    def test_something(openai_server):
        openai_server.enqueue_text("hello", reasoning="thinking...", usage=(12, 3))
        openai_server.enqueue_tool_calls([("repl_exec", {"source": "print(1)"})])
        openai_server.enqueue_error(429, headers={"Retry-After": "2"})
        ...                                   # point a backend at openai_server.base_url
        assert openai_server.requests[0].body["model"] == "m"

- Replies are served in the order they were queued, one per request, whatever the route that
  consumes replies. With the queue empty the server answers HTTP 418 with error type
  ``scripted_queue_empty``, which no backend retries, so a missing script fails loudly.
- Every request to a reply-consuming route is recorded (method, path, headers, parsed JSON
  body) in ``requests``, in arrival order.
- A completion queued with ``enqueue_text``/``enqueue_tool_calls`` is served as JSON, or as an
  SSE stream of chunks when the request says ``"stream": true`` (the usage chunk only when
  ``stream_options.include_usage`` was asked for). ``enqueue_stream`` serves explicit chunks.
  Likewise an Anthropic message becomes the Messages event stream (``message_start``,
  ``content_block_*`` with text/thinking/signature/input-JSON deltas, ``message_delta``,
  ``message_stop``) when the request asks to stream.
- ``enqueue(ScriptedReply(...))`` serves anything: any status, headers, JSON or raw bytes;
  ``enqueue(callable)`` computes the reply from the recorded request when it arrives.
- ``server.environ`` is an environment mapping for ``resolve_model(..., environ=...)`` that
  points the backend at the server with a dummy key.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "RecordedRequest",
    "Responder",
    "ScriptedAnthropicServer",
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "SleepRecorder",
    "observed",
    "tool_messages",
]


@dataclass
class ScriptedReply:
    """One queued answer. ``body`` is sent as JSON unless ``raw`` bytes are given.

    ``sse`` is a list of ``(event_name_or_None, data)`` pairs sent as ``text/event-stream``;
    ``data`` that is not a string is JSON-encoded. ``streamable`` marks a chat completion the
    OpenAI server may re-render as SSE when the request asks to stream. ``hold`` =
    ``(n, event)`` sends the first ``n`` SSE events, then waits for ``event`` (at most 60 s)
    before the rest: a stream caught in the middle, for tests of what a client shows meanwhile.
    """

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    sse: list[tuple[str | None, Any]] | None = None
    streamable: bool = False
    hold: tuple[int, threading.Event] | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received, for assertions."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


Responder = Callable[[RecordedRequest], ScriptedReply]


def observed(text: str) -> str:
    """A recorded message's text without the namespace digest the view joins to its end."""
    return text.split("\n\n[namespace digest]")[0]


def tool_messages(body: dict[str, Any]) -> list[str]:
    """The tool results of a recorded OpenAI request body, each without the digest."""
    return [observed(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def _respond(responder: Responder, request: RecordedRequest) -> ScriptedReply:
    try:
        return responder(request)
    except Exception as exc:  # a broken responder must fail the test, not hang the client
        error = {"type": "scripted_responder_failed", "message": f"{type(exc).__name__}: {exc}"}
        return ScriptedReply(status=418, body={"error": error})


class _ScriptedServer:
    """The shared machinery: a loopback HTTP server, a reply queue and a request record."""

    #: (method, path) pairs whose requests consume a queued reply
    reply_routes: frozenset[tuple[str, str]] = frozenset()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[ScriptedReply | Responder] = deque()
        self.requests: list[RecordedRequest] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pending(self) -> int:
        """Replies queued and not yet served."""
        with self._lock:
            return len(self._queue)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def reset(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def enqueue(self, *replies: ScriptedReply | Responder) -> None:
        """Queue replies, served first in, first out.

        A reply may be a callable taking the :class:`RecordedRequest` and returning the
        :class:`ScriptedReply`, for answers that depend on what was asked.
        """
        with self._lock:
            self._queue.extend(replies)

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
            queued = self._queue.popleft() if self._queue else None
        if isinstance(queued, ScriptedReply):
            return queued
        if queued is not None:
            return _respond(queued, request)
        return ScriptedReply(
            status=418,
            body={
                "error": {
                    "type": "scripted_queue_empty",
                    "message": f"{type(self).__name__}: no reply queued for {request.path}",
                }
            },
        )

    def handle(self, method: str, path: str, headers: dict[str, str], body: Any) -> ScriptedReply:
        """Answer one request; subclasses add fixed routes."""
        if (method, path) in self.reply_routes:
            return self.render(self._take(RecordedRequest(method, path, headers, body)), body)
        return ScriptedReply(status=404, body={"error": {"message": f"no route {path}"}})

    def render(self, reply: ScriptedReply, request_body: Any) -> ScriptedReply:
        """Hook to adapt a queued reply to the request (e.g. stream it)."""
        return reply


def _make_handler(server: _ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; without TCP_NODELAY the second waits for the
        # client's delayed ACK (~40 ms a request on Linux).
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else b""
            try:
                body = json.loads(data) if data else None
            except json.JSONDecodeError:
                body = data.decode("utf-8", "replace")
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = self.path.split("?", 1)[0]
            self._send(server.handle(method, path, headers, body))

        def _send(self, reply: ScriptedReply) -> None:
            held = b""
            if reply.sse is not None and reply.hold is not None:
                count, _ = reply.hold
                payload, kind = _encode_sse(reply.sse[:count]), "text/event-stream"
                held = _encode_sse(reply.sse[count:])
            elif reply.sse is not None:
                payload, kind = _encode_sse(reply.sse), "text/event-stream"
            elif reply.raw is not None:
                payload, kind = reply.raw, "application/json"
            else:
                payload, kind = json.dumps(reply.body).encode(), "application/json"
            self.send_response(reply.status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload) + len(held)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            if reply.hold is not None:
                self.wfile.flush()
                reply.hold[1].wait(timeout=60)
                self.wfile.write(held)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Stay quiet: pytest output is for failures."""

    return Handler


def _encode_sse(events: Iterable[tuple[str | None, Any]]) -> bytes:
    lines: list[str] = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
        lines.append("")
    return ("\n".join(lines) + "\n").encode()


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


class ScriptedOpenAIServer(_ScriptedServer):
    """Test double: an OpenAI-compatible chat-completions server serving scripted replies."""

    reply_routes = frozenset({("POST", "/v1/chat/completions")})

    def __init__(self, models: Sequence[str] = ("scripted-model",)) -> None:
        super().__init__()
        self.models = list(models)
        self.model_metadata: dict[str, dict[str, Any]] = {}
        """Extra fields of a model's ``GET /v1/models`` entry (``max_model_len``...)."""

    def reset(self) -> None:
        """Forget queued replies, recorded requests and model metadata."""
        super().reset()
        self.model_metadata = {}

    @property
    def base_url(self) -> str:
        """The value for ``OPENAI_BASE_URL``: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    @property
    def environ(self) -> dict[str, str]:
        """An environment for ``resolve_model("openai:NAME", environ=...)`` aimed at this server."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "sk-scripted-test-key"}

    def handle(self, method: str, path: str, headers: dict[str, str], body: Any) -> ScriptedReply:
        if (method, path) == ("GET", "/v1/models"):
            data = [
                {
                    "id": m,
                    "object": "model",
                    "owned_by": "scripted",
                    **self.model_metadata.get(m, {}),
                }
                for m in self.models
            ]
            return ScriptedReply(body={"object": "list", "data": data})
        return super().handle(method, path, headers, body)

    @staticmethod
    def completion_body(
        *,
        text: str | None = None,
        tool_calls: Sequence[tuple[str, str | Mapping[str, Any]]] = (),
        reasoning: str | None = None,
        reasoning_key: str = "reasoning_content",
        usage: tuple[int, int] | None = (10, 5),
        finish_reason: str | None = None,
        model: str = "scripted-model",
    ) -> dict[str, Any]:
        """A ``chat.completion`` JSON body; tool-call arguments given as text are sent as is."""
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning is not None:
            message[reasoning_key] = reasoning
        if tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{index}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for index, (name, args) in enumerate(tool_calls)
            ]
        body: dict[str, Any] = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
                }
            ],
        }
        if usage is not None:
            body["usage"] = {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": usage[0] + usage[1],
            }
        return body

    @classmethod
    def text_reply(cls, text: str, **details: Any) -> ScriptedReply:
        """A plain answer (streamed when asked); ``details`` as for :meth:`completion_body`."""
        return ScriptedReply(body=cls.completion_body(text=text, **details), streamable=True)

    @classmethod
    def tool_calls_reply(
        cls, calls: Sequence[tuple[str, str | Mapping[str, Any]]], **details: Any
    ) -> ScriptedReply:
        """An answer with tool calls ``[(name, arguments), ...]``; ids are ``call_N``."""
        return ScriptedReply(body=cls.completion_body(tool_calls=calls, **details), streamable=True)

    def enqueue_text(self, text: str, **details: Any) -> None:
        """Queue :meth:`text_reply`."""
        self.enqueue(self.text_reply(text, **details))

    def enqueue_tool_calls(
        self, calls: Sequence[tuple[str, str | Mapping[str, Any]]], **details: Any
    ) -> None:
        """Queue :meth:`tool_calls_reply`."""
        self.enqueue(self.tool_calls_reply(calls, **details))

    def enqueue_error(
        self,
        status: int,
        *,
        message: str = "scripted error",
        code: str | None = None,
        type: str = "scripted_error",  # noqa: A002 - the field's name on the wire
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an OpenAI-style error answer (``{"error": {message, type, param, code}}``)."""
        error = {"message": message, "type": type, "param": param, "code": code}
        self.enqueue(
            ScriptedReply(status=status, body={"error": error}, headers=dict(headers or {}))
        )

    def enqueue_stream(self, chunks: Sequence[Mapping[str, Any]], *, done: bool = True) -> None:
        """Queue explicit ``chat.completion.chunk`` bodies, then ``[DONE]`` unless told not to."""
        events: list[tuple[str | None, Any]] = [(None, dict(chunk)) for chunk in chunks]
        if done:
            events.append((None, "[DONE]"))
        self.enqueue(ScriptedReply(sse=events))

    def render(self, reply: ScriptedReply, request_body: Any) -> ScriptedReply:
        wants_stream = isinstance(request_body, dict) and request_body.get("stream") is True
        if not (reply.streamable and wants_stream and reply.status == 200):
            return reply
        options = request_body.get("stream_options") or {}
        return ScriptedReply(sse=_stream_events(reply.body, bool(options.get("include_usage"))))


def _stream_events(body: dict[str, Any], include_usage: bool) -> list[tuple[str | None, Any]]:
    message = body["choices"][0]["message"]
    finish = body["choices"][0]["finish_reason"]

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": body["id"],
            "object": "chat.completion.chunk",
            "created": body["created"],
            "model": body["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    for key in ("reasoning_content", "reasoning"):
        chunks += [chunk({key: piece}) for piece in _pieces(message.get(key) or "")]
    chunks += [chunk({"content": piece}) for piece in _pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        chunks.append(chunk({"tool_calls": [head]}))
        for piece in _pieces(call["function"]["arguments"], 5):
            tail = {"index": index, "function": {"arguments": piece}}
            chunks.append(chunk({"tool_calls": [tail]}))
    chunks.append(chunk({}, finish))
    if include_usage and body.get("usage") is not None:
        usage_chunk = chunk({})
        usage_chunk["choices"], usage_chunk["usage"] = [], body["usage"]
        chunks.append(usage_chunk)
    return [(None, c) for c in chunks] + [(None, "[DONE]")]


class ScriptedAnthropicServer(_ScriptedServer):
    """Test double: an Anthropic Messages API server serving scripted replies."""

    reply_routes = frozenset({("POST", "/v1/messages")})

    @property
    def base_url(self) -> str:
        """The value for ``ANTHROPIC_BASE_URL``: ``http://127.0.0.1:PORT`` (the SDK adds /v1)."""
        return self.url

    @property
    def environ(self) -> dict[str, str]:
        """An environment for ``resolve_model("anthropic:NAME", environ=...)`` aimed here."""
        return {"ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": "sk-ant-scripted-key"}

    @staticmethod
    def message_body(
        content: Sequence[Mapping[str, Any]],
        *,
        stop_reason: str = "end_turn",
        usage: tuple[int, int] = (10, 5),
        model: str = "claude-scripted",
    ) -> dict[str, Any]:
        """A ``message`` JSON body with the given content blocks."""
        return {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [dict(block) for block in content],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }

    @classmethod
    def message_reply(cls, content: Sequence[Mapping[str, Any]], **details: Any) -> ScriptedReply:
        """A message answer made of explicit content blocks (streamed when asked)."""
        return ScriptedReply(body=cls.message_body(content, **details), streamable=True)

    def enqueue_message(self, content: Sequence[Mapping[str, Any]], **details: Any) -> None:
        """Queue :meth:`message_reply`."""
        self.enqueue(self.message_reply(content, **details))

    def render(self, reply: ScriptedReply, request_body: Any) -> ScriptedReply:
        wants_stream = isinstance(request_body, dict) and request_body.get("stream") is True
        if not (reply.streamable and wants_stream and reply.status == 200):
            return reply
        return ScriptedReply(sse=_message_events(reply.body))

    def enqueue_text(self, text: str, **details: Any) -> None:
        """Queue a plain text answer."""
        self.enqueue_message([{"type": "text", "text": text}], **details)

    def enqueue_error(
        self,
        status: int,
        *,
        type: str = "api_error",  # noqa: A002 - the field's name on the wire
        message: str = "scripted error",
        error_code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an Anthropic-style error (``{"type": "error", "error": {...}}``)."""
        error: dict[str, Any] = {"type": type, "message": message}
        if error_code is not None:
            error["details"] = {"error_code": error_code}
        body = {"type": "error", "error": error}
        self.enqueue(ScriptedReply(status=status, body=body, headers=dict(headers or {})))


def _message_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The Messages API event stream that describes ``body``, block by block."""
    head = {**body, "content": [], "stop_reason": None, "stop_sequence": None}
    head["usage"] = {**body["usage"], "output_tokens": 1}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": head})
    ]
    for index, block in enumerate(body["content"]):
        events += [(name, data) for name, data in _block_events(index, block)]
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": body.get("stop_sequence")}
    usage = {"output_tokens": body["usage"]["output_tokens"]}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: Mapping[str, Any]) -> list[tuple[str, Any]]:
    kind = block["type"]
    if kind == "text":
        start, deltas = (
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in _pieces(block["text"])],
        )
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": p}
            for p in _pieces(json.dumps(block["input"]), 5)
        ]
    else:  # redacted_thinking and anything else arrive whole
        start, deltas = dict(block), []
    events = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


class SleepRecorder:
    """Test double for ``time.sleep``: records each requested wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def serve(factory: Callable[[], _ScriptedServer]) -> _ScriptedServer:
    """Build and start a server (the fixtures stop it at session end)."""
    server = factory()
    server.start()
    return server
