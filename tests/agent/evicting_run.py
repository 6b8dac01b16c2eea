"""The script of an agent run whose working view folds and evicts (for the scripted server).

Fourteen ``repl_exec`` cells of 900 words each, every reply with 250 words of notes and a
headline, then ``submit_answer``: 15 model calls that, under ``BUDGET`` tokens, fold tool
outputs, evict exchanges and roll the index up. Used by the agent tests and the inspector's.
"""

from __future__ import annotations

from scripted_servers import ScriptedOpenAIServer

__all__ = ["ANSWER", "BUDGET", "CALLS", "enqueue_evicting_run"]

BUDGET = 6000
CALLS = 15
ANSWER = "all printed"


def _cell(words: int, tag: str) -> tuple[str, dict[str, str]]:
    return ("repl_exec", {"source": f"{tag} = ' '.join(['{tag}'] * {words}); print({tag})"})


def enqueue_evicting_run(server: ScriptedOpenAIServer) -> None:
    """Queue the run's replies (run it with ``budget_tokens=BUDGET``)."""
    for number in range(CALLS - 1):
        notes = " ".join(f"note{number}" for _ in range(250))
        headline = f"⟦ print batch {number} | {number} printed | print the next | in_progress ⟧"
        server.enqueue_tool_calls(
            [_cell(900, f"w{number}")], text=f"Printing batch {number}: {notes}\n{headline}"
        )
    server.enqueue_tool_calls([("submit_answer", {"answer": ANSWER})])
