"""What the proxy's two doors share: a parsed client request, the wire contract, digests, usage.

A *wire* is one provider API a client speaks and the upstream answers in: ``openai`` (chat
completions, :mod:`._openai_wire`) or ``anthropic`` (Messages, :mod:`._anthropic_wire`). Each
wire module does the same jobs for its format, and only those: check and split a client request
(:class:`ClientRequest`), give each message a fingerprint (what survives a client's echo of
it), build the upstream body from the working view, assemble the one assistant message the
client gets from the answers of a request, and shape replies, stream events and errors.

Invariants: a request that cannot be served raises :class:`~scrollctx.errors.UsageError` with a
message naming the field, before any of it is logged (the shape of the body in ``parse``, each
new message in ``check``); the client's tools, options and message
content pass through untouched (only Scroll's own additions are added, never merged into
theirs); digests depend only on fingerprints, so re-serialising a message (key order,
whitespace at its ends, a ``cache_control`` mark moving, thinking blocks dropped) keeps it the
same message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scrollctx.agent.backends import Completion, ToolSpec
from scrollctx.errors import UsageError
from scrollctx.view import HeadlineStripper, RenderedView

__all__ = [
    "MAX_MESSAGES",
    "Answer",
    "BodyFields",
    "ClientRequest",
    "VisibleText",
    "Wire",
    "answer_body",
    "body_fields",
    "canonical_json",
    "chain_digest",
    "fields",
    "require",
    "sum_usage",
]


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """One client request, checked and split into what the proxy treats differently."""

    wire: str
    system: str
    """The client's system prompt as text ("" when it sent none)."""
    messages: tuple[dict[str, Any], ...]
    """The conversation, in the wire's own message format, system messages taken out."""
    tools: tuple[dict[str, Any], ...] = ()
    """The client's tool entries, exactly as sent."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Every other body key (model, max_tokens, temperature...), passed upstream as sent."""
    stream: bool = False
    offset: int = 0
    """Where :attr:`messages` start in what the client sent (after its system messages)."""
    stream_usage: bool = False
    """The client asked for a usage chunk at the end of its stream (OpenAI)."""
    cached: bool = False
    """The client marked prompt-cache breakpoints (Anthropic ``cache_control``)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One upstream answer: its JSON as sent, its assistant message, and what it asked for."""

    raw: dict[str, Any]
    message: dict[str, Any]
    completion: Completion


class Wire(Protocol):
    """One provider format, both directions (see the module docstring)."""

    name: str

    def parse(self, body: Any) -> ClientRequest:
        """Check a client body and split it; raise UsageError naming what is wrong."""
        ...

    def check(self, message: Mapping[str, Any], position: int) -> None:
        """Check one new message (``position``: its index in what the client sent)."""
        ...

    def fingerprint(self, message: Mapping[str, Any]) -> bytes:
        """What of a message a client's echo of it keeps, encoded (see :func:`fields`)."""
        ...

    def upstream_body(
        self, request: ClientRequest, view: RenderedView, recall: ToolSpec, *, last: bool
    ) -> dict[str, Any]:
        """The upstream request: the view, the client's tools plus ``recall``, its options.

        ``last``: the recall budget of this request is spent; the model must answer now.
        """
        ...

    def message_of(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The assistant message of an answer, in the wire's message format."""
        ...

    def result_message(self, call_id: str, name: str, text: str, ok: bool) -> dict[str, Any]:
        """The message that carries the result of one of our tool calls."""
        ...

    def client_reply(self, answers: Sequence[Answer], own: str) -> dict[str, Any]:
        """The one assistant message the client gets for a request's answers.

        Every answer's visible text (headline lines stripped) and reasoning, and the client's
        own tool calls; never a call to the tool named ``own``.
        """
        ...

    def response(
        self, last: Answer, reply: Mapping[str, Any], usage: Any, extension: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The client's non-streamed answer: the last answer's JSON around ``reply``."""
        ...

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """An error body in the wire's own shape, for an error the proxy itself reports."""
        ...


@dataclass(frozen=True, slots=True)
class BodyFields:
    """The fields both wires check the same way (see :func:`body_fields`)."""

    messages: list[Any]
    tools: tuple[dict[str, Any], ...]
    stream: bool


MAX_MESSAGES = 100_000
"""The most messages one request may hold: each new one is digested, checked and logged before
the upstream is called, so a body of a million tiny messages (40 MB) held a proxy for hours."""


def body_fields(body: Any) -> BodyFields:
    """Check what every request body has: an object, ``messages``, ``tools``, ``stream``."""
    require(isinstance(body, dict), "the request body must be a JSON object")
    messages = body.get("messages")
    require(
        isinstance(messages, list) and bool(messages),
        "`messages` must be a non-empty list of message objects",
    )
    require(
        len(messages) <= MAX_MESSAGES,
        f"`messages` holds {len(messages):,} messages; scroll serve takes at most "
        f"{MAX_MESSAGES:,} in one request",
    )
    tools = body.get("tools") or []
    require(
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools),
        "`tools` must be a list of tool objects",
    )
    stream = body.get("stream", False)
    require(isinstance(stream, bool), "`stream` must be true or false")
    if set(map(type, messages)) != {dict}:  # what JSON parsing gives; one C pass, not 2,000 calls
        position = next(i for i, m in enumerate(messages) if type(m) is not dict)
        raise UsageError(f"message {position} must be an object")
    return BodyFields(messages, tuple(tools), stream)


def answer_body(
    last: Answer, changes: Mapping[str, Any], usage: Any, extension: Mapping[str, Any]
) -> dict[str, Any]:
    """The last upstream answer's JSON with ``changes``, the summed usage and ``scroll``."""
    body = {**last.raw, **changes}
    if usage is not None:
        body["usage"] = usage
    body["scroll"] = dict(extension)
    return body


def require(condition: bool, message: str) -> None:
    """Raise :class:`UsageError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UsageError(message)


def chain_digest(previous: str, fingerprint: bytes) -> str:
    """The digest of a conversation prefix: the previous prefix's digest and one more message."""
    return hashlib.sha256(previous.encode() + fingerprint).hexdigest()[:32]


def fields(*values: Any) -> bytes:
    """An unambiguous encoding of a few texts (each prefixed by its length), for fingerprints.

    A value that is not a text (a client's malformed field, refused later) counts as its JSON.
    A lone surrogate (JSON's ``"\\ud83d"``, half an emoji) is text a client may send: it is
    encoded as itself (``surrogatepass``), never an error.
    """
    texts = (v if isinstance(v, str) else "" if v is None else canonical_json(v) for v in values)
    return "".join(f"{len(t)}:{t}" for t in texts).encode("utf-8", "surrogatepass")


def canonical_json(value: Any) -> str:
    """JSON that does not depend on key order or spacing (tool arguments, blocks)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def sum_usage(usages: Sequence[Any]) -> Any:
    """Usage over several upstream answers: every number added up, key by key, nested too.

    One answer's usage is returned as it is (the upstream's own object); ``None`` when no
    answer reported any.
    """
    reported = [u for u in usages if isinstance(u, Mapping)]
    if len(reported) <= 1:
        return reported[0] if reported else None
    total: dict[str, Any] = {}
    for usage in reported:
        _add_into(total, usage)
    return total


def _add_into(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    for key, value in usage.items():
        had = total.get(key)
        if _is_number(value) and (had is None or _is_number(had)):
            total[key] = (had or 0) + value
        elif isinstance(value, Mapping) and isinstance(had, dict | None):
            _add_into(total.setdefault(key, {}), value)
        else:  # a flag, a text, or a field whose shape changed between answers: the first stays
            total.setdefault(key, value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class VisibleText:
    """The visible part of a streamed text: headline lines dropped
    (:class:`~scrollctx.view.HeadlineStripper`) and trailing whitespace held back until more
    text follows, so a streamed reply ends as the non-streamed one does (stripped)."""

    def __init__(self) -> None:
        self.stripper = HeadlineStripper()
        self.held = ""

    def feed(self, delta: str) -> str:
        """Take the next delta; return what may be shown now."""
        return self._keep(self.held + self.stripper.feed(delta))

    def finish(self) -> str:
        """What is left to show once the text ended (no trailing whitespace)."""
        return self._keep(self.held + self.stripper.finish())

    def _keep(self, text: str) -> str:
        shown = text.rstrip()
        self.held = text[len(shown) :]
        return shown
