"""The OpenAI-compatible chat-completions backend (OpenAI, vLLM, Ollama, llama.cpp server,
DashScope, OpenRouter: anything speaking ``/v1/chat/completions``).

Invariants:

- Every SDK call runs inside :func:`map_openai_errors`; the SDK's own retries are off
  (``max_retries=0``) so the one :class:`RetryPolicy` decides, with an injectable sleep.
- Non-streamed answers are parsed from the raw JSON body, not from SDK model objects, so
  ``reasoning_content`` and tool-call argument text reach the :class:`Completion` exactly as
  the server sent them, and servers that omit ``usage`` or ids still work.
- Tool-call arguments that are not a JSON object are kept raw and flagged
  (``ToolCall.arguments_error``), never dropped or "repaired".
- Only ``role``, ``content``, ``tool_calls``, ``tool_call_id`` and ``name`` of a message go on
  the wire; stored reasoning blocks stay local (several servers reject them as input).
- Requests every server tested accepts (the quirks live in :func:`_wire_message` and
  :func:`_reply_cap_key`, and docs/agent.md lists the servers): ``content`` is always a string
  (``""`` beside tool calls; llama-cpp-python's server rejects ``null``), and a reply cap is
  always sent (``max_tokens``; ``max_completion_tokens`` for the OpenAI API itself, whose
  reasoning models refuse ``max_tokens``), so no request can generate without end.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import openai

from scrollctx.config import Config
from scrollctx.errors import BackendError, BadResponse, MissingCredentials

from ._base import Backend, BackendOptions
from ._openai_errors import OPENAI_KEY_HELP, map_openai_errors
from ._retry import RetryPolicy, call_with_retries
from ._secrets import redact
from ._settings import Endpoint, EndpointSource, resolve_endpoint
from ._types import ChatRequest, Completion, Delta, Message, ToolCall, Usage, parse_tool_arguments
from ._wire import WireDoor

__all__ = ["OpenAIBackend", "OpenAIOptions"]

_log = logging.getLogger(__name__)

SOURCE = EndpointSource(
    backend="openai",
    key_variable="OPENAI_API_KEY",
    base_url_variable="OPENAI_BASE_URL",
    default_model="gpt-4o-mini",
    default_base_url="https://api.openai.com/v1",
)
# Local servers (vLLM, Ollama, llama.cpp) ignore the key, but the SDK insists on one.
_PLACEHOLDER_KEY = "no-key-needed"
DEFAULT_MAX_TOKENS = 4096
"""The reply cap sent when none is configured (the agent derives a smaller one from its budget)."""
_OPENAI_API_HOST = "api.openai.com"
_WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
_WIRE_KEY_SET = frozenset(_WIRE_KEYS)
_REASONING_KEYS = ("reasoning_content", "reasoning")


@dataclass(frozen=True, slots=True)
class OpenAIOptions(BackendOptions):
    """Options of the OpenAI-compatible backend; ``None`` leaves the server's default.

    ``extra_body`` is merged into the request JSON for server-specific knobs (vLLM's
    ``top_k``, DashScope's ``enable_thinking``...). ``stream_usage`` asks for a final usage
    chunk when streaming; turn it off for servers that reject ``stream_options``.
    ``send_reasoning`` sends stored ``reasoning_content`` back on assistant messages, for
    servers that want it during tool-call loops in thinking mode (DeepSeek, some Qwen hosts).
    ``max_tokens`` caps each reply (``DEFAULT_MAX_TOKENS`` when unset); ``timeout`` is the
    seconds one HTTP request may take. ``tool_choice`` is ``"auto"``, ``"required"``,
    ``"none"`` or a named tool, ``{"type": "function", "function": {"name": "submit_answer"}}``.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    extra_body: dict[str, Any] | None = None
    timeout: float = 120.0
    stream_usage: bool = True
    send_reasoning: bool = False


class OpenAIBackend(WireDoor, Backend):
    """Chat completions through the ``openai`` SDK against any OpenAI-compatible base URL."""

    name = "openai"
    supports_tools = True
    can_stream = True
    wire = "openai"
    wire_path = "/chat/completions"
    models_path = "/models"
    Options = OpenAIOptions

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        options: BackendOptions | Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        client: openai.OpenAI | None = None,
    ) -> None:
        super().__init__(model=model or SOURCE.default_model, options=options, retry=retry)
        self.options: OpenAIOptions
        self.base_url = base_url
        self._windows: dict[str, int | None] = {}
        self._owns_client = client is None
        self._client = client or openai.OpenAI(
            api_key=api_key or _PLACEHOLDER_KEY,
            base_url=base_url,
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
    ) -> OpenAIBackend:
        """Resolve endpoint, key and model (argument > env > config.toml > default)."""
        endpoint = resolve_endpoint(SOURCE, model=model, environ=environ or {}, config=config)
        _require_key(endpoint)
        merged = {**endpoint.options, **(options or {})}
        return cls(
            model=endpoint.model,
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            options=merged,
        )

    def complete(self, request: ChatRequest) -> Completion:
        """Send one chat-completions request and parse the raw JSON answer."""
        body = self._body(request, stream=False)
        data = call_with_retries(lambda: self._post(body), self.retry)
        return parse_chat_completion(data, model=self.model, backend=self.name)

    def stream(self, request: ChatRequest) -> Iterator[Delta | Completion]:
        """Stream deltas over SSE, then yield the assembled completion.

        Only opening the stream is retried; a failure mid-stream raises.
        """
        body = self._body(request, stream=True)
        chunks = call_with_retries(lambda: self._open_stream(body), self.retry)
        builder = _StreamBuilder(model=self.model, backend=self.name)
        with map_openai_errors(self.name):
            for chunk in chunks:
                delta = builder.add(chunk.model_dump())
                if delta.text or delta.reasoning:
                    yield delta
        yield builder.finish()

    def reported_window(self, model: str | None = None) -> int | None:
        """The window ``GET /v1/models`` gives for ``model`` (default: this backend's;
        ``max_model_len`` on vLLM, ``context_length`` on OpenRouter and LM Studio...), asked
        once per model; ``None`` when the server does not report one or cannot be asked (that
        is not an error: the caller falls back to its table)."""
        model = model or self.model
        if model not in self._windows:
            self._windows[model] = self._ask_window(model)
        return self._windows[model]

    def _ask_window(self, model: str) -> int | None:
        try:
            with map_openai_errors(self.name):
                listed = self._client.models.list()
        except BackendError as exc:
            _log.debug("GET models failed, no reported window: %s", exc)
            return None
        for entry in listed.data:
            if entry.id == model:
                return _window_of(entry.model_dump())
        return None

    def read_answer(self, answer: Mapping[str, Any]) -> Completion:
        """Parse a chat-completion JSON answer (from :meth:`send`, or assembled from a stream)."""
        return parse_chat_completion(answer, model=self.model, backend=self.name)

    def stream_builder(self) -> _StreamBuilder:
        """A fresh builder that folds :meth:`send_stream` chunks into the non-streamed answer."""
        return _StreamBuilder(model=self.model, backend=self.name)

    def close(self) -> None:
        """Close the HTTP client if this backend created it."""
        if self._owns_client:
            self._client.close()

    def _wire_body(self, body: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """Messages shaped as :meth:`complete` shapes them (wire keys only, ``content`` never
        null, reasoning back only with ``send_reasoning``); model and reply cap where absent."""
        wire = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        if isinstance(wire.get("messages"), list):
            send_reasoning = self.options.send_reasoning
            wire["messages"] = [
                _wire_message(m, send_reasoning=send_reasoning) for m in wire["messages"]
            ]
        wire.setdefault("model", self.model)
        if "max_tokens" not in wire and "max_completion_tokens" not in wire:
            wire[_reply_cap_key(self._client)] = self.options.max_tokens or DEFAULT_MAX_TOKENS
        if stream:
            wire["stream"] = True
            if self.options.stream_usage:
                wire["stream_options"] = {"include_usage": True}
        return wire

    def _wire_errors(self) -> AbstractContextManager[None]:
        return map_openai_errors(self.name)

    def _wire_stream_class(self) -> Any:
        return openai.Stream[object]

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        options = self.options.merged(request.options)
        messages = to_openai_messages(request, send_reasoning=options.send_reasoning)
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = [tool.to_openai() for tool in request.tools]
        for key in ("temperature", "top_p", "seed", "reasoning_effort"):
            if getattr(options, key) is not None:
                body[key] = getattr(options, key)
        body[_reply_cap_key(self._client)] = options.max_tokens or DEFAULT_MAX_TOKENS
        if options.stop:
            body["stop"] = list(options.stop)
        if request.tools and options.tool_choice is not None:
            body["tool_choice"] = options.tool_choice
        if request.tools and options.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.extra_body:
            body["extra_body"] = dict(options.extra_body)
        body["timeout"] = options.timeout  # an SDK request option, not a JSON field
        if stream:
            body["stream"] = True
            if options.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    def _post(self, body: dict[str, Any]) -> Any:
        _log.debug("POST chat/completions %s", redact(_summary(body)))
        with map_openai_errors(self.name):
            raw = self._client.chat.completions.with_raw_response.create(**body)
            text = raw.http_response.text
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadResponse(
                f"{self.name} answered with invalid JSON ({exc.msg}): {redact(text[:200])!r}",
                backend=self.name,
            ) from exc

    def _open_stream(self, body: dict[str, Any]) -> Any:
        _log.debug("POST chat/completions (stream) %s", redact(_summary(body)))
        with map_openai_errors(self.name):
            return self._client.chat.completions.create(**body)


_WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")


def _window_of(entry: Mapping[str, Any]) -> int | None:
    """The context window in a ``/v1/models`` entry, at its top level or under ``meta``."""
    for place in (entry, entry.get("meta") or {}):
        for key in _WINDOW_KEYS:
            value = place.get(key) if isinstance(place, Mapping) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _require_key(endpoint: Endpoint) -> None:
    if endpoint.api_key is None and endpoint.is_default_base_url:
        raise MissingCredentials(
            f"no API key for the openai backend (model {endpoint.model}); {OPENAI_KEY_HELP}",
            backend="openai",
        )


def _reply_cap_key(client: openai.OpenAI) -> str:
    """The OpenAI API wants ``max_completion_tokens``; compatible servers know ``max_tokens``."""
    host = client.base_url.host
    return "max_completion_tokens" if host == _OPENAI_API_HOST else "max_tokens"


def _summary(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "messages"} | {
        "messages": len(body.get("messages", ()))
    }


def to_openai_messages(
    request: ChatRequest, *, send_reasoning: bool = False
) -> list[dict[str, Any]]:
    """Render the request as OpenAI ``messages``: system text first, wire keys only."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        messages.append(_wire_message(message, send_reasoning=send_reasoning))
    return messages


def _wire_message(message: Message, *, send_reasoning: bool) -> dict[str, Any]:
    """The message with wire keys only and ``content`` never null; one already so is returned
    as it is, not copied (a proxy's 300-message view was copied on every request)."""
    if message.keys() <= _WIRE_KEY_SET and message.get("content") is not None:
        return message  # type: ignore[return-value]
    wire = {key: message[key] for key in _WIRE_KEYS if key in message}  # type: ignore[literal-required]
    if wire.get("content") is None:
        # Beside tool calls too: llama-cpp-python's server answers `null` with HTTP 500 (its
        # schema wants a string), and OpenAI, vLLM, Ollama and llama.cpp accept "".
        wire["content"] = ""
    if send_reasoning:
        for block in message.get("reasoning") or []:
            if block.get("type") in _REASONING_KEYS:
                wire[block["type"]] = block.get("text", "")
    return wire


def parse_chat_completion(data: Any, *, model: str, backend: str) -> Completion:
    """Build a :class:`Completion` from a chat-completions JSON body, tolerating gaps."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise BadResponse(
            f"{backend} answered without choices: {redact(json.dumps(data)[:200])}; "
            "check that the base URL points at an OpenAI-compatible /v1 endpoint",
            backend=backend,
        )
    choice = choices[0]
    message = choice.get("message") or {}
    reasoning_key, reasoning = _reasoning_of(message)
    return Completion(
        text=message.get("content") or "",
        tool_calls=tuple(
            _tool_call(raw, index) for index, raw in enumerate(message.get("tool_calls") or [])
        ),
        reasoning=reasoning,
        reasoning_blocks=({"type": reasoning_key, "text": reasoning},) if reasoning else (),
        finish_reason=choice.get("finish_reason"),
        usage=_usage(data.get("usage")),
        model=data.get("model") or model,
        backend=backend,
    )


def _reasoning_of(message: Mapping[str, Any]) -> tuple[str, str]:
    for key in _REASONING_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value:
            return key, value
    return "", ""


def _tool_call(raw: Mapping[str, Any], index: int) -> ToolCall:
    function = raw.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        # some servers (older Ollama) send an object instead of JSON text
        return ToolCall(
            id=raw.get("id") or f"call_{index}",
            name=function.get("name") or "",
            arguments=arguments,
            raw_arguments=json.dumps(arguments),
        )
    text = arguments if isinstance(arguments, str) else ""
    parsed, error = parse_tool_arguments(text)
    return ToolCall(
        id=raw.get("id") or f"call_{index}",
        name=function.get("name") or "",
        arguments=parsed,
        raw_arguments=text,
        arguments_error=error,
    )


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


class _StreamBuilder:
    """Accumulates chunk JSON into the answer a non-streamed request would have got."""

    def __init__(self, *, model: str, backend: str) -> None:
        self.model, self.backend = model, backend
        self.head: dict[str, Any] = {}
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_key = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def add(self, chunk: Mapping[str, Any]) -> Delta:
        """Fold one chunk in; return the text and reasoning it added."""
        if not self.head:
            self.head = {k: chunk[k] for k in ("id", "created", "model") if k in chunk}
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        text, reasoning = "", ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            reasoning += self._reasoning(delta)
            for call in delta.get("tool_calls") or []:
                self._add_call(call)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        self.text.append(text)
        self.reasoning.append(reasoning)
        return Delta(text=text, reasoning=reasoning)

    def _reasoning(self, delta: Mapping[str, Any]) -> str:
        for key in _REASONING_KEYS:
            value = delta.get(key)
            if isinstance(value, str) and value:
                self.reasoning_key = key
                return value
        return ""

    def _add_call(self, call: Mapping[str, Any]) -> None:
        slot = self.calls.setdefault(
            call.get("index") or 0, {"id": None, "name": "", "arguments": ""}
        )
        slot["id"] = call.get("id") or slot["id"]
        function = call.get("function") or {}
        slot["name"] += function.get("name") or ""
        slot["arguments"] += function.get("arguments") or ""

    def answer(self) -> dict[str, Any]:
        """The chat-completion JSON the chunks seen so far add up to."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        reasoning = "".join(self.reasoning)
        if reasoning:
            message[self.reasoning_key] = reasoning
        if self.calls:
            message["tool_calls"] = [
                {"id": slot["id"], "type": "function",
                 "function": {"name": slot["name"], "arguments": slot["arguments"]}}
                for _, slot in sorted(self.calls.items())
            ]  # fmt: skip
        answer: dict[str, Any] = {"object": "chat.completion", "model": self.model, **self.head}
        answer["choices"] = [{"index": 0, "message": message, "finish_reason": self.finish_reason}]
        if self.usage is not None:
            answer["usage"] = self.usage
        return answer

    def finish(self) -> Completion:
        """The completion assembled from every chunk seen."""
        return parse_chat_completion(self.answer(), model=self.model, backend=self.backend)
