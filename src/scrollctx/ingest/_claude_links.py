"""Where a Claude Code sub-agent file came from: its parent session and the call that spawned it.

Sub-agents live in three layouts: inline in the session file (``isSidechain`` records, linked
by the reader itself), ``agent-<id>.jsonl`` beside ``<session>.jsonl`` (2.0.x), and
``<session>/subagents/agent-<id>.jsonl`` with an ``agent-<id>.meta.json`` beside it (2.1.x).
For the two file layouts the spawning ``Task``/``Agent`` call is found in the parent file: the
tool result whose ``toolUseResult.agentId`` names the agent, else the one call whose prompt
equals the sub-agent's first message. Nothing else is guessed: no match, no link.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollctx.ingest._jsonstream import loads
from scrollctx.ingest._tail import JsonlTail

__all__ = ["SPAWN_TOOLS", "AgentFile", "find_spawning_call", "parent_file", "read_agent_meta"]

SPAWN_TOOLS = ("Task", "Agent")


@dataclass(frozen=True, slots=True)
class AgentFile:
    """What the sidecar ``.meta.json`` of a sub-agent file says (all optional)."""

    agent_type: str | None = None
    description: str | None = None
    worktree_path: str | None = None


def parent_file(path: Path, session_id: str) -> Path | None:
    """Return the parent session's file for the sub-agent file ``path``, if it exists."""
    folders = [path.parent]
    if path.parent.name == "subagents":
        folders.insert(0, path.parent.parent.parent)
    for folder in folders:
        candidate = folder / f"{session_id}.jsonl"
        if candidate.is_file() and candidate != path:
            return candidate
    return None


def read_agent_meta(path: Path) -> AgentFile:
    """Read ``agent-<id>.meta.json`` beside ``agent-<id>.jsonl`` (empty when absent or bad)."""
    meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
    try:
        data = loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return AgentFile()
    if not isinstance(data, dict):
        return AgentFile()
    return AgentFile(
        _opt_str(data.get("agentType")),
        _opt_str(data.get("description")),
        _opt_str(data.get("worktreePath")),
    )


def find_spawning_call(parent: Path, agent_id: str, prompt: str | None) -> str | None:
    """Return the ``tool_use`` id in ``parent`` that spawned ``agent_id``, or None."""
    by_prompt: list[str] = []
    for line in JsonlTail(parent).read(final=False):
        record = line.value
        if record is None:
            continue
        result = record.get("toolUseResult")
        for block in _blocks(record):
            if block.get("type") == "tool_result" and isinstance(result, dict):
                if result.get("agentId") == agent_id and block.get("tool_use_id"):
                    return str(block["tool_use_id"])
            if _spawns(block) and prompt is not None and block["input"].get("prompt") == prompt:
                by_prompt.append(str(block.get("id")))
    return by_prompt[0] if len(by_prompt) == 1 else None


def _spawns(block: dict[str, Any]) -> bool:
    return (
        block.get("type") == "tool_use"
        and block.get("name") in SPAWN_TOOLS
        and isinstance(block.get("input"), dict)
    )


def _blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
