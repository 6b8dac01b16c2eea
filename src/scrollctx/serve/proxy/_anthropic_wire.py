"""The Anthropic Messages wire: client requests in, upstream bodies out, replies back.

What a client may send: ``system`` (text or text blocks), ``messages`` of content blocks
(text, images, documents, ``tool_use`` / ``tool_result``, ``thinking`` and
``redacted_thinking`` with their signatures), ``tools``, ``stream`` and any other key, which
goes upstream as sent. Thinking blocks travel byte for byte both ways.

Prompt caching: the log keeps every ``cache_control`` mark the client sent, but the view's
messages are not the client's, so marks on them would point at the wrong places (and the API
takes at most four). When the client used caching, the upstream request carries two marks of
the proxy's own: on the system prompt, and on the last block of the last message.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from scrollctx.agent.backends import ToolSpec
from scrollctx.serve.proxy._wire import (
    Answer,
    ClientRequest,
    answer_body,
    body_fields,
    canonical_json,
    fields,
    require,
)
from scrollctx.view import RenderedView, strip_headline

__all__ = ["ANTHROPIC", "AnthropicWire"]

_ROLES = ("user", "assistant")
_THINKING = ("thinking", "redacted_thinking")
_OWN_KEYS = ("system", "messages", "tools", "stream")
_EPHEMERAL = {"type": "ephemeral"}


class AnthropicWire:
    """Messages, both directions (see the module docstring)."""

    name = "anthropic"

    def parse(self, body: Any) -> ClientRequest:
        """Check a Messages body and split it (each new message: :meth:`check`)."""
        fields = body_fields(body)
        recent = json.dumps(fields.messages[-3:], default=str)
        return ClientRequest(
            wire=self.name,
            system=_system_text(body.get("system")),
            messages=tuple(fields.messages),
            tools=fields.tools,
            params={k: v for k, v in body.items() if k not in _OWN_KEYS},
            stream=fields.stream,
            cached="cache_control" in json.dumps(body.get("system"), default=str)
            or "cache_control" in recent,
        )

    def check(self, message: Mapping[str, Any], position: int) -> None:
        """A user or assistant message of content blocks."""
        _check_message(message, position)

    def fingerprint(self, message: Mapping[str, Any]) -> bytes:
        """Role and the content blocks that survive an echo (thinking and cache marks drop)."""
        content = message.get("content")
        if isinstance(content, str):
            blocks: Any = [["text", content.strip()]] if content.strip() else []
        elif isinstance(content, list):
            blocks = [b for b in (_canonical_block(block) for block in content) if b]
        else:  # not a message: digested as it is, then refused by check
            blocks = content
        return fields(message.get("role"), canonical_json(blocks))

    def upstream_body(
        self, request: ClientRequest, view: RenderedView, recall: ToolSpec, *, last: bool
    ) -> dict[str, Any]:
        """The view as Messages, the client's tools and ``recall``, its options."""
        body: dict[str, Any] = dict(request.params)
        messages = _without_cache_marks(view.messages)
        if view.system:
            body["system"] = view.system
        if request.cached:
            body["system"] = [{"type": "text", "text": view.system, "cache_control": _EPHEMERAL}]
            _mark_last_block(messages)
        body["messages"] = messages
        body["tools"] = [*request.tools, recall.to_anthropic()]
        if last:
            body["tool_choice"] = {"type": "none"}
        return body

    def message_of(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The answer's role and content blocks."""
        return {"role": raw.get("role") or "assistant", "content": list(raw.get("content") or [])}

    def result_message(self, call_id: str, name: str, text: str, ok: bool) -> dict[str, Any]:
        """A user message holding one ``tool_result`` block."""
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if not ok:
            block["is_error"] = True
        return {"role": "user", "content": [block]}

    def client_reply(self, answers: Sequence[Answer], own: str) -> dict[str, Any]:
        """Every step's blocks in order: thinking as sent, text without headline lines, the
        client's tool calls; no ``tool_use`` of ``own``."""
        blocks: list[dict[str, Any]] = []
        for answer in answers:
            for block in answer.message["content"]:
                kind = block.get("type")
                if kind == "tool_use" and block.get("name") == own:
                    continue
                if kind == "text":
                    text = strip_headline(block.get("text") or "").rstrip()
                    if not text.strip():
                        continue
                    block = {**block, "text": text}
                blocks.append(block)
        return {"role": "assistant", "content": blocks}

    def response(
        self, last: Answer, reply: Mapping[str, Any], usage: Any, extension: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A ``message`` around ``reply`` with the summed usage and a ``scroll`` field."""
        changes = {"content": list(reply["content"]),
                   "stop_reason": stop_reason(last.raw.get("stop_reason"), reply)}  # fmt: skip
        return answer_body(last, changes, usage, extension)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """``{"type": "error", "error": {type, message}}``."""
        kind = "invalid_request_error" if status < 500 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": message}}


ANTHROPIC = AnthropicWire()


def stop_reason(upstream: str | None, reply: Mapping[str, Any]) -> str | None:
    """``tool_use`` when the client has calls to run; never ``tool_use`` for ours alone."""
    if any(block.get("type") == "tool_use" for block in reply["content"]):
        return "tool_use"
    return "end_turn" if upstream == "tool_use" else upstream


def _check_message(message: Mapping[str, Any], position: int) -> None:
    role = message.get("role")
    require(role in _ROLES, f"message {position} has role {role!r}; use user or assistant")
    content = message.get("content")
    require(
        isinstance(content, str)
        or (isinstance(content, list) and all(_is_block(b) for b in content)),
        f"message {position}: `content` must be a string or a list of blocks with a `type`",
    )
    for block in content if isinstance(content, list) else []:
        if block["type"] == "tool_use":
            require(
                role == "assistant" and isinstance(block.get("id"), str),
                f"message {position}: a tool_use block needs an `id` and an assistant message",
            )
        if block["type"] == "tool_result":
            require(
                role == "user" and isinstance(block.get("tool_use_id"), str),
                f"message {position}: a tool_result block needs a `tool_use_id` and a user message",
            )


def _is_block(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("type"), str)


def _system_text(system: Any) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    require(
        isinstance(system, list) and all(_is_block(b) and b["type"] == "text" for b in system),
        "`system` must be a string or a list of text blocks",
    )
    return "\n\n".join(str(block.get("text") or "") for block in system)


def _canonical_block(block: Any) -> Any:
    if not isinstance(block, Mapping):
        return block  # not a block: check refuses it
    kind = block.get("type")
    if kind in _THINKING:
        return None
    if kind == "text":
        text = str(block.get("text") or "").strip()
        return ["text", text] if text else None
    if kind == "tool_use":
        return ["tool_use", block.get("id"), block.get("name"), block.get("input")]
    if kind == "tool_result":
        result = block.get("content")
        if isinstance(result, str):
            content: Any = result.strip()
        elif isinstance(result, list) or result is None:
            content = [_canonical_block(b) for b in result or [] if isinstance(b, Mapping)]
        else:
            content = result  # not a result: check refuses it
        return ["tool_result", block.get("tool_use_id"), content, bool(block.get("is_error"))]
    return [kind, {k: v for k, v in block.items() if k != "cache_control"}]


def _without_cache_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The view's rendered messages are cached and read-only: copy what changes.
    cleaned = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any("cache_control" in b for b in content):
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
            message = {**message, "content": content}
        cleaned.append(message)
    return cleaned


def _mark_last_block(messages: list[dict[str, Any]]) -> None:
    if not messages:
        return
    last = messages[-1]
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    else:
        content = copy.copy(content)
    markable = [i for i, b in enumerate(content) if b.get("type") not in _THINKING]
    if markable:  # thinking blocks take no cache mark
        content[markable[-1]] = {**content[markable[-1]], "cache_control": _EPHEMERAL}
    messages[-1] = {**last, "content": content}
