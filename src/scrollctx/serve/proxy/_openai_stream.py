"""Streaming a request's answers to an OpenAI client as one ``chat.completion.chunk`` stream.

The upstream is called once per step of the recall loop, each call streamed; the client sees
one stream with one id: a role chunk first, then every step's reasoning and text as it arrives
(headline lines held back and dropped, a blank line between the text of two steps), the
client's own tool calls re-indexed from 0, then one chunk with the request's finish reason,
the usage chunk (summed over every call) when the client asked for it, and ``[DONE]``.

Invariant: no chunk ever names ``recall_history_python`` or carries its arguments: a call is
forwarded only once its first delta named a tool of the client's. What was sent is folded into
the reply the log records (:meth:`OpenAIStream.reply`), so the client's echo matches it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scrollctx.agent.backends import StreamBuilder
from scrollctx.serve.proxy._openai_wire import OPENAI, finish_reason
from scrollctx.serve.proxy._wire import ClientRequest, VisibleText

__all__ = ["OpenAIStream"]

_REASONING_KEYS = ("reasoning_content", "reasoning")


class OpenAIStream:
    """Translates upstream chunks into the client's stream (see the module docstring)."""

    def __init__(self, request: ClientRequest, own: str, sent: StreamBuilder) -> None:
        self.request, self.own, self.sent = request, own, sent
        self.head: dict[str, Any] | None = None
        self.calls: dict[int, int | None] = {}
        self.next_call = 0
        self.stripper = VisibleText()
        self.shown = {"content": False, "reasoning": False}
        self.gap = {"content": False, "reasoning": False}
        self.upstream_finish: str | None = None

    def start_answer(self) -> None:
        """An upstream call begins."""
        self.calls = {}
        self.stripper = VisibleText()
        self.gap = dict(self.shown)  # text of an earlier step: a blank line before the next

    def feed(self, chunk: Mapping[str, Any]) -> list[bytes]:
        """One upstream chunk in; the client's chunks out."""
        out = []
        if self.head is None:
            out.append(self._start(chunk))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            for key in _REASONING_KEYS:
                if isinstance(delta.get(key), str) and delta[key]:
                    out.append(self._piece(key, delta[key], "reasoning"))
            if isinstance(delta.get("content"), str) and delta["content"]:
                visible = self.stripper.feed(delta["content"])
                if visible:
                    out.append(self._piece("content", visible, "content"))
            for call in delta.get("tool_calls") or []:
                out += self._call(call)
            self.upstream_finish = choice.get("finish_reason") or self.upstream_finish
        return out

    def end_answer(self) -> list[bytes]:
        """The upstream call ended: what the headline stripper held back, if it is text."""
        rest = self.stripper.finish()
        return [self._piece("content", rest, "content")] if rest else []

    def reply(self) -> dict[str, Any]:
        """The assistant message the client has been sent."""
        return dict(self.sent.answer()["choices"][0]["message"])

    def finish(self, usage: Any, extension: Mapping[str, Any]) -> list[bytes]:
        """The request's last chunks: finish reason (and ``scroll``), usage if asked, ``[DONE]``."""
        out = [] if self.head is not None else [self._start()]
        choice = {"index": 0, "delta": {},
                  "finish_reason": finish_reason(self.upstream_finish, self.reply())}  # fmt: skip
        out.append(self._encode({**(self.head or {}), "choices": [choice],
                                 "scroll": dict(extension)}))  # fmt: skip
        if self.request.stream_usage and usage is not None:
            out.append(self._encode({**(self.head or {}), "choices": [], "usage": usage}))
        out.append(b"data: [DONE]\n\n")
        return out

    def error(self, status: int, message: str) -> list[bytes]:
        """An error after the stream began (the SDKs raise it from the stream)."""
        return [self._encode(OPENAI.error_body(status, message))]

    def _start(self, chunk: Mapping[str, Any] | None = None) -> bytes:
        first = chunk or {}
        self.head = {
            "id": first.get("id") or "chatcmpl-scroll",
            "object": "chat.completion.chunk",
            "created": first.get("created") or 0,
            "model": first.get("model") or "",
        }
        return self._chunk({"role": "assistant", "content": ""})

    def _piece(self, key: str, text: str, kind: str) -> bytes:
        if self.gap[kind]:
            text, self.gap[kind] = "\n\n" + text, False
        self.shown[kind] = True
        return self._chunk({key: text})

    def _call(self, call: Mapping[str, Any]) -> list[bytes]:
        index = int(call.get("index") or 0)
        if index not in self.calls:
            name = (call.get("function") or {}).get("name")
            if name == self.own:
                self.calls[index] = None
            else:
                self.calls[index], self.next_call = self.next_call, self.next_call + 1
        mapped = self.calls[index]
        if mapped is None:
            return []
        return [self._chunk({"tool_calls": [{**call, "index": mapped}]})]

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return self._encode({**(self.head or {}), "choices": [choice]})

    def _encode(self, body: dict[str, Any]) -> bytes:
        if "choices" in body and body["choices"]:
            self.sent.add(body)
        return b"data: " + json.dumps(body).encode() + b"\n\n"
