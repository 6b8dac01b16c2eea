"""Live turns: one provider message (or one tool result) bound to one Event Log ``seq``.

A :class:`Turn` is provider-neutral: its text (what the log stores as ``content``) plus a list
of structural blocks. Everything that is not text is kept as the provider sent it: OpenAI
``tool_calls``, ``reasoning_content`` and any other key of the message, Anthropic ``thinking``,
``redacted_thinking`` and ``tool_use`` blocks, so rendering back to the same provider is
byte-for-byte what came in. Text blocks record only their length ``n``; their text is the
matching slice of :attr:`Turn.text` (blocks are joined with ``TEXT_JOIN``), so the log keeps
each text once, in ``content``, where search and payload externalization already work.

Persisted shape: ``metadata["view_turn"]`` of the turn's event, the dict from :meth:`Turn.to_meta`.
An event enters the working view if and only if it carries that key.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from scrollctx.errors import UsageError
from scrollctx.log import Event, Kind, NewEvent, extractive_label
from scrollctx.view.headlines import parse_headline, strip_headline

__all__ = [
    "PROVIDERS",
    "TEXT_JOIN",
    "VIEW_KEY",
    "Turn",
    "split_message",
    "turn_from_event",
]

PROVIDERS = ("openai", "anthropic")
VIEW_KEY = "view_turn"
TEXT_JOIN = "\n\n"
_ROLE_KIND = {"user": Kind.USER_MESSAGE, "assistant": Kind.MODEL_TURN, "tool": Kind.TOOL_RESULT}
_REASONING_TYPES = ("thinking", "redacted_thinking")


@dataclass(slots=True, eq=False)
class Turn:
    """One live message of the view. ``seq`` is ``None`` until the turn is persisted."""

    role: str
    text: str
    source: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    native: dict[str, Any] | None = None
    content_form: str = "str"
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    synthetic: bool = False
    headline: str | None = None
    label: str | None = None
    seq: int | None = None
    folded: bool = False
    pinned: bool = False
    raw_tokens: int = 0
    stub_tokens: int = 0
    fields: dict[str, Any] = field(default_factory=dict)
    """Extra event columns (step_index, msg_index…) used when the view persists the turn."""
    cache: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Rendered messages by provider; cleared when the turn is folded."""

    @property
    def tokens(self) -> int:
        """Raw tokens this turn costs in the view now (its stub's if folded)."""
        return self.stub_tokens if self.folded else self.raw_tokens

    @property
    def call_ids(self) -> list[str]:
        """Return the ids of the tool calls this (assistant) turn makes."""
        return [str(b["id"]) for b in self.blocks if b["type"] == "call"]

    @property
    def is_real_user(self) -> bool:
        """Whether this is a request a person typed (not a nudge, not a tool result)."""
        return self.role == "user" and not self.synthetic

    def texts(self) -> list[str]:
        """Return the text of each text block, in order."""
        pieces: list[str] = []
        start = 0
        for block in self.blocks:
            if block["type"] == "text":
                pieces.append(self.text[start : start + block["n"]])
                start += block["n"] + len(TEXT_JOIN)
        return pieces

    def structure_text(self) -> str:
        """Return the non-text parts as text, for token counting (reasoning, calls)."""
        parts: list[str] = []
        for block in self.blocks:
            if block["type"] == "call":
                parts += [str(block["name"]), str(block["args"])]
            elif block["type"] in ("reasoning", "part"):
                raw = block["raw"]
                parts.append(str(raw.get("thinking") or raw.get("data") or json.dumps(raw)))
        if self.native is not None:
            extra = {k: v for k, v in self.native.items() if k not in ("role", "content")}
            extra.pop("tool_calls", None)
            extra.pop("tool_call_id", None)
            parts += [v if isinstance(v, str) else json.dumps(v) for v in extra.values()]
        return "\n".join(parts)

    def to_meta(self) -> dict[str, Any]:
        """Return the JSON-able ``metadata["view_turn"]`` that rebuilds this turn from its event."""
        return {
            "v": 1,
            "role": self.role,
            "source": self.source,
            "blocks": self.blocks,
            "native": self.native,
            "content_form": self.content_form,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "is_error": self.is_error,
            "synthetic": self.synthetic,
        }

    def to_event(self, session_id: str, **fields: Any) -> NewEvent:
        """Return the event that persists this turn (``fields`` add lineage: agent_id, run_id…)."""
        tool_input = None
        if self.role == "assistant" and self.call_ids:
            tool_input = [
                {"id": b["id"], "name": b["name"], "arguments": b["args"]}
                for b in self.blocks
                if b["type"] == "call"
            ]
        metadata = dict(fields.pop("metadata", None) or {})
        metadata[VIEW_KEY] = self.to_meta()
        return NewEvent(
            session_id=session_id,
            kind=_ROLE_KIND[self.role],
            content=self.text,
            role=self.role,
            name=self.tool_name,
            headline=self.headline,
            tool_call_id=self.tool_call_id,
            tool_input=tool_input,
            metadata=metadata,
            **fields,
        )


def split_message(message: dict[str, Any], provider: str, *, synthetic: bool = False) -> list[Turn]:
    """Split one provider message into turns (an Anthropic user message may hold several).

    Raises:
        UsageError: unknown provider or role, or a message that is not a dict.
    """
    if not isinstance(message, dict):
        raise UsageError(f"a message must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if provider == "openai":
        turns = [_from_openai(message)]
    elif provider == "anthropic":
        turns = _from_anthropic(message)
    else:
        raise UsageError(f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    for turn in turns:
        if turn.role not in _ROLE_KIND:
            raise UsageError(
                f"role {role!r} cannot be a live turn; pass the system prompt to WorkingView"
            )
        turn.synthetic = synthetic and turn.role == "user"
        _describe(turn)
    return turns


def turn_from_event(event: Event, text: str) -> Turn:
    """Rebuild a turn from its persisted event; ``text`` is the event's full content."""
    meta = event.metadata[VIEW_KEY]
    turn = Turn(
        role=meta["role"],
        text=text,
        source=meta["source"],
        blocks=meta["blocks"],
        native=meta["native"],
        content_form=meta["content_form"],
        tool_call_id=meta["tool_call_id"],
        tool_name=meta["tool_name"],
        is_error=meta["is_error"],
        synthetic=meta["synthetic"],
        seq=event.seq,
    )
    turn.headline = event.headline
    turn.label = event.label or _label(turn)
    return turn


def _describe(turn: Turn) -> None:
    if turn.role == "assistant":
        parsed = parse_headline(turn.text)
        turn.headline = parsed.text if parsed else None
    turn.label = _label(turn)


def _label(turn: Turn) -> str | None:
    return extractive_label(strip_headline(turn.text)) if turn.text else None


# -- OpenAI -----------------------------------------------------------------------------------


def _from_openai(message: dict[str, Any]) -> Turn:
    role = str(message.get("role"))
    native = copy.deepcopy(message)
    content = message.get("content")
    blocks, texts, form = _content_blocks(content)
    if "content" in native:
        native["content"] = None
    else:
        form = "absent"
    if role == "assistant":
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            blocks.append(
                {
                    "type": "call",
                    "id": str(call.get("id")),
                    "name": str(function.get("name")),
                    "args": str(function.get("arguments") or ""),
                }
            )
    turn = Turn(role, TEXT_JOIN.join(texts), "openai", blocks, native, form)
    if role == "tool":
        turn.tool_call_id = str(message.get("tool_call_id") or "")
        if not turn.tool_call_id:
            raise UsageError("an OpenAI tool message needs a tool_call_id")
        turn.tool_name = message.get("name")
    return turn


def _content_blocks(content: Any) -> tuple[list[dict[str, Any]], list[str], str]:
    if content is None:
        return [], [], "none"
    if isinstance(content, str):
        return [{"type": "text", "n": len(content)}], [content], "str"
    if not isinstance(content, list):
        raise UsageError(
            f"message content must be a string or a list, got {type(content).__name__}"
        )
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            text = str(part.get("text", ""))
            blocks.append({"type": "text", "n": len(text), "raw": _blank(part, "text")})
            texts.append(text)
        else:
            blocks.append({"type": "part", "raw": part})
    return blocks, texts, "list"


# -- Anthropic --------------------------------------------------------------------------------


def _from_anthropic(message: dict[str, Any]) -> list[Turn]:
    role = str(message.get("role"))
    content = message.get("content")
    if isinstance(content, str):
        return [Turn(role, content, "anthropic", [{"type": "text", "n": len(content)}])]
    if not isinstance(content, list):
        raise UsageError(
            f"message content must be a string or a list, got {type(content).__name__}"
        )
    turns: list[Turn] = []
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result" and role == "user":
            turns.append(_anthropic_result(block))
        elif kind == "text":
            text = str(block.get("text", ""))
            blocks.append({"type": "text", "n": len(text), "raw": _blank(block, "text")})
            texts.append(text)
        elif kind == "tool_use":
            args = json.dumps(block.get("input", {}), ensure_ascii=False)
            blocks.append(
                {
                    "type": "call",
                    "id": block["id"],
                    "name": block["name"],
                    "args": args,
                    "raw": block,
                }
            )
        elif kind in _REASONING_TYPES:
            blocks.append({"type": "reasoning", "raw": copy.deepcopy(block)})
        else:
            blocks.append({"type": "part", "raw": copy.deepcopy(block)})
    if blocks or not turns:
        turns.append(Turn(role, TEXT_JOIN.join(texts), "anthropic", blocks, None, "list"))
    return turns


def _anthropic_result(block: dict[str, Any]) -> Turn:
    blocks, texts, form = _content_blocks(block.get("content", ""))
    native = copy.deepcopy(block)
    if "content" in native:
        native["content"] = None
    else:
        form = "absent"
    turn = Turn("tool", TEXT_JOIN.join(texts), "anthropic", blocks, native, form)
    turn.tool_call_id = str(block.get("tool_use_id") or "")
    if not turn.tool_call_id:
        raise UsageError("an Anthropic tool_result block needs a tool_use_id")
    turn.is_error = bool(block.get("is_error", False))
    return turn


def _blank(block: dict[str, Any], key: str) -> dict[str, Any]:
    # The key stays (as None) so rendering puts the text back at its original position.
    blanked = copy.deepcopy(block)
    blanked[key] = None
    return blanked
