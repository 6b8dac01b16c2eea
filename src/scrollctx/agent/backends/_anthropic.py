"""The Anthropic Messages backend (Claude), behind the optional ``anthropic`` extra.

Invariants:

- The ``anthropic`` SDK is imported only inside this module's functions, on first use; when it
  is missing, :class:`~scrollctx.errors.MissingDependency` names
  ``pip install 'scrollctx[anthropic]'``.
- The neutral request is converted here and only here: system text (and any ``system``
  messages) goes to the separate ``system`` field; assistant tool calls become ``tool_use``
  blocks; ``tool`` messages become ``tool_result`` blocks in the following user turn (results
  first); consecutive same-role turns merge; the first turn is a user turn; and every
  ``tool_use`` must be answered in the very next turn, or :class:`UsageError` is raised before
  anything is sent.
- Thinking blocks (``thinking`` with its ``signature``, ``redacted_thinking``) are copied from
  the raw JSON answer into ``Completion.reasoning_blocks`` and sent back unchanged, first in
  their assistant turn, as the API requires.
- Every SDK call runs inside :func:`map_anthropic_errors` (``_anthropic_errors.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from scrollctx.config import Config
from scrollctx.errors import BadResponse, MissingCredentials, UsageError

from ._anthropic_errors import ANTHROPIC_KEY_HELP, import_sdk, map_anthropic_errors
from ._base import Backend, BackendOptions
from ._retry import RetryPolicy, call_with_retries
from ._secrets import redact
from ._settings import Endpoint, EndpointSource, resolve_endpoint
from ._types import (
    ChatRequest,
    Completion,
    Delta,
    Message,
    ToolCall,
    Usage,
    parse_tool_arguments,
)
from ._wire import WireDoor

__all__ = ["AnthropicBackend", "AnthropicOptions", "parse_message", "to_anthropic_messages"]

_log = logging.getLogger(__name__)

SOURCE = EndpointSource(
    backend="anthropic",
    key_variable="ANTHROPIC_API_KEY",
    base_url_variable="ANTHROPIC_BASE_URL",
    default_model="claude-sonnet-4-5",
    default_base_url="https://api.anthropic.com",
)
_PLACEHOLDER_KEY = "no-key-needed"
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
# The Messages API wants a user turn first; a conversation that opens with the assistant
# (e.g. after the opening was evicted) gets this neutral opener.
OPENING_USER_TEXT = "(conversation continues)"


@dataclass(frozen=True, slots=True)
class AnthropicOptions(BackendOptions):
    """Options of the Anthropic backend. ``thinking_budget`` turns on extended thinking."""

    max_tokens: int = 4096
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: tuple[str, ...] | None = None
    thinking_budget: int | None = None
    tool_choice: str | None = None
    timeout: float = 120.0


class AnthropicBackend(WireDoor, Backend):
    """Claude through the Anthropic Messages API."""

    name = "anthropic"
    supports_tools = True
    can_stream = True
    wire = "anthropic"
    wire_path = "/v1/messages"
    models_path = "/v1/models"
    Options = AnthropicOptions

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        options: BackendOptions | Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(model=model or SOURCE.default_model, options=options, retry=retry)
        self.options: AnthropicOptions
        self.base_url = base_url or SOURCE.default_base_url
        self._owns_client = client is None
        self._client = client or import_sdk().Anthropic(
            api_key=api_key or _PLACEHOLDER_KEY,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.options.timeout,
        )

    @classmethod
    def from_spec(
        cls,
        model: str | None,
        *,
        config: Config | None = None,
        environ: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AnthropicBackend:
        """Resolve endpoint, key and model (argument > env > config.toml > default)."""
        import_sdk()
        endpoint = resolve_endpoint(SOURCE, model=model, environ=environ or {}, config=config)
        _require_key(endpoint)
        return cls(
            model=endpoint.model,
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            options={**endpoint.options, **(options or {})},
        )

    def complete(self, request: ChatRequest) -> Completion:
        """Send one Messages request and parse the raw JSON answer."""
        body = self._body(request)
        data = call_with_retries(lambda: self._post(body), self.retry)
        return parse_message(data, model=self.model, backend=self.name)

    def stream(self, request: ChatRequest) -> Iterator[Delta | Completion]:
        """Stream deltas over SSE, then yield the assembled completion.

        Only opening the stream is retried; a failure mid-stream raises.
        """
        body = {**self._body(request), "stream": True}
        events = call_with_retries(lambda: self._open_stream(body), self.retry)
        builder = _MessageBuilder()
        with map_anthropic_errors(self.name):
            for event in events:
                delta = builder.add(event.to_dict())
                if delta.text or delta.reasoning:
                    yield delta
        yield parse_message(builder.answer(), model=self.model, backend=self.name)

    def read_answer(self, answer: Mapping[str, Any]) -> Completion:
        """Parse a message JSON answer (from :meth:`send`, or assembled from a stream)."""
        return parse_message(answer, model=self.model, backend=self.name)

    def stream_builder(self) -> _MessageBuilder:
        """A fresh builder that folds :meth:`send_stream` events into the non-streamed answer."""
        return _MessageBuilder()

    def close(self) -> None:
        """Close the HTTP client if this backend created it."""
        if self._owns_client:
            self._client.close()

    def _wire_body(self, body: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """The body with this backend's model and ``max_tokens`` where it names none."""
        wire = {k: v for k, v in body.items() if k != "stream"}
        wire.setdefault("model", self.model)
        wire.setdefault("max_tokens", self.options.max_tokens)
        if stream:
            wire["stream"] = True
        return wire

    def _wire_errors(self) -> AbstractContextManager[None]:
        return map_anthropic_errors(self.name)

    def _wire_stream_class(self) -> Any:
        return import_sdk().Stream[object]

    def _open_stream(self, body: dict[str, Any]) -> Any:
        _log.debug("POST messages (stream) %s", redact(_without_messages(body)))
        with map_anthropic_errors(self.name):
            return self._client.messages.create(**body)

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        options = self.options.merged(request.options)
        system, messages = to_anthropic_messages(request)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": options.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [tool.to_anthropic() for tool in request.tools]
            if options.tool_choice is not None:
                # accept the OpenAI spelling "required" for Anthropic's "any"
                choice = "any" if options.tool_choice == "required" else options.tool_choice
                body["tool_choice"] = {"type": choice}
        for key in ("temperature", "top_p", "top_k"):
            if getattr(options, key) is not None:
                body[key] = getattr(options, key)
        if options.stop:
            body["stop_sequences"] = list(options.stop)
        if options.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": options.thinking_budget}
        body["timeout"] = options.timeout  # an SDK request option, not a JSON field
        return body

    def _post(self, body: dict[str, Any]) -> Any:
        _log.debug("POST messages %s", redact(_without_messages(body)))
        with map_anthropic_errors(self.name):
            text = self._client.messages.with_raw_response.create(**body).http_response.text
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadResponse(
                f"{self.name} answered with invalid JSON ({exc.msg}): {redact(text[:200])!r}",
                backend=self.name,
            ) from exc


def _without_messages(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "messages"}


def _require_key(endpoint: Endpoint) -> None:
    if endpoint.api_key is None and endpoint.is_default_base_url:
        raise MissingCredentials(
            f"no API key for the anthropic backend (model {endpoint.model}); {ANTHROPIC_KEY_HELP}",
            backend="anthropic",
        )


# -- request conversion ---------------------------------------------------------------------


def to_anthropic_messages(request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """Convert the neutral request to ``(system, messages)`` for the Messages API.

    Raises:
        UsageError: a tool call without its result in the next turn, or a result without its
            call, or an unknown role.
    """
    system_parts = [request.system] if request.system else []
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        role = message["role"]
        if role == "system":
            system_parts.append(message.get("content") or "")
        elif role == "assistant":
            _append_turn(turns, "assistant", _assistant_blocks(message))
        elif role == "tool":
            _append_turn(turns, "user", [_tool_result_block(message)])
        elif role == "user":
            _append_turn(turns, "user", _text_blocks(message.get("content")))
        else:
            raise UsageError(f"message role {role!r} is not system, user, assistant or tool")
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]})
    _check_tool_pairing(turns)
    return "\n\n".join(part for part in system_parts if part), turns


def _text_blocks(content: str | None) -> list[dict[str, Any]]:
    # The API rejects empty text blocks; an empty message contributes nothing.
    return [{"type": "text", "text": content}] if content else []


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = [
        dict(block)
        for block in message.get("reasoning") or []
        if block.get("type") in _THINKING_TYPES
    ]
    blocks += _text_blocks(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments") or ""
        arguments, error = parse_tool_arguments(raw) if isinstance(raw, str) else (raw, None)
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                # Anthropic needs an object; unparseable text travels under one key, visibly.
                "input": arguments if error is None else {"raw_arguments": raw},
            }
        )
    return blocks


def _tool_result_block(message: Message) -> dict[str, Any]:
    call_id = message.get("tool_call_id")
    if not call_id:
        raise UsageError("a tool message has no tool_call_id; every tool result names its call")
    return {"type": "tool_result", "tool_use_id": call_id, "content": message.get("content") or ""}


def _append_turn(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": list(blocks)})
    if role == "user":
        # tool results must open the user turn that answers a tool call
        turns[-1]["content"].sort(key=lambda block: block["type"] != "tool_result")


def _check_tool_pairing(turns: Sequence[Mapping[str, Any]]) -> None:
    for index, turn in enumerate(turns):
        before = turns[index - 1] if index else None
        asked = _ids(before, "tool_use", "id") if before else []
        if stray := [i for i in _ids(turn, "tool_result", "tool_use_id") if i not in asked]:
            raise UsageError(
                f"tool result for {stray[0]!r} does not follow the tool call it answers; "
                "keep each tool call together with its result"
            )
        after = turns[index + 1] if index + 1 < len(turns) else None
        answered = _ids(after, "tool_result", "tool_use_id") if after else []
        if missing := [i for i in _ids(turn, "tool_use", "id") if i not in answered]:
            raise UsageError(
                f"tool call {missing[0]!r} has no tool result in the next message; "
                "keep each tool call together with its result"
            )


def _ids(turn: Mapping[str, Any], block_type: str, key: str) -> list[str]:
    return [b[key] for b in turn["content"] if b.get("type") == block_type]


# -- response parsing -----------------------------------------------------------------------


def parse_message(data: Any, *, model: str, backend: str) -> Completion:
    """Build a :class:`Completion` from a Messages API JSON body."""
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list):
        raise BadResponse(
            f"{backend} answered without content blocks: {redact(json.dumps(data)[:200])}",
            backend=backend,
        )
    texts, calls, thinking, blocks = [], [], [], []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "tool_use":
            calls.append(_tool_call(block))
        elif kind in _THINKING_TYPES:
            blocks.append(block)
            thinking.append(block.get("thinking") or "")
    return Completion(
        text="".join(texts),
        tool_calls=tuple(calls),
        reasoning="".join(thinking),
        reasoning_blocks=tuple(blocks),
        finish_reason=data.get("stop_reason"),
        usage=_usage(data.get("usage")),
        model=data.get("model") or model,
        backend=backend,
    )


def _tool_call(block: Mapping[str, Any]) -> ToolCall:
    arguments = block.get("input")
    if isinstance(arguments, dict):
        return ToolCall(
            id=block.get("id") or "",
            name=block.get("name") or "",
            arguments=arguments,
            raw_arguments=json.dumps(arguments),
        )
    return ToolCall(
        id=block.get("id") or "",
        name=block.get("name") or "",
        arguments={},
        raw_arguments=json.dumps(arguments),
        arguments_error=f"tool input is JSON {type(arguments).__name__}, expected an object",
    )


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("input_tokens"), int):
        return None
    prompt = sum(
        raw.get(key) or 0
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return Usage(prompt_tokens=prompt, completion_tokens=int(raw.get("output_tokens") or 0))


class _MessageBuilder:
    """Folds Messages API stream events back into the message JSON they describe."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}

    def add(self, event: Mapping[str, Any]) -> Delta:
        """Fold one event in; return the text and thinking it added."""
        kind = event.get("type")
        if kind == "message_start":
            self.head = dict(event["message"])
        elif kind == "content_block_start":
            self.blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            return self._add_delta(event["index"], event["delta"])
        elif kind == "message_delta":
            self.head.update(event.get("delta") or {})
            usage = self.head.setdefault("usage", {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        return Delta()

    def _add_delta(self, index: int, delta: Mapping[str, Any]) -> Delta:
        block = self.blocks[index]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return Delta(text=delta["text"])
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            return Delta(reasoning=delta["thinking"])
        if kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "input_json_delta":
            self.partial_json[index] = self.partial_json.get(index, "") + delta["partial_json"]
        return Delta()

    def answer(self) -> dict[str, Any]:
        """The message JSON the events seen so far add up to, blocks in index order."""
        for index, raw in self.partial_json.items():
            arguments, error = parse_tool_arguments(raw)
            self.blocks[index]["input"] = arguments if error is None else raw
        return {**self.head, "content": [self.blocks[i] for i in sorted(self.blocks)]}
