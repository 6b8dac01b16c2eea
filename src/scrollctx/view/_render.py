"""Turns to provider messages: OpenAI chat messages and Anthropic Messages.

A turn rendered to the provider it came from is exactly what that provider sent (its own keys,
reasoning and thinking blocks, tool-call argument strings), with one possible change: a folded
tool result's content is replaced by its stub. Across providers the conversion is the usual one;
an OpenAI ``reasoning_content`` is not sent to Anthropic, whose API rejects unsigned thinking
blocks, and Anthropic thinking text becomes OpenAI ``reasoning_content``.

Anthropic rules kept here: the system prompt is separate; consecutive messages of one role are
merged into one message (tool results first); the first body message is a user message.

OpenAI-compatible servers apply the model's chat template, and many templates enforce strict
user/assistant alternation (a llama.cpp server rejects two user turns in a row). So the view's
own scaffolding never stands alone there (:func:`openai_layout`): the index text opens the first
user message, the namespace digest closes the last user or tool message, and consecutive plain
text user messages become one (blank line between).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from scrollctx.view._turns import Turn

__all__ = ["merge_anthropic", "openai_layout", "to_anthropic", "to_openai", "user_text"]


def user_text(text: str) -> Turn:
    """Return a synthetic user turn carrying view scaffolding (index, digest)."""
    return Turn("user", text, "view", [{"type": "text", "n": len(text)}], synthetic=True)


def to_openai(turn: Turn, stub: str | None = None) -> dict[str, Any]:
    """Render one turn as an OpenAI chat message; ``stub`` replaces a folded result's text."""
    if turn.source == "openai" and turn.native is not None:
        message = copy.deepcopy(turn.native)
        if turn.content_form != "absent":
            message["content"] = stub if stub is not None else _rebuild_content(turn)
        return message
    if turn.role == "tool":
        text = stub if stub is not None else turn.text
        return {"role": "tool", "tool_call_id": turn.tool_call_id, "content": text}
    if turn.role == "user":
        return {"role": "user", "content": turn.text}
    return _assistant_to_openai(turn)


def _rebuild_content(turn: Turn) -> Any:
    if turn.content_form == "none":
        return None
    if turn.content_form == "str":
        return turn.text
    texts = iter(turn.texts())
    parts: list[Any] = []
    for block in turn.blocks:
        if block["type"] == "text":
            parts.append({**block["raw"], "text": next(texts)})
        elif block["type"] == "part":
            parts.append(copy.deepcopy(block["raw"]))
    return parts


def _assistant_to_openai(turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    thinking = [b["raw"].get("thinking", "") for b in turn.blocks if b["type"] == "reasoning"]
    if any(thinking):
        message["reasoning_content"] = "\n\n".join(t for t in thinking if t)
    calls = [
        {"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": b["args"]}}
        for b in turn.blocks
        if b["type"] == "call"
    ]
    if calls:
        message["tool_calls"] = calls
    return message


def to_anthropic(turn: Turn, stub: str | None = None) -> dict[str, Any]:
    """Render one turn as an Anthropic message (a tool result becomes a user message)."""
    if turn.role == "tool":
        return {"role": "user", "content": [_tool_result(turn, stub)]}
    if turn.source == "anthropic" and turn.content_form == "str":
        return {"role": turn.role, "content": turn.text}
    if turn.source == "anthropic":
        return {"role": turn.role, "content": _anthropic_blocks(turn)}
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for block in turn.blocks:
        if block["type"] == "call":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": _input(block),
                }
            )
    if turn.role == "user" and len(blocks) == 1:
        return {"role": "user", "content": turn.text}
    return {"role": turn.role, "content": blocks or [{"type": "text", "text": ""}]}


def _anthropic_blocks(turn: Turn) -> list[dict[str, Any]]:
    texts = iter(turn.texts())
    blocks: list[dict[str, Any]] = []
    for block in turn.blocks:
        if block["type"] == "text":
            blocks.append({**block["raw"], "text": next(texts)})
        else:
            blocks.append(copy.deepcopy(block["raw"]))
    return blocks


def _tool_result(turn: Turn, stub: str | None) -> dict[str, Any]:
    if turn.source == "anthropic" and turn.native is not None:
        block = copy.deepcopy(turn.native)
    else:
        block = {"type": "tool_result", "tool_use_id": turn.tool_call_id}
        if turn.is_error:
            block["is_error"] = True
    if stub is not None:
        block["content"] = stub
    elif turn.content_form == "list":
        block["content"] = _rebuild_content(turn)
    elif turn.content_form == "str":
        block["content"] = turn.text
    return block


def _input(block: dict[str, Any]) -> Any:
    try:
        return json.loads(block["args"]) if block["args"] else {}
    except json.JSONDecodeError:
        return {"_arguments": block["args"]}


def merge_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge consecutive same-role messages (tool results first) as the Messages API expects."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            previous = merged[-1]
            content = _as_blocks(previous["content"]) + _as_blocks(message["content"])
            results = [b for b in content if b.get("type") == "tool_result"]
            others = [b for b in content if b.get("type") != "tool_result"]
            merged[-1] = {"role": previous["role"], "content": results + others}
        else:
            merged.append(message)
    return merged


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def openai_layout(
    body: list[dict[str, Any]], index_text: str, digest_text: str
) -> list[dict[str, Any]]:
    """The OpenAI body with no two user messages in a row (see the module docstring).

    ``body`` is the rendered turns (read-only: changed messages are copies); ``index_text`` and
    ``digest_text`` the scaffolding ("" for none). Text joins text with a blank line; a message
    of content parts gets the text as a part of its own.
    """
    messages = list(body)
    if index_text:
        if messages and _joinable(messages[0], "user"):
            messages[0] = {**messages[0], "content": _joined(index_text, messages[0]["content"])}
        else:
            messages.insert(0, {"role": "user", "content": index_text})
    if digest_text:
        if messages and (_joinable(messages[-1], "user") or _joinable(messages[-1], "tool")):
            last = messages[-1]
            messages[-1] = {**last, "content": _joined(last["content"], digest_text)}
        else:
            messages.append({"role": "user", "content": digest_text})
    merged: list[dict[str, Any]] = []
    after_user = False  # whether merged[-1] is a joinable user message (a join keeps it one)
    for message in messages:
        joinable = message.get("role") == "user" and _joinable(message, "user")
        if after_user and joinable:
            content = _joined(merged[-1]["content"], message["content"])
            merged[-1] = {**merged[-1], "content": content}
        else:
            merged.append(message)
            after_user = joinable
    return merged


def _joinable(message: dict[str, Any], role: str) -> bool:
    """A message of ``role`` whose content is text or content parts (no tool calls)."""
    return (
        message.get("role") == role
        and isinstance(message.get("content"), str | list)
        and not message.get("tool_calls")
    )


def _joined(first: Any, second: Any) -> Any:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    return _parts(first) + _parts(second)


def _parts(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
