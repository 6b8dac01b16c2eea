"""Streaming a request's answers to an Anthropic client as one Messages event stream.

The upstream is called once per step of the recall loop, each call streamed; the client sees
one message: the first call's ``message_start``, then every step's content blocks as they
arrive, re-indexed from 0 across steps (thinking blocks and their signatures as sent; a text
block announced only once it has visible text, headline lines dropped; the client's tool
calls), then one ``message_delta`` with the request's stop reason, the usage summed over every
call and a ``scroll`` field, and ``message_stop``.

Invariant: no event ever carries a ``tool_use`` block of ``recall_history_python`` or its input:
such a block is dropped from its ``content_block_start`` on. What was sent is folded into the
reply the log records (:meth:`AnthropicStream.reply`), so the client's echo matches it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scrollctx.agent.backends import StreamBuilder
from scrollctx.serve.proxy._anthropic_wire import ANTHROPIC, stop_reason
from scrollctx.serve.proxy._wire import ClientRequest, VisibleText

__all__ = ["AnthropicStream"]


@dataclass(slots=True)
class _Text:
    """An upstream text block whose start waits for its first visible text."""

    start: dict[str, Any]
    stripper: VisibleText = field(default_factory=VisibleText)


class AnthropicStream:
    """Translates upstream events into the client's stream (see the module docstring)."""

    def __init__(self, request: ClientRequest, own: str, sent: StreamBuilder) -> None:
        self.request, self.own, self.sent = request, own, sent
        self.started = False
        self.blocks: dict[int, int | None] = {}
        self.texts: dict[int, _Text] = {}
        self.next_block = 0
        self.upstream_stop: str | None = None
        self.stop_sequence: Any = None

    def start_answer(self) -> None:
        """An upstream call begins (its block indexes start again at 0)."""
        self.blocks, self.texts = {}, {}

    def feed(self, event: Mapping[str, Any]) -> list[bytes]:
        """One upstream event in; the client's events out."""
        kind = event.get("type")
        if kind == "message_start":
            if self.started:
                return []
            self.started = True
            return [self._encode(dict(event))]
        if kind == "content_block_start":
            return self._block_start(int(event["index"]), event["content_block"])
        if kind == "content_block_delta":
            return self._delta(int(event["index"]), event["delta"])
        if kind == "content_block_stop":
            return self._block_stop(int(event["index"]))
        if kind == "message_delta":
            delta = event.get("delta") or {}
            self.upstream_stop = delta.get("stop_reason") or self.upstream_stop
            self.stop_sequence = delta.get("stop_sequence", self.stop_sequence)
        return []  # message_delta and message_stop come once, at the end; pings are dropped

    def end_answer(self) -> list[bytes]:
        """The upstream call ended (every block was stopped already)."""
        return []

    def reply(self) -> dict[str, Any]:
        """The assistant message the client has been sent."""
        answer = self.sent.answer()
        return {"role": "assistant", "content": list(answer.get("content") or [])}

    def finish(self, usage: Any, extension: Mapping[str, Any]) -> list[bytes]:
        """``message_delta`` (stop reason, summed usage, ``scroll``) and ``message_stop``."""
        out = [] if self.started else [self._encode(_empty_start())]
        self.started = True
        delta = {"stop_reason": stop_reason(self.upstream_stop, self.reply()),
                 "stop_sequence": self.stop_sequence}  # fmt: skip
        last: dict[str, Any] = {"type": "message_delta", "delta": delta}
        if usage is not None:
            last["usage"] = usage
        last["scroll"] = dict(extension)
        out.append(self._encode(last))
        out.append(self._encode({"type": "message_stop"}))
        return out

    def error(self, status: int, message: str) -> list[bytes]:
        """An ``error`` event (the SDK raises it from the stream)."""
        return [self._encode(ANTHROPIC.error_body(status, message))]

    def _block_start(self, index: int, block: Mapping[str, Any]) -> list[bytes]:
        if block.get("type") == "tool_use" and block.get("name") == self.own:
            self.blocks[index] = None
            return []
        if block.get("type") == "text":
            self.texts[index] = _Text(dict(block))
            return []
        return [self._start(index, block)]

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[bytes]:
        text = self.texts.get(index)
        if text is not None and delta.get("type") == "text_delta":
            return self._visible(index, text, text.stripper.feed(str(delta.get("text") or "")))
        mapped = self.blocks.get(index)
        if mapped is None:
            return []
        return [
            self._encode({"type": "content_block_delta", "index": mapped, "delta": dict(delta)})
        ]

    def _block_stop(self, index: int) -> list[bytes]:
        out: list[bytes] = []
        text = self.texts.pop(index, None)
        if text is not None:
            rest = text.stripper.finish()
            out = self._visible(index, text, rest) if rest.strip() else []
        mapped = self.blocks.get(index)
        if mapped is not None:
            out.append(self._encode({"type": "content_block_stop", "index": mapped}))
        return out

    def _visible(self, index: int, text: _Text, piece: str) -> list[bytes]:
        if not piece:
            return []
        out = [] if index in self.blocks else [self._start(index, {**text.start, "text": ""})]
        mapped = self.blocks[index]
        delta = {"type": "text_delta", "text": piece}
        out.append(self._encode({"type": "content_block_delta", "index": mapped, "delta": delta}))
        return out

    def _start(self, index: int, block: Mapping[str, Any]) -> bytes:
        self.blocks[index], self.next_block = self.next_block, self.next_block + 1
        event = {"type": "content_block_start", "index": self.blocks[index],
                 "content_block": dict(block)}  # fmt: skip
        return self._encode(event)

    def _encode(self, event: dict[str, Any]) -> bytes:
        self.sent.add(event)
        data = json.dumps(event)  # ASCII: no U+2028 for a line splitter to trip on
        return f"event: {event['type']}\ndata: {data}\n\n".encode()


def _empty_start() -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": "msg_scroll",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    return {"type": "message_start", "message": message}
