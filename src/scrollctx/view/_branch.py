"""Branching a session: a new session that continues another as it stood at one of its events.

A client that edits or forks its history (resends an earlier part with something else after it)
must not write into the session it forked from: that session's history stays as it was, and
the new turns go to a *branch* that shares what came before the fork.

What the branch shares, and how:

- the evicted past, by reference: the parent's eviction index as it stood at the fork becomes
  the branch's first index event (its blocks written in full), so every index line still names
  the parent's exact seq span and ``ms.expand(lo, hi)`` recovers it;
- the live turns of that moment, by copy: each becomes an event of the branch (same text, same
  provider message, same metadata plus ``copy_of``: the original's seq), kept out of full-text
  search so a search finds the original once. Folded results stay folded. The copies are
  bounded by the view's budget, never by the length of the history.

Invariants: the parent gains no event; the branch's view, restored from the log, holds the
parent's turns and index of the fork (a folded result's stub names its copy's seq, which holds
the whole output) until the branch appends; the branch's first event records the lineage
(``branch_of``).
"""

from __future__ import annotations

import copy
from typing import Any

from scrollctx.log import Kind, NewEvent
from scrollctx.view._working import INDEX_KIND, STATE_KIND, WorkingView

__all__ = ["BRANCH_KEY", "branch_view"]

BRANCH_KEY = "branch_of"
"""Metadata key of a branch's first event: ``{"session_id": parent, "seq": fork seq}``."""


def branch_view(
    parent: WorkingView, session_id: str, *, event_fields: dict[str, Any] | None = None
) -> WorkingView:
    """Write a new session ``session_id`` that continues ``parent`` as it stands; return its view.

    ``parent`` is usually restored as it stood at the fork
    (``WorkingView.restore(..., before_seq=S + 1)``);
    its pending turns are not part of the branch. ``event_fields`` are the branch's lineage
    columns (agent_id...), written on every event of the branch.
    """
    log, fields = parent.log, dict(event_fields or {})
    fork = max((t.seq for t in parent.turns if t.seq is not None), default=0)
    marker = NewEvent(
        session_id=session_id,
        kind=Kind.SYSTEM,
        role="system",
        content=f"branch of session {parent.session_id} at seq {fork}",
        metadata={BRANCH_KEY: {"session_id": parent.session_id, "seq": fork}},
        searchable=False,
        **fields,
    )
    live = [turn for turn in parent.turns if turn.seq is not None]
    originals = {event.seq: event for event in log.events([t.seq for t in live if t.seq])}
    copies = [
        turn.to_event(
            session_id,
            **{
                **fields,
                "searchable": False,
                "metadata": _copied_metadata(originals[turn.seq].metadata, turn.seq),
            },
        )
        for turn in live
        if turn.seq is not None
    ]
    seqs = log.append_many([marker, *copies])[1:]
    if parent.index.block_count():
        folded = [seq for seq, turn in zip(seqs, live, strict=True) if turn.folded]
        state = {"live_from": seqs[0] if seqs else log.last_seq() + 1, "pinned": [],
                 "folded": folded}  # fmt: skip
        data = parent.index.to_data(state)
        data["session_id"] = session_id
        log.append(
            NewEvent(
                session_id=session_id,
                kind=INDEX_KIND if parent.with_index else STATE_KIND,
                role="system",
                content=f"eviction index of session {parent.session_id} at seq {fork}",
                metadata=data,
                searchable=False,
                **fields,
            )
        )
    return WorkingView.restore(
        log,
        session_id,
        parent.system_prompt,
        budget_tokens=parent.budget_tokens,
        rho=parent.rho,
        evict_to=parent.evict_to,
        counter=copy.copy(parent.counter),  # the calibration so far, not a shared object
        tail_groups=parent.tail_groups,
        keep_results=parent.keep_results,
        event_fields=fields,
        with_index=parent.with_index,
    )


def _copied_metadata(metadata: dict[str, Any], seq: int) -> dict[str, Any]:
    # Turn.to_event writes the view turn again; a copy of a copy names the first original.
    kept = {key: value for key, value in metadata.items() if key != "view_turn"}
    kept["copy_of"] = metadata.get("copy_of", seq)
    return kept
