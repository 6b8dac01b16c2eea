"""The provider-neutral values a backend takes and returns.

Invariants:

- Every value here is a frozen, slotted dataclass: a backend never mutates a request, and a
  completion is a record of what the provider said, not a working object.
- Conversation messages are OpenAI-style dicts (:class:`Message`): ``role`` is ``system``,
  ``user``, ``assistant`` or ``tool``; assistant messages may carry ``tool_calls`` (OpenAI wire
  shape, arguments as a JSON string) and ``reasoning`` (the provider's reasoning blocks, kept
  byte-for-byte so they can be sent back, e.g. Anthropic thinking blocks with signatures).
- Reasoning is kept exactly as the provider sent it: the adapters copy the JSON they received,
  they never re-serialize it through a model class.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "ChatRequest",
    "Completion",
    "Delta",
    "Message",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "parse_tool_arguments",
]


class Message(TypedDict):
    """One OpenAI-style conversation message, as the loop passes it to every backend."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    tool_calls: NotRequired[list[dict[str, Any]]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    reasoning: NotRequired[list[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: a name, what it does, and a JSON Schema for its arguments.

    Example::

        ToolSpec("repl_exec", "Run a Python cell.", {"type": "object",
                 "properties": {"source": {"type": "string"}}, "required": ["source"]})
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def to_openai(self) -> dict[str, Any]:
        """Render as an OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        """Render as an Anthropic ``tools`` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.parameters),
        }


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Everything one model call needs, independent of the provider.

    ``options`` are per-call overrides of the backend's options (``temperature``,
    ``max_tokens``...); the backend validates them and rejects unknown keys.
    """

    messages: Sequence[Message]
    system: str = ""
    tools: Sequence[ToolSpec] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model asked for.

    ``raw_arguments`` is the argument text exactly as received. When it is not a JSON object,
    ``arguments`` is empty and ``arguments_error`` says why, so the loop can show the model its
    mistake instead of guessing.
    """

    id: str
    name: str
    arguments: Mapping[str, Any]
    raw_arguments: str
    arguments_error: str | None = None

    @property
    def has_valid_arguments(self) -> bool:
        """Whether the raw arguments parsed to a JSON object."""
        return self.arguments_error is None

    def to_openai(self) -> dict[str, Any]:
        """Render in the OpenAI wire shape used inside assistant :class:`Message` dicts."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.raw_arguments},
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the provider reported for one call."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """What the model answered.

    ``reasoning`` is the readable reasoning text (OpenAI-compatible ``reasoning_content``,
    Anthropic ``thinking``), ``reasoning_blocks`` the provider's blocks exactly as received
    (Anthropic ``thinking`` / ``redacted_thinking`` with their signatures; for OpenAI-compatible
    servers one ``{"type": "reasoning_content", "text": ...}`` block). ``usage`` is ``None`` when
    the server reported none. ``model`` is the model name the provider reported.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str = ""
    reasoning_blocks: tuple[Mapping[str, Any], ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str = ""
    backend: str = ""

    def to_message(self) -> Message:
        """Render as the assistant :class:`Message` to append to the conversation."""
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.reasoning_blocks:
            message["reasoning"] = [dict(block) for block in self.reasoning_blocks]
        return message


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of a streamed answer: new text and/or new reasoning text."""

    text: str = ""
    reasoning: str = ""


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Parse tool-call argument text into a dict, or return ``({}, reason)`` when it is not one.

    Empty text means "no arguments" and parses to ``{}`` without error.
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
    except ValueError as exc:  # an integer of more digits than Python converts
        return {}, f"arguments are not usable JSON ({exc})"
    except RecursionError:  # nesting deeper than the decoder's stack
        return {}, "arguments are JSON nested too deeply to be a tool call's"
    if not isinstance(value, dict):
        return {}, f"arguments are JSON {type(value).__name__}, expected an object"
    return value, None
