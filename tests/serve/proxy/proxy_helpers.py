"""Helpers of the proxy tests: a ``scroll serve`` app on a loopback port (:class:`ProxyServer`),
an upstream backend aimed at a scripted server, and responders that report usage the way a
real server would (the view calibrates its token counts from it)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer

BUDGET = 3_000


class ProxyServer:
    """A ``scroll serve`` app on a loopback port, over its own store (see the module docstring):
    a SQLite Event Log in ``store``, or the open store given as ``log=``."""

    def __init__(self, store: Path, backend: Any, label: str, **settings: Any) -> None:
        import uvicorn

        from scrollctx.kernel import SandboxPolicy
        from scrollctx.log import EventLog
        from scrollctx.serve._network import listen
        from scrollctx.serve.proxy import Proxy, RecallLimits, ViewSettings, build_app

        self.log = settings.pop("log", None) or EventLog.open(store / "history.db")
        self.clients: list[Any] = []
        view = settings.pop("view", ViewSettings(BUDGET, tail_groups=1, keep_results=1))
        limits = settings.pop("limits", RecallLimits(max_steps=4, max_seconds=30, cell_timeout=20))
        token = settings.pop("token", None)
        bounds = {
            key: settings.pop(key)
            for key in ("max_body", "max_requests", "body_seconds")
            if key in settings
        }
        self.proxy = Proxy(self.log, backend, view=view, limits=limits, sandbox=SandboxPolicy(),
                           label=label, **settings)  # fmt: skip
        listener = listen("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        app = build_app(self.proxy, token=token, **bounds)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [listener]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:  # uvicorn's own flag: set once it accepts connections
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the proxy did not start")
            time.sleep(0.01)

    def openai(self, **options: Any) -> Any:
        """An ``openai`` SDK client of this proxy (closed when the proxy stops)."""
        import openai

        options = {"api_key": "client-key", "max_retries": 0, "http_client": _http(), **options}
        return self._keep(openai.OpenAI(base_url=f"{self.url}/v1", **options))

    def anthropic(self, **options: Any) -> Any:
        """An ``anthropic`` SDK client of this proxy (closed when the proxy stops)."""
        import anthropic

        options = {"api_key": "client-key", "max_retries": 0, "http_client": _http(), **options}
        return self._keep(anthropic.Anthropic(base_url=self.url, **options))

    def _keep(self, client: Any) -> Any:
        self.clients.append(client)
        return client

    def events(self, session_id: str) -> list[Any]:
        """The session's events, once its last request is settled (the reply is logged after
        the client has it; the session's lock is held until then)."""
        conversation = self.proxy.conversations.get(session_id)
        if conversation is not None:
            assert conversation.lock.acquire(timeout=30), "the last request never settled"
            conversation.lock.release()
        return self.log.session_events(session_id)

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.proxy.close()
        self.log.close()


def _http() -> Any:
    """The SDKs' own HTTP client, with TCP_NODELAY: a request's headers and body go out in two
    writes, and on loopback the second would wait for the server's delayed ACK (~40 ms)."""
    import socket

    import httpx2

    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    return httpx2.Client(transport=httpx2.HTTPTransport(socket_options=nodelay), timeout=60)


def body_begun(url: str) -> socket.socket:
    """A connection to ``url`` that sent a request's headers and the first byte of its body,
    no more (a client that stalls, or goes away, mid-body)."""
    where = urlsplit(url)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {where.netloc}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")  # fmt: skip
    connection = socket.create_connection((where.hostname, where.port), timeout=30)
    connection.sendall(head.encode())
    return connection


def read_answer(connection: socket.socket) -> bytes:
    """One whole HTTP answer from ``connection``: its head, then ``content-length`` bytes of body
    (a server writes the two apart, so one ``recv`` may hold only the head)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += _received(connection)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
    while len(body) < length:
        body += _received(connection)
    return head + b"\r\n\r\n" + body


def _received(connection: socket.socket) -> bytes:
    chunk = connection.recv(65536)
    if not chunk:
        raise ConnectionError("the server closed the connection mid-answer")
    return chunk


def upstream_backend(kind: str, server: Any, **options: Any) -> Any:
    """The backend the proxy calls its upstream with: a scripted server, one attempt."""
    from scrollctx.agent.backends import RetryPolicy

    if kind == "openai":
        from scrollctx.agent.backends._openai import OpenAIBackend

        return OpenAIBackend(model="scripted-model", base_url=server.base_url, api_key="sk-up",
                             retry=RetryPolicy(max_attempts=1), options=options)  # fmt: skip
    from scrollctx.agent.backends._anthropic import AnthropicBackend

    return AnthropicBackend(model="claude-scripted", base_url=server.base_url, api_key="sk-up",
                            retry=RetryPolicy(max_attempts=1), options=options)  # fmt: skip


def prompt_tokens(request: Any) -> int:
    """What a real server would report as prompt tokens for a recorded request (an estimate)."""
    import json

    from scrollctx.view import estimate_tokens

    body = request.body
    return estimate_tokens(json.dumps([body.get("system"), body.get("messages")]))


def openai_text(text: str, **details: Any) -> Any:
    """A responder: a plain answer whose usage counts the request it answers."""
    return lambda request: ScriptedOpenAIServer.text_reply(
        text, usage=(prompt_tokens(request), 5), **details
    )


def anthropic_text(text: str) -> Any:
    """A responder: a text message whose usage counts the request it answers."""
    return lambda request: ScriptedAnthropicServer.message_reply(
        [{"type": "text", "text": text}], usage=(prompt_tokens(request), 5)
    )
