"""ChatGPT data export importer: ``conversations.json``, an array of conversations with a node tree.

Mapping (documented in docs/ingest.md, "ChatGPT export"):

- The path from the root to ``current_node`` (what the user saw last) is the session
  ``chatgpt:<conversation_id>``. Every other leaf (a regenerated answer, an edited prompt) is
  a branch session ``chatgpt:<conversation_id>:<leaf id>`` holding the nodes no earlier session
  holds, with ``branch_of`` (the session holding the node it forks from) and ``branch_point``
  (that node's id). Each node is imported once. ``task_id`` is ``chatgpt/<conversation_id>``.
  A damaged tree cannot hang or thin the import: a walk to the root stops at a node it already
  passed (a cycle of ``parent`` links), and nodes no leaf reaches (a cycle with no way out) are
  a branch session of their own, found from the first of them.
- ``user`` -> ``user_message``; ``assistant`` text -> ``model_turn``; an ``assistant`` message
  addressed to a tool (``recipient`` not ``all``; code interpreter ``code``) -> ``tool_call``
  (``tool_call_id`` = its node id, ``tool_input`` = ``{code, language}``); a ``tool`` message
  -> ``tool_result`` paired with its parent node's call (tree adjacency: the export has no call
  ids); ``system`` -> ``system``, not searchable. ``dedup_key`` is the node id.
- Content with ``parts`` keeps its text parts (other parts as ``[type]``, all of them in
  ``metadata.parts``); ``code`` / ``execution_output`` keep ``text``. Content of another
  type, or an unknown author role, is a :class:`Skip` reported with the node id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scrollctx.ingest._jsonstream import Sample, iter_array
from scrollctx.ingest._transcript import Item, SessionEvents, Skip, iso_utc, text_of_blocks
from scrollctx.log import Kind

__all__ = ["read_chatgpt", "sniff_chatgpt"]

SOURCE = "chatgpt"
_ROLES = {"user": Kind.USER_MESSAGE, "assistant": Kind.MODEL_TURN, "system": Kind.SYSTEM}


def sniff_chatgpt(sample: Sample) -> bool:
    """An array of conversations (or one) with a ``mapping`` tree and a ``current_node``."""
    first = sample.first
    return (
        sample.shape in ("array", "object", "jsonl")
        and isinstance(first, dict)
        and isinstance(first.get("mapping"), dict)
        and "current_node" in first
    )


def read_chatgpt(path: Path, sample: Sample) -> Iterator[Item]:
    """Yield the events of every conversation: its main path, then its branches."""
    records = iter_array(path) if sample.shape == "array" else iter([sample.first])
    for number, conversation in enumerate(records, start=1):
        if not sniff_chatgpt(Sample(path, "object", conversation)):
            yield Skip("conversation", number, "not a conversation (no mapping/current_node)")
            continue
        yield from _conversation(path, conversation)


def _conversation(path: Path, conversation: dict[str, Any]) -> Iterator[Item]:
    mapping: dict[str, Any] = conversation["mapping"]
    conv_id = str(conversation.get("conversation_id") or conversation.get("id"))
    main = f"{SOURCE}:{conv_id}"
    owner: dict[str, str] = {}
    for session_id, nodes, fork in _sessions(mapping, conversation.get("current_node"), main):
        lineage: dict[str, Any] = {
            "agent_kind": "main",
            "title": conversation.get("title"),
            "model": conversation.get("default_model_slug"),
            "source_file": str(path),
        }
        if fork is not None:
            lineage.update(branch_of=owner.get(fork, main), branch_point=fork)
        events = SessionEvents(SOURCE, session_id, f"{SOURCE}/{conv_id}", None, lineage)
        events.last_created = iso_utc(conversation.get("create_time"))
        for node_id in nodes:
            owner[node_id] = session_id
            item = _node(events, mapping, node_id)
            if item is not None:
                yield item


def _sessions(
    mapping: dict[str, Any], current: Any, main: str
) -> Iterator[tuple[str, list[str], str | None]]:
    """(session id, node ids root-first, the node it forks from) for the main path and branches."""
    assigned: set[str] = set()
    leaves = [str(current)] if current in mapping else []
    leaves += [nid for nid, node in mapping.items() if not node.get("children") and nid != current]
    leaves += list(mapping)  # then whatever no leaf reached (see the module doc)
    for leaf in leaves:
        if leaf in assigned:
            continue
        path, walked, node_id = [], set(), leaf
        while node_id in mapping and node_id not in assigned and node_id not in walked:
            path.append(node_id)
            walked.add(node_id)
            node_id = mapping[node_id].get("parent")
        fork = node_id if node_id in assigned else None
        assigned.update(path)
        session_id = main if leaf == current else f"{main}:{leaf}"
        yield session_id, path[::-1], fork


def _node(events: SessionEvents, mapping: dict[str, Any], node_id: str) -> Item | None:
    message = mapping[node_id].get("message")
    if not isinstance(message, dict):
        return None  # the tree's root holds no message
    role = (message.get("author") or {}).get("role")
    content = message.get("content") or {}
    ctype = content.get("content_type")
    text = _content_text(content)
    if text is None or (role not in _ROLES and role != "tool"):
        what = f"{role} {ctype}"
        return Skip(f"message {what}", None, f"node {node_id}: unknown ChatGPT message {what!r}")
    meta = {
        "node_id": node_id,
        "content_type": ctype,
        "recipient": message.get("recipient"),
        "status": message.get("status"),
        "weight": message.get("weight"),
        "message_metadata": message.get("metadata"),
    }
    if "parts" in content:
        meta["parts"] = content["parts"]
    model = (message.get("metadata") or {}).get("model_slug")
    if isinstance(model, str):
        events.lineage["model"] = model
    common: dict[str, Any] = {
        "key": node_id,
        "record_type": f"{role}/{ctype}",
        "created_at": iso_utc(message.get("create_time")),
        "metadata": meta,
    }
    if role == "tool":
        parent = mapping[node_id].get("parent")
        call = parent if _is_call(mapping.get(parent)) else None
        name = (message.get("author") or {}).get("name")
        return events.event(
            Kind.TOOL_RESULT, text, role="tool", name=name, tool_call_id=call, **common
        )
    if role == "assistant" and message.get("recipient") not in (None, "all"):
        recipient = str(message["recipient"])
        tool_input = {"code": text, "language": content.get("language")}
        return events.event(
            Kind.TOOL_CALL, text, role="assistant", name=recipient, tool_call_id=node_id,
            tool_input=tool_input, **common,
        )  # fmt: skip
    return events.event(_ROLES[role], text, role=role, searchable=role != "system", **common)


def _is_call(node: Any) -> bool:
    message = node.get("message") if isinstance(node, dict) else None
    return (
        isinstance(message, dict)
        and (message.get("author") or {}).get("role") == "assistant"
        and message.get("recipient") not in (None, "all")
    )


def _content_text(content: dict[str, Any]) -> str | None:
    if isinstance(content.get("parts"), list):
        return text_of_blocks(
            [p if isinstance(p, dict) else {"text": str(p)} for p in content["parts"]]
        )
    if isinstance(content.get("text"), str):
        return str(content["text"])
    if isinstance(content.get("result"), str):
        return str(content["result"])
    return None if content else json.dumps(content)
