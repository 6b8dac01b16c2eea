"""The OpenAI chat-completions wire: client requests in, upstream bodies out, replies back.

What a client may send: ``messages`` (system or developer messages only before the first other
message: they become the system prompt), ``tools``, ``stream`` and ``stream_options``, and any
other key, which goes upstream as sent. ``n`` other than 1 is refused (one reply per request).
The OpenAI backend shapes the messages on their way upstream as it does for its own calls
(wire keys only, content never null, reasoning kept local).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from scrollctx.agent.backends import ToolSpec
from scrollctx.errors import UsageError
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

__all__ = ["OPENAI", "OpenAIWire"]

_ROLES = ("user", "assistant", "tool")
_SYSTEM_ROLES = ("system", "developer")
_REASONING_KEYS = ("reasoning_content", "reasoning")
_OWN_KEYS = ("messages", "tools", "stream", "stream_options")


class OpenAIWire:
    """Chat completions, both directions (see the module docstring)."""

    name = "openai"

    def parse(self, body: Any) -> ClientRequest:
        """Check a chat-completions body and split it (each new message: :meth:`check`)."""
        fields = body_fields(body)
        system, offset = _leading_system(fields.messages)
        require(body.get("n") in (None, 1), "`n` must be 1: scroll serve answers one choice")
        options = body.get("stream_options") or {}
        require(isinstance(options, dict), "`stream_options` must be an object")
        return ClientRequest(
            wire=self.name,
            system=system,
            messages=tuple(fields.messages[offset:]),
            tools=fields.tools,
            params={k: v for k, v in body.items() if k not in _OWN_KEYS},
            stream=fields.stream,
            offset=offset,
            stream_usage=bool(options.get("include_usage")),
        )

    def check(self, message: Mapping[str, Any], position: int) -> None:
        """A user, assistant or tool message of the chat-completions shape."""
        require(
            message.get("role") not in _SYSTEM_ROLES,
            f"message {position} is a system message after the conversation began; scroll "
            "serve takes system and developer messages only at the start",
        )
        _check_message(message, position)

    def fingerprint(self, message: Mapping[str, Any]) -> bytes:
        """Role, text, tool calls (arguments as parsed JSON), and the call a result answers.

        Any object has one: a message is digested before :meth:`check` refuses it.
        """
        calls = message.get("tool_calls")
        keys = [_call_key(call) for call in calls] if isinstance(calls, list) else calls
        shown = canonical_json(keys) if calls else ""
        text = _content_text(message.get("content"))
        return fields(message.get("role"), text, shown, message.get("tool_call_id"))

    def upstream_body(
        self, request: ClientRequest, view: RenderedView, recall: ToolSpec, *, last: bool
    ) -> dict[str, Any]:
        """The view as chat messages, the client's tools and ``recall``, its options."""
        body: dict[str, Any] = dict(request.params)
        body["messages"] = view.messages
        body["tools"] = [*request.tools, recall.to_openai()]
        if last:
            body["tool_choice"] = "none"
        return body

    def message_of(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """``choices[0].message`` of a chat completion."""
        choices = raw.get("choices") or [{}]
        message = dict(choices[0].get("message") or {})
        message.setdefault("role", "assistant")
        return message

    def result_message(self, call_id: str, name: str, text: str, ok: bool) -> dict[str, Any]:
        """A ``tool`` message."""
        return {"role": "tool", "tool_call_id": call_id, "name": name, "content": text}

    def client_reply(self, answers: Sequence[Answer], own: str) -> dict[str, Any]:
        """The last answer's message with every step's text and reasoning, and no ``own`` call."""
        messages = [answer.message for answer in answers]
        last = dict(messages[-1])
        texts = [strip_headline(m.get("content") or "").strip() for m in messages]
        text = "\n\n".join(t for t in texts if t)
        calls = [c for c in last.get("tool_calls") or [] if _call_name(c) != own]
        last.pop("tool_calls", None)
        last["content"] = text if text or last.get("content") is not None else None
        if calls:
            last["tool_calls"] = calls
            last["content"] = text or None
        for key in _REASONING_KEYS:
            pieces = [m[key] for m in messages if isinstance(m.get(key), str) and m[key]]
            if pieces:
                last[key] = "\n\n".join(pieces)
        return last

    def response(
        self, last: Answer, reply: Mapping[str, Any], usage: Any, extension: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A ``chat.completion`` around ``reply`` with the summed usage and ``scroll`` field."""
        choice = dict((last.raw.get("choices") or [{}])[0])
        choice["message"] = dict(reply)
        choice["finish_reason"] = finish_reason(choice.get("finish_reason"), reply)
        return answer_body(last, {"choices": [choice]}, usage, extension)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """``{"error": {message, type, param, code}}``."""
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}


OPENAI = OpenAIWire()


def finish_reason(upstream: str | None, reply: Mapping[str, Any]) -> str | None:
    """``tool_calls`` when the client has calls to run; never ``tool_calls`` for ours alone."""
    if reply.get("tool_calls"):
        return "tool_calls"
    return "stop" if upstream == "tool_calls" else upstream


def _leading_system(messages: list[Any]) -> tuple[str, int]:
    """The system prompt (the leading system and developer messages) and how many there are."""
    for position, message in enumerate(messages):
        if message.get("role") not in _SYSTEM_ROLES:
            parts = [_content_text(m.get("content")) for m in messages[:position]]
            return "\n\n".join(parts), position
    raise UsageError("`messages` holds only system messages; add a user message")


def _check_message(message: Mapping[str, Any], position: int) -> None:
    role = message.get("role")
    require(role in _ROLES, f"message {position} has role {role!r}; use user, assistant or tool")
    content = message.get("content")
    require(
        content is None
        or isinstance(content, str)
        or (isinstance(content, list) and all(isinstance(part, dict) for part in content)),
        f"message {position}: `content` must be a string, a list of part objects or null",
    )
    if role == "tool":
        require(
            isinstance(message.get("tool_call_id"), str) and bool(message["tool_call_id"]),
            f"message {position} (tool) needs the `tool_call_id` of the call it answers",
        )
    calls = message.get("tool_calls")
    if calls is not None:
        require(
            role == "assistant" and isinstance(calls, list)
            and all(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls),
            f"message {position}: `tool_calls` must be a list of "
            '{"id", "type": "function", "function": {"name", "arguments"}} on an assistant message',
        )  # fmt: skip


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    pieces = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            pieces.append(str(part.get("text") or "").strip())
        else:
            pieces.append(json.dumps(part, sort_keys=True, ensure_ascii=False))
    return "\n".join(p for p in pieces if p)


def _call_key(call: Any) -> Any:
    """What a tool call's fingerprint keeps: id, name, arguments (another shape as it is)."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return call
    return [call.get("id"), function.get("name"), _arguments(function.get("arguments"))]


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):  # not JSON, too deep, an integer too long
            return raw
    return raw


def _call_name(call: Mapping[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")
