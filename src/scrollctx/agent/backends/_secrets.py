"""Keep credentials out of logs, traces and error messages.

Invariant: anything that serializes backend settings, request options or HTTP headers passes
through :func:`redact` first. Redaction is by key name for mappings (``api_key``,
``*_token``, ``secret``, ``password``, ``authorization``, cookies; not ``max_tokens``) and by
shape for free text (``sk-...`` keys, ``Bearer`` tokens, ``api_key=...`` pairs); it never needs
to know the secret itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, overload

__all__ = ["REDACTED", "redact"]

REDACTED = "[REDACTED]"

_SECRET_NAMES = frozenset({"authorization", "proxy_authorization", "cookie", "set_cookie", "token"})
_SECRET_SUFFIXES = ("api_key", "apikey", "_token", "secret", "password", "passwd", "credentials")
_SECRET_TEXT = [
    # provider keys: sk-..., sk-ant-..., sk-or-v1-..., and similar long prefixed tokens
    re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}"),
    re.compile(
        r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password)"
        r"(['\"]?\s*[=:]\s*)(['\"]?)[^\s'\",;&]+"
    ),
]


@overload
def redact(value: str) -> str: ...
@overload
def redact(value: Mapping[str, Any]) -> dict[str, Any]: ...
@overload
def redact(value: list[Any]) -> list[Any]: ...
def redact(value: Any) -> Any:
    """Return a copy of ``value`` with every credential replaced by ``[REDACTED]``.

    Example::

        redact({"api_key": "sk-abc", "model": "gpt-4o"})  # {'api_key': '[REDACTED]', ...}
        redact("Authorization: Bearer abc.def.ghi")          # 'Authorization: Bearer [REDACTED]'
    """
    if isinstance(value, str):
        return _redact_text(value)
    if isinstance(value, Mapping):
        return {
            key: _redact_item(key, item) if isinstance(key, str) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def _redact_item(key: str, item: Any) -> Any:
    if _is_secret_key(key) and item not in (None, ""):
        return REDACTED
    return redact(item)


def _is_secret_key(key: str) -> bool:
    name = key.lower().replace("-", "_")
    return name in _SECRET_NAMES or name.endswith(_SECRET_SUFFIXES)


def _redact_text(text: str) -> str:
    text = _SECRET_TEXT[0].sub(REDACTED, text)
    text = _SECRET_TEXT[1].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _SECRET_TEXT[2].sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}", text)
