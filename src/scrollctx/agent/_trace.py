"""Run traces: the JSON record of one run, shaped like the paper's Appendix D.

Shape::

    {"task_id": ..., "run_id": ..., "session_id": ..., "model": ..., "task": ...,
     "status": "answered" | "replied" | "failed", "answer": ..., "failure": ...,
     "metrics": {"tokens_in", "tokens_out", "wall_time_s", "step_count"},
     "steps": [{"step_index", "reasoning", "headline", "action": {"tool", "args"},
                "observation", "seq"}]}

One entry per action; a model response with two tool calls gives two entries with the same
``step_index``, and a response with no action gives one entry whose ``action`` is null.

Invariant: every string written has each **configured secret value** (``secrets``: the API
keys the run was given, in the environment or ``config.toml``; see :func:`configured_secrets`)
replaced by ``[REDACTED]``, so a credential that reached a message or an error text never
reaches the file; nothing else is rewritten (a trace of "basic transaction CRUD" says exactly
that: no pattern of plain words is redacted). The file is written whole to a temporary name and
renamed, so a trace is either complete or absent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.agent._events import RunMetrics
from scrollctx.agent.backends import REDACTED, redact
from scrollctx.config import Config
from scrollctx.log import storable_text

__all__ = ["TraceRecorder", "configured_secrets", "redact_secrets"]

_MIN_SECRET = 8
"""Shorter values (``EMPTY``, ``none``: placeholders local servers take) are not secrets."""


def configured_secrets(config: Config | None, environ: Mapping[str, str]) -> frozenset[str]:
    """The secret values a run was configured with: every environment variable whose name
    names a secret (``*_API_KEY``, ``*_TOKEN``, ``*SECRET``, ``*PASSWORD``: the names
    :func:`~scrollctx.agent.backends.redact` treats as secrets) and every ``api_key`` of the
    ``[backends.*]`` tables of ``config.toml``; values under eight characters are left out."""
    values = {value for name, value in environ.items() if redact({name: value})[name] == REDACTED}
    backends = config.settings.get("backends", {}) if config is not None else {}
    if isinstance(backends, Mapping):
        for section in backends.values():
            if isinstance(section, Mapping) and isinstance(section.get("api_key"), str):
                values.add(section["api_key"])
    return frozenset(v for v in values if len(v) >= _MIN_SECRET)


def redact_secrets(value: Any, secrets: frozenset[str]) -> Any:
    """A copy of ``value`` with each of ``secrets`` replaced by ``[REDACTED]`` in every string."""
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {key: redact_secrets(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_secrets(item, secrets) for item in value]
    return value


@dataclass(slots=True)
class TraceRecorder:
    """Collects the steps of one run and writes them as one JSON file."""

    task_id: str | None
    run_id: str
    session_id: str
    model: str
    task: str
    secrets: frozenset[str] = frozenset()
    steps: list[dict[str, Any]] = field(default_factory=list)
    _pending: dict[str, Any] | None = None

    def model_step(self, step_index: int, reasoning: str, headline: str | None) -> None:
        """Start the entries of one model response."""
        self._flush()
        self._pending = {
            "step_index": step_index,
            "reasoning": reasoning,
            "headline": headline,
            "action": None,
            "observation": None,
            "seq": None,
        }

    def action(
        self, step_index: int, tool: str, args: Mapping[str, Any], observation: str, seq: int
    ) -> None:
        """Record one action of the current response and its observation."""
        base = self._pending or {"step_index": step_index, "reasoning": "", "headline": None}
        # Further actions of the same response repeat its step_index, not its reasoning.
        self._pending = None
        entry = {**base, "action": {"tool": tool, "args": dict(args)}}
        entry.update(observation=observation, seq=seq)
        self.steps.append(entry)

    def observe(self, observation: str, seq: int) -> None:
        """Record what the model was told after a response with no action (a nudge)."""
        if self._pending is not None:
            self._pending.update(observation=observation, seq=seq)
            self._flush()

    def _flush(self) -> None:
        if self._pending is not None:
            self.steps.append(self._pending)
            self._pending = None

    def to_dict(
        self,
        *,
        status: str,
        answer: str | None,
        failure: str | None,
        metrics: RunMetrics,
        failure_type: str | None = None,
    ) -> dict[str, Any]:
        """Return the trace document."""
        self._flush()
        return {
            "task_id": self.task_id,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "model": self.model,
            "task": self.task,
            "status": status,
            "answer": answer,
            "failure": failure,
            "failure_type": failure_type,
            "metrics": metrics.to_dict(),
            "steps": self.steps,
        }

    def write(self, directory: Path, document: Mapping[str, Any]) -> Path:
        """Write the document to ``directory/<run_id>.json`` atomically; return the path."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.run_id}.json"
        temporary = path.with_suffix(".json.tmp")
        redacted = redact_secrets(dict(document), self.secrets)
        # A lone surrogate (a model's reply may hold one) is not UTF-8: as in the Event Log, it
        # is kept as the six characters of its escape (``\ud800``), so the two records agree.
        text = storable_text(json.dumps(redacted, ensure_ascii=False, indent=1), backslash="\\\\")
        try:
            temporary.write_bytes(text.encode("utf-8"))
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)  # a full disk keeps no half-written trace
            raise
        return path
