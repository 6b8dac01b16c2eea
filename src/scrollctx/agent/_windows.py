"""The working view's window C for a model, and where it came from.

First that applies:

1. ``--budget-tokens`` / ``budget_tokens=`` / ``[view] budget_tokens`` in config.toml;
2. a local model's ``n_ctx`` (less its reply and a margin);
3. the window the server reports for the model in ``GET /v1/models`` (``max_model_len`` on
   vLLM, ``context_length`` on OpenRouter and LM Studio, ``context_window``...), when it does;
4. :data:`MODEL_WINDOWS`, a table of published windows, by model id prefix;
5. the backend's own ``context_window``;
6. 32,000.

A window from 3-5 is used less the reply cap, and at most :data:`MAX_DEFAULT_BUDGET` (sending
a million-token context by default would be a costly surprise; ``--budget-tokens`` sets any).
:class:`Budget` keeps the number and a sentence saying which rule gave it, for the user, the
trace and every result record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrollctx.agent.backends import Backend

__all__ = ["DEFAULT_BUDGET", "MAX_DEFAULT_BUDGET", "MODEL_WINDOWS", "Budget", "choose_budget"]

DEFAULT_BUDGET = 32_000
MAX_DEFAULT_BUDGET = 128_000
_REPLY_RESERVE = 4096
_LOCAL_MARGIN = 64

MODEL_WINDOWS: tuple[tuple[str, int], ...] = (
    # Published context windows (tokens), longest prefix first where they overlap. Checked
    # 2026-12 against the providers' model pages; add a line when a model family is missing.
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini", 1_048_576),
    ("llama-3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama-3.3", 131_072),
    ("meta-llama-3.1", 131_072),
    ("deepseek-chat", 128_000),
    ("deepseek-reasoner", 128_000),
    ("deepseek-v3", 128_000),
    ("mistral-large", 128_000),
    ("qwen2.5", 32_768),
    ("qwen3", 32_768),
)
"""(model id prefix, window): matched case-insensitively on the id after any ``vendor/``."""


@dataclass(frozen=True, slots=True)
class Budget:
    """The window C a view gets, and which rule chose it."""

    tokens: int
    source: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for records."""
        return {"tokens": self.tokens, "source": self.source}


def table_window(model: str) -> tuple[str, int] | None:
    """The :data:`MODEL_WINDOWS` entry for a model id (the longest matching prefix)."""
    name = model.rsplit("/", 1)[-1].lower()
    matches = [(prefix, window) for prefix, window in MODEL_WINDOWS if name.startswith(prefix)]
    return max(matches, key=lambda match: len(match[0])) if matches else None


def choose_budget(
    backend: Backend,
    options: Mapping[str, Any] | None = None,
    *,
    given: int | None = None,
    given_by: str = "--budget-tokens",
    model: str | None = None,
) -> Budget:
    """Choose C for ``backend`` (see the module docstring); ``options`` are the per-call
    options over the backend's own; ``model`` is the model a call names when it is not the
    backend's own (a proxy's client picks it per request)."""
    if given is not None:
        return Budget(given, given_by)
    merged = backend.options.merged(options).as_dict()
    reply = merged.get("max_tokens")
    n_ctx = merged.get("n_ctx")
    if isinstance(n_ctx, int):
        tokens = max(1024, n_ctx - int(reply or 256) - _LOCAL_MARGIN)
        return Budget(tokens, f"the local model's n_ctx ({n_ctx:,}) less the reply")
    reported = backend.reported_window(model)
    if reported is not None:
        return _from_window(reported, reply, "the server's /v1/models")
    entry = table_window(model or backend.model)
    if entry is not None:
        return _from_window(entry[1], reply, f"the model table ({entry[0]})")
    if backend.context_window is not None:
        return _from_window(backend.context_window, reply, f"the {backend.name} backend")
    return Budget(DEFAULT_BUDGET, f"the default {DEFAULT_BUDGET:,} (the model's window is unknown)")


def _from_window(window: int, reply: Any, where: str) -> Budget:
    tokens = max(1024, window - (int(reply) if isinstance(reply, int) else _REPLY_RESERVE))
    if tokens > MAX_DEFAULT_BUDGET:
        note = f"{where}: window {window:,}, capped at {MAX_DEFAULT_BUDGET:,}"
        return Budget(MAX_DEFAULT_BUDGET, note)
    return Budget(tokens, f"{where}: window {window:,} less the reply")
